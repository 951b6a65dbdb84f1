"""Exponential decay: the simplest linear ODE, with a closed-form solution."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class ExponentialDecay(Model):
    r"""First-order decay $\dot y = -k\,y$, e.g. radioactive decay or a first-order reaction.

    Exact solution from $t = 0$: $y(t) = y_0\,e^{-k t}$; the half-life is $\ln 2 / k$.

    **Parameters:** `k` (rate constant, 1/s; default 1). **State:** `y` (amount remaining,
    in any unit; default 1). Time in seconds.

    Source: the decay law of E. Rutherford and F. Soddy, "The cause and nature of
    radioactivity", Phil. Mag. 4, 370 (1902). The defaults are the unit scale (no
    literature value is needed for a linear test problem).
    """

    k: float = param(1.0, units="1/s", description="decay rate constant")
    state = State(y=Var(1.0, units="1", description="amount remaining"))
    time_units: ClassVar[str] = "s"

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)

    def exact(self, t):
        """Exact solution `{"y": y(t)}` from the initial state at $t = 0$; `t` of any shape."""
        return dict(y=self.initial_state()["y"] * jnp.exp(-self.k * jnp.asarray(t)))
