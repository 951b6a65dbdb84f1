"""Van der Pol relaxation oscillator."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class VanDerPol(Model):
    r"""Van der Pol oscillator $\ddot x - \mu(1 - x^2)\dot x + x = 0$, a limit-cycle oscillator.

    As a first-order system: $\dot x = v$, $\dot v = \mu(1 - x^2)\,v - x$. Every solution
    approaches a limit cycle of amplitude close to 2. For large $\mu$ (say $\mu \gtrsim 100$)
    the relaxation oscillations are stiff: pass `solver="kvaerno5"` to `simulate`.

    **Parameters** (dimensionless): `mu` (nonlinear damping strength; default 1).
    **State:** `x` (position; default 2, near the cycle's amplitude), `v` (velocity;
    default 0). Time in model units.

    Source: B. van der Pol, "On relaxation-oscillations", Phil. Mag. (7) 2, 978 (1926);
    stiffness for large $\mu$: E. Hairer and G. Wanner, *Solving Ordinary Differential
    Equations II* (2nd ed., Springer 1996), §IV.1. The default state is an arbitrary point
    near the limit cycle (no literature value is needed).
    """

    mu: float = param(1.0, units="1", description="nonlinear damping strength")
    state = State(
        x=Var(2.0, units="1", description="position"),
        v=Var(0.0, units="1", description="velocity"),
    )
    time_units: ClassVar[str] = "1"
    phase: ClassVar = ("x", "v")

    def rhs(self, t, s):
        return dict(x=s.v, v=self.mu * (1.0 - s.x**2) * s.v - s.x)
