"""A pendulum in Cartesian coordinates: a constrained mechanical system (a DAE)."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, VarInfo, param


class CartesianPendulum(Model):
    r"""A point mass on a rigid massless rod in Cartesian coordinates, with the rod's
    tension $\lambda$ (per unit mass and length) as an algebraic variable.

    $$x' = u,\quad y' = v,\quad u' = -\lambda x,\quad v' = -\lambda y - g,\qquad
    0 = x^2 + y^2 - L^2.$$

    The length constraint does not involve $\lambda$: the system has index 3, which
    difsim does not solve directly. Differentiating the constraint twice gives
    $\ddot c = u^2 + v^2 - \lambda (x^2 + y^2) - g y$ for $c = (x^2 + y^2 - L^2)/2$,
    which determines $\lambda$ (index 1). `rhs` imposes Baumgarte's stabilised form
    $\ddot c + 2\alpha \dot c + \alpha^2 c = 0$, so that the drift of the position
    constraint that the differentiation allows is damped at rate `alpha` (a critically
    damped oscillator in $c$); `alpha = 0` is the plain index-1 form, whose drift grows
    with time. `constraint` ($c$, kept in outputs) measures it.

    **Parameters:** `g` (9.81 m/s²), `L` (1 m), `alpha` (Baumgarte's rate, 0 = off; 1/s).
    **State:** `x` = L sin 1, `y` = −L cos 1 (1 rad from the vertical), `u`, `v` = 0
    (m, m/s); `lam` algebraic (1/s², made consistent).

    Source: E. Hairer and G. Wanner, *Solving Ordinary Differential Equations II* (2nd
    ed., Springer 1996), §VII.1 (the pendulum, index reduction); J. Baumgarte,
    "Stabilization of constraints and integrals of motion in dynamical systems", *Comput.
    Methods Appl. Mech. Eng.* 1, 1–16 (1972).
    """

    g: float = param(9.81, units="m/s2", description="gravitational acceleration")
    L: float = param(1.0, units="m", description="length of the rod")
    alpha: float = param(0.0, units="1/s", description="Baumgarte stabilisation rate")
    state = State(
        x=Var(0.8414709848078965, units="m", description="horizontal position"),
        y=Var(-0.5403023058681398, units="m", description="vertical position (up)"),
        u=Var(0.0, units="m/s", description="horizontal velocity"),
        v=Var(0.0, units="m/s", description="vertical velocity"),
        lam=Var(
            0.0, units="1/s2", description="rod tension per mass and length", algebraic=True
        ),  # fmt: skip
    )
    time_units: ClassVar[str] = "s"
    stiff: ClassVar[bool] = True
    phase: ClassVar = ("x", "y")
    phase_aspect: ClassVar[str] = "equal"
    invariants: ClassVar = {
        "constraint": VarInfo(units="m2", description="length constraint (x²+y²−L²)/2"),
    }

    def rhs(self, t, s):
        c = (s.x**2 + s.y**2 - self.L**2) / 2
        c_dot = s.x * s.u + s.y * s.v
        # c'' + 2 alpha c' + alpha^2 c = 0, with c'' = u² + v² - lam (x² + y²) - g y.
        tension = s.u**2 + s.v**2 - s.lam * (s.x**2 + s.y**2) - self.g * s.y
        residual = tension + 2 * self.alpha * c_dot + self.alpha**2 * c
        return dict(u=-s.lam * s.x, v=-s.lam * s.y - self.g, x=s.u, y=s.v, lam=residual)

    def constraint(self, s):
        r"""The drift of the position constraint, $(x^2 + y^2 - L^2)/2$ (0 on the circle)."""
        return (jnp.asarray(s["x"]) ** 2 + jnp.asarray(s["y"]) ** 2 - self.L**2) / 2
