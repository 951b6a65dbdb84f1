"""Linear (optionally damped) harmonic oscillator."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class HarmonicOscillator(Model):
    r"""Damped harmonic oscillator $\ddot x + 2\zeta\omega\,\dot x + \omega^2 x = 0$.

    As a first-order system: $\dot x = v$, $\dot v = -2\zeta\omega v - \omega^2 x$.
    Undamped for $\zeta = 0$, underdamped for $\zeta < 1$, critically damped at $\zeta = 1$.

    **Parameters:** `omega` (natural angular frequency, rad/s; default 1), `zeta` (damping
    ratio, dimensionless; default 0). **State:** `x` (position, m; default 1), `v`
    (velocity, m/s; default 0). Time in seconds. [`exact`][] gives the closed form.

    Source: the textbook linear oscillator, e.g. L. D. Landau and E. M. Lifshitz,
    *Mechanics* (3rd ed., Pergamon 1976), §§21 and 25. Defaults are the unit scale.
    """

    omega: float = param(1.0, units="rad/s", description="natural angular frequency")
    zeta: float = param(0.0, units="1", description="damping ratio")
    state = State(
        x=Var(1.0, units="m", description="position"),
        v=Var(0.0, units="m/s", description="velocity"),
    )
    time_units: ClassVar[str] = "s"
    phase: ClassVar = ("x", "v")

    def rhs(self, t, s):
        return dict(x=s.v, v=-2.0 * self.zeta * self.omega * s.v - self.omega**2 * s.x)

    def exact(self, t):
        r"""Exact `{"x": x(t), "v": v(t)}` from the initial state at $t = 0$, any $\zeta \ge 0$.

        With $\omega_d = \omega\sqrt{1 - \zeta^2}$ (imaginary when overdamped),
        $x = e^{-\zeta\omega t}\,[x_0 \cos\omega_d t
        + (v_0 + \zeta\omega x_0)\sin(\omega_d t)/\omega_d]$.
        """
        t = jnp.asarray(t)
        s0 = self.initial_state()
        x0, v0 = s0["x"], s0["v"]
        # Complex arithmetic covers under-, critically and over-damped motion in one formula;
        # sin(w t)/w is replaced by its limit t when w = 0 (critical damping).
        wd = self.omega * jnp.sqrt((1.0 - self.zeta**2) + 0j)
        safe = jnp.where(wd == 0, 1.0, wd)
        c = jnp.cos(wd * t).real
        s = jnp.where(wd == 0, t, (jnp.sin(wd * t) / safe).real)
        decay = jnp.exp(-self.zeta * self.omega * t)
        zw = self.zeta * self.omega
        return dict(
            x=decay * (x0 * c + (v0 + zw * x0) * s),
            v=decay * (v0 * c - (zw * v0 + self.omega**2 * x0) * s),
        )
