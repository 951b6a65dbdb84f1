"""Damped, sinusoidally driven pendulum (Baker & Gollub)."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class DampedDrivenPendulum(Model):
    r"""Damped driven pendulum in dimensionless form, chaotic for the default parameters.

    $$\dot\theta = \omega,\qquad \dot\omega = -\frac{\omega}{q} - \sin\theta + F\cos(\omega_d t)$$

    Time is measured in units of $1/\omega_0$, the inverse small-amplitude natural
    frequency $\sqrt{g/\ell}$.

    **Parameters** (dimensionless): `q` (quality factor; the damping coefficient is $1/q$;
    default 2), `F` (drive amplitude relative to the maximal gravitational torque; 1.5),
    `omega_d` (drive angular frequency relative to $\omega_0$; 2/3). **State:** `theta`
    (angle from the downward vertical, rad; default 0), `omega` (angular velocity
    $d\theta/d\tau$ with the dimensionless time $\tau = \omega_0 t$, so in rad; default
    0): the pendulum starts at rest, hanging down. Plots wrap `theta` into $(-\pi, \pi]$.

    Source: G. L. Baker and J. P. Gollub, *Chaotic Dynamics: An Introduction*
    (Cambridge University Press, 1990), whose chaotic example uses $q = 2$, $g = 1.5$ (our
    `F`) and $\omega_D = 2/3$.
    """

    q: float = param(2.0, units="1", description="quality factor (damping 1/q)")
    F: float = param(1.5, units="1", description="drive amplitude")
    omega_d: float = param(2.0 / 3.0, units="1", description="drive angular frequency")
    state = State(
        theta=Var(0.0, units="rad", description="angle from the downward vertical", angle=True),
        # Time is dimensionless (tau = omega_0 t), so d(theta)/d(tau) is in rad.
        omega=Var(0.0, units="rad", description="angular velocity dθ/dτ (τ = ω₀t)"),
    )
    time_units: ClassVar[str] = "1"
    phase: ClassVar = ("theta", "omega")

    def rhs(self, t, s):
        torque = -s.omega / self.q - jnp.sin(s.theta) + self.F * jnp.cos(self.omega_d * t)
        return dict(theta=s.omega, omega=torque)
