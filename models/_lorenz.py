"""Lorenz (1963) convection model."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class Lorenz(Model):
    r"""Lorenz (1963) convection model, the classic chaotic attractor.

    $$\dot x = \sigma (y - x),\quad \dot y = x(\rho - z) - y,\quad \dot z = xy - \beta z$$

    **Parameters** (dimensionless): `sigma` (Prandtl number, 10), `rho` (Rayleigh number
    relative to its critical value, 28), `beta` (geometric factor, 8/3). With these values
    the solution is chaotic. **State:** `x` (convection intensity), `y` and `z`
    (temperature variations). Time in model units.

    Source: E. N. Lorenz, "Deterministic nonperiodic flow", J. Atmos. Sci. 20, 130 (1963).
    """

    sigma: float = param(10.0, units="1", description="Prandtl number")
    rho: float = param(28.0, units="1", description="reduced Rayleigh number")
    beta: float = param(8.0 / 3.0, units="1", description="geometric factor")
    state = State(
        x=Var(1.0, units="1", description="convection intensity"),
        y=Var(0.0, units="1", description="horizontal temperature variation"),
        z=Var(0.0, units="1", description="vertical temperature variation"),
    )
    time_units: ClassVar[str] = "1"
    phase: ClassVar = ("x", "z")

    def rhs(self, t, s):
        return dict(
            x=self.sigma * (s.y - s.x),
            y=s.x * (self.rho - s.z) - s.y,
            z=s.x * s.y - self.beta * s.z,
        )
