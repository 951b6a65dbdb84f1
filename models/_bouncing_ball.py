"""A ball bouncing on the ground: the classic hybrid system (an impact changes the state)."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Event, Model, State, Var, param


def _height(t, s, m):
    return s.h


def _bounce(t, s, m):
    return dict(v=-m.e * s.v)


def _at_rest(t, s, m):
    return jnp.abs(s.v) < m.v_rest


class BouncingBall(Model):
    r"""A ball dropped in uniform gravity onto a rigid floor, bouncing with coefficient of
    restitution $e$:

    $$\dot h = v,\qquad \dot v = -g,\qquad v \mapsto -e\,v \text{ when } h \downarrow 0.$$

    Dropped from rest at height $h_0$, it first lands at $t_1 = \sqrt{2h_0/g}$, and the
    $n$-th landing is at $t_n = t_1\,(1 + 2e + 2e^2 + \dots + 2e^{n-1})$. With $e < 1$ the
    landings accumulate at $t_\infty = t_1 (1 + e)/(1 - e)$ (Zeno behaviour: infinitely
    many bounces in finite time). The event `bounce` stops the solve (`Status.EVENT`) once
    the speed after a bounce is below `v_rest`; with `v_rest = 0` the bounces go on until
    their spacing is below what the tolerances resolve (`Status.ZENO`, at $t_\infty$) or
    the event cap ends the solve (`Status.EVENT_LIMIT`), whichever comes first.

    **Parameters:** `g` (gravitational acceleration, m/s²; default 9.81), `e` (coefficient
    of restitution, 1; 0.8), `v_rest` (speed after a bounce below which the ball is taken
    to rest and the solve stops, m/s; 0.01). **State:** `h` (height above the floor, m;
    default 10), `v` (upward velocity, m/s; 0). Time in seconds.

    Source: the impact law of Newton's *Principia* (1687, Corollary VI to the Laws of
    Motion); as a hybrid-system benchmark, e.g. J. Lygeros, K. H. Johansson, S. N. Simić,
    J. Zhang and S. S. Sastry, "Dynamical properties of hybrid automata", IEEE Trans.
    Automatic Control 48, 2 (2003), whose bouncing ball is this model.
    """

    g: float = param(9.81, units="m/s^2", description="gravitational acceleration")
    e: float = param(0.8, units="1", description="coefficient of restitution")
    v_rest: float = param(0.01, units="m/s", description="speed taken as rest after a bounce")
    state = State(
        h=Var(10.0, units="m", description="height above the floor"),
        v=Var(0.0, units="m/s", description="upward velocity"),
    )
    time_units: ClassVar[str] = "s"
    events: ClassVar = (
        Event(_height, _bounce, direction="down", terminal=_at_rest, name="bounce"),
    )

    def rhs(self, t, s):
        return dict(h=s.v, v=-self.g * jnp.ones_like(s.v))
