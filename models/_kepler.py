"""Kepler two-body problem in the plane (units with GM = 1)."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, VarInfo, param

# `None` means "derive this initial value from the eccentricity `e`" (see initial_state):
# unlike a numeric placeholder it can never leak into a computation unnoticed.
_FROM_E = None


class Kepler(Model):
    r"""Kepler problem: a body orbiting a fixed centre of attraction, with $GM = 1$.

    $$\dot q = p,\qquad \dot p = -\frac{q}{\lVert q\rVert^3},\qquad q, p \in \mathbb{R}^2$$

    Energy $H = \tfrac12\lVert p\rVert^2 - 1/\lVert q\rVert$ and angular momentum
    $L = q_1 p_2 - q_2 p_1$ are conserved ([`energy`][], [`angular_momentum`][]); bound
    orbits ($H < 0$) are ellipses with semi-major axis $a = -1/(2H)$ and period
    $2\pi a^{3/2}$ ([`period`][]).

    **Parameter:** `e` (eccentricity, dimensionless, $0 \le e < 1$; default 0.6). It sets
    the initial state: perihelion of the orbit with $a = 1$ (period $2\pi$),
    $q = (1 - e, 0)$, $p = (0, \sqrt{(1 + e)/(1 - e)})$. **State:** `q1`, `q2` (position),
    `p1`, `p2` (momentum = velocity), in units of $a$ and $a/(\text{time unit})$.

    The default `state` holds `None` placeholders meaning "from `e`"; read the actual initial
    state with `model.initial_state()`. Setting a variable, e.g.
    `model.replace(**{"state.q1": 0.5})`, fixes the whole initial state: the other
    variables keep the values `e` gave them at that moment, and later changes of `e` no
    longer affect it. `jax.grad` with respect to `e` flows through the initial state.

    Source: E. Hairer, C. Lubich and G. Wanner, *Geometric Numerical Integration*
    (2nd ed., Springer 2006), §I.2.3, which uses these initial values with $e = 0.6$.
    """

    e: float = param(0.6, units="1", description="orbital eccentricity (sets initial state)")
    state = State(
        q1=Var(_FROM_E, units="1", description="position, first coordinate"),
        q2=Var(_FROM_E, units="1", description="position, second coordinate"),
        p1=Var(_FROM_E, units="1", description="momentum, first coordinate"),
        p2=Var(_FROM_E, units="1", description="momentum, second coordinate"),
    )
    time_units: ClassVar[str] = "1"
    # The orbit in the plane, undistorted; energy and angular momentum drift as a check.
    phase: ClassVar = ("q1", "q2")
    phase_aspect: ClassVar[str] = "equal"
    invariants: ClassVar = {
        "energy": VarInfo(units="1", description="total energy H"),
        "angular_momentum": VarInfo(units="1", description="angular momentum L"),
    }

    def initial_state(self) -> State:
        """Perihelion state of eccentricity `e`, for each variable not set explicitly."""
        e = self.e
        perihelion = dict(
            q1=1.0 - e,
            q2=jnp.zeros_like(e),
            p1=jnp.zeros_like(e),
            p2=jnp.sqrt((1.0 + e) / (1.0 - e)),
        )
        declared = self.state
        return declared.with_values(
            {k: perihelion[k] if v is None else v for k, v in declared.items()}
        )

    def rhs(self, t, s):
        r3 = (s.q1**2 + s.q2**2) ** 1.5
        return dict(q1=s.p1, q2=s.p2, p1=-s.q1 / r3, p2=-s.q2 / r3)

    @staticmethod
    def energy(s):
        r"""Total energy $H = \tfrac12(p_1^2 + p_2^2) - 1/\sqrt{q_1^2 + q_2^2}$ of a state
        (a `State` or a mapping such as `sol.ys`; arrays broadcast)."""
        return 0.5 * (s["p1"] ** 2 + s["p2"] ** 2) - 1.0 / jnp.sqrt(s["q1"] ** 2 + s["q2"] ** 2)

    @staticmethod
    def angular_momentum(s):
        r"""Angular momentum $L = q_1 p_2 - q_2 p_1$ of a state (or mapping of arrays)."""
        return s["q1"] * s["p2"] - s["q2"] * s["p1"]

    @classmethod
    def period(cls, s):
        r"""Orbital period $2\pi a^{3/2}$, $a = -1/(2H)$, of a bound state ($H < 0$)."""
        return 2.0 * jnp.pi * (-0.5 / cls.energy(s)) ** 1.5
