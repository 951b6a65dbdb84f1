"""Where event detection cannot be trusted, a status instead of a wrong answer (`_hybrid.py`).

A root-found event is seen by the sign of its condition at the ends of each solver step,
and located by Newton's method on the step's interpolant. Three things break that, and each
ends the solve with its own status:

- **Zeno accumulation** (`Status.ZENO`): the firings of one condition come ever closer, as
  a bouncing ball's landings do; once their spacing shrinks below what the solve's time
  tolerance resolves, the next crossings are lost (the ball falls through the floor). The
  solve stops at the first firing whose spacing, shrinking, is within `ZENO_SPACINGS` time
  tolerances, or whose geometric extrapolation puts the accumulation point within
  `ZENO_REMAINING` of them; or at two firings in a row with no resolvable time between.
- **A lost crossing** (`Status.EVENT_LOST`): a directional condition passed zero in its
  direction during a pass, earlier than the event that was located (two crossings in one
  step, diffrax takes the first declared), or the located root is not a crossing in the
  event's direction (the condition's rate there has the wrong sign: Newton found another
  zero in the step). Found at the end of each pass.
- **A non-finite condition** (`Status.NONFINITE`): NaN compares false with everything, so
  a NaN condition never fires. Checked at the start and end of each pass and, under an
  adaptive step, on every step ([`ConditionGuard`][]: the solve stops where the
  condition stops being finite).
"""

from typing import NamedTuple

import diffrax as dfx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from difsim._core._event import Event
from difsim._core._nonfinite import NonfiniteGuard, guard_nonfinite
from difsim._core._vector_field import Layout, VectorField
from difsim._core._wrapped_controller import AbstractWrappedController

# Firings of one condition this many time tolerances apart, their spacing shrinking, are
# taken to accumulate: the bouncing ball's landing times are right to ~1e-3 of the spacing
# there, and crossings are lost around one tolerance (tests/test_event_guard.py).
ZENO_SPACINGS = 10.0
# ... or whose geometric extrapolation (spacing ratio r: t_inf - t = dt r / (1 - r)) puts
# the accumulation point within this many tolerances: catches fast accumulation earlier.
ZENO_REMAINING = 40.0
# Consecutive shrinking spacings needed (a periodic event's noisy spacing shrinks at random
# half the time: two in a row and below the resolution is no longer noise).
SHRINKS = 2
# The resolution never falls below this many ulps of `t`.
ULPS = 64


class Watch(NamedTuple):
    """Per root-found event: when it last fired (`-inf`: never), the spacing before that
    (`inf`: none), and how many of its spacings in a row shrank."""

    last_t: Float[Array, " root"]
    last_dt: Float[Array, " root"]
    shrinks: Int[Array, " root"]

    @classmethod
    def empty(cls, n: int, dtype) -> "Watch":
        n = max(n, 1)
        return cls(
            jnp.full(n, -jnp.inf, dtype), jnp.full(n, jnp.inf, dtype), jnp.zeros(n, jnp.int32)
        )


def resolution(root_finder, t) -> Float[Array, ""]:
    """The time within which located events cannot be told apart at `t`: the root
    finder's tolerance on the event time (at least `ULPS` ulps of `t`)."""
    t = jnp.asarray(t)
    tol = jnp.asarray(root_finder.atol + root_finder.rtol * jnp.abs(t), t.dtype)
    return jnp.maximum(tol, ULPS * jnp.finfo(t.dtype).eps * jnp.abs(t))


def probe(events: tuple[Event, ...], layout: Layout, model, t, y):
    """`(values, rates)`: each root-found condition at `(t, y)` and its rate of change along
    the solution there (0 for a boolean condition, and for a stochastic model: its drift
    does not say where the noise takes the condition), shape `(len(events),)`."""
    f = VectorField(layout, "rhs")(t, y, model)
    if model.is_stochastic():
        f = jax.tree.map(jnp.zeros_like, f)
    values, rates = [], []
    for event in events:
        g_of = lambda t, y, e=event: e.value(t, layout.view(y), model)  # noqa: E731
        g, g_dot = jax.jvp(g_of, (t, y), (jnp.ones_like(t), f))
        real = jnp.issubdtype(g.dtype, jnp.floating)
        values.append(g.astype(t.dtype) if real else jnp.zeros_like(t))
        rates.append(g_dot.astype(t.dtype) if real else jnp.zeros_like(t))
    if not events:
        return jnp.zeros((1,), t.dtype), jnp.zeros((1,), t.dtype)
    return jnp.stack(values), jnp.stack(rates)


def accelerations(events: tuple[Event, ...], layout: Layout, model, t, y):
    """Each root-found condition's second derivative along the solution at `(t, y)` (0
    for a boolean condition), shape `(len(events),)`: whether a condition sitting on its
    zero with zero rate leaves it forward or back."""
    if model.is_stochastic():  # no second derivative along a Brownian path
        return jnp.zeros((max(len(events), 1),), t.dtype)
    field = VectorField(layout, "rhs")
    tangent = (jnp.ones_like(t), field(t, y, model))
    out = []
    for event in events:

        def g_of(t, y, e=event):
            return e.value(t, layout.view(y), model)

        def rate(t, y, g_of=g_of):
            return jax.jvp(g_of, (t, y), (jnp.ones_like(t), field(t, y, model)))[1]

        if jnp.issubdtype(jax.eval_shape(g_of, t, y).dtype, jnp.floating):
            out.append(jax.jvp(rate, (t, y), tangent)[1].astype(t.dtype))
        else:
            out.append(jnp.zeros_like(t))
    return jnp.stack(out) if out else jnp.zeros((1,), t.dtype)


def _signs(events: tuple[Event, ...], dtype) -> Float[Array, " root"]:
    """Per event, the sign its condition has before a crossing in its direction (+1 for
    "down", -1 for "up", 0 for both directions)."""
    side = {None: 0.0, True: -1.0, False: 1.0}
    return jnp.asarray([side[e.direction] for e in events] or [0.0], dtype)


def lost(events, start_signs, values, rates, slot, root_fired, res) -> Bool[Array, ""]:
    """Whether a pass lost a crossing: a directional condition other than the one that
    fired went, between the pass's start (sign `start_signs`) and its end (`values`,
    `rates`), from the side before its zero to beyond it by more than `res` in time; or
    the root that fired is not a crossing in its event's direction."""
    pre = _signs(events, values.dtype)
    crossed = (start_signs * pre > 0) & (values * pre < 0)
    beyond = jnp.abs(values) > jnp.abs(rates) * res
    other = ~(root_fired & (jnp.arange(values.shape[0]) == slot))
    missed = jnp.any(crossed & beyond & other)
    return missed | (root_fired & wrong_way(events, rates, slot))


def wrong_way(events, rates, slot) -> Bool[Array, ""]:
    """Whether root-found event `slot` fired where its condition moves against its
    direction (a zero of the interpolant that is no crossing the event waits for)."""
    pre = _signs(events, rates.dtype)
    return rates[slot] * pre[slot] > 0


def accumulates(watch: Watch, slot, t, res) -> tuple[Bool[Array, ""], Watch]:
    """`(zeno, watch)`: whether a firing of root-found event `slot` at `t` is one of an
    accumulating (Zeno) sequence, and the watch updated with it (to keep when the event
    is applied)."""
    dt = t - watch.last_t[slot]
    prev = watch.last_dt[slot]
    shrinking = jnp.isfinite(prev) & (dt < prev)
    shrinks = jnp.where(shrinking, watch.shrinks[slot] + 1, 0)
    remaining = jnp.where(shrinking, dt * dt / (prev - dt), jnp.inf)  # dt r / (1 - r)
    close = (dt < ZENO_SPACINGS * res) | (remaining < ZENO_REMAINING * res)
    stuck = (dt <= res) & (prev <= res)  # two firings in a row, no resolvable time between
    zeno = ((shrinks >= SHRINKS) & close) | stuck
    new = Watch(
        watch.last_t.at[slot].set(t),
        watch.last_dt.at[slot].set(dt),
        watch.shrinks.at[slot].set(shrinks.astype(jnp.int32)),
    )
    return zeno, new


def too_close(watch: Watch, slot, t, res) -> Bool[Array, ""]:
    """Whether root-found event `slot` fires at `t` within `ZENO_SPACINGS` resolutions of
    its last firing."""
    return (t - watch.last_t[slot]) < ZENO_SPACINGS * res


class ConditionGuard(AbstractWrappedController):
    """An adaptive controller that treats a step whose state is finite but where a
    real-valued condition of `events` is NaN or infinite as a non-finite step: the
    wrapped [`NonfiniteGuard`][difsim._core._nonfinite.NonfiniteGuard] refuses it and
    shrinks the step, and ends the solve with `RESULTS.nonfinite` once the step is
    negligible, at the time the condition stops being finite. Decisions are otherwise
    the wrapped controller's; its tolerances and norm are the guard's (implicit solvers
    read them)."""

    controller: NonfiniteGuard
    events: tuple[Event, ...]
    layout: Layout

    def wrap(self, direction):
        return ConditionGuard(self.controller.wrap(direction), self.events, self.layout)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        return self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        view = self.layout.view(y1_candidate)
        values = [e.value(t1, view, args) for e in self.events]
        real = [g for g in values if jnp.issubdtype(g.dtype, jnp.floating)]
        bad = _finite(jax.tree.leaves(y1_candidate)) & ~_finite(real)
        y1_candidate = jax.tree.map(lambda v: jnp.where(bad, jnp.nan, v), y1_candidate)
        y_error = jax.tree.map(lambda v: jnp.where(bad, jnp.inf, v), y_error)
        return self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state
        )


def _finite(arrays) -> Bool[Array, ""]:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays] or [jnp.array(True)]))


def guard_conditions(controller, events: tuple[Event, ...], layout: Layout):
    """`controller` wrapped in a [`ConditionGuard`][] for `events`, when it adapts the step
    (a fixed step is checked at the ends of each pass only)."""
    if not events or not isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
        return controller
    return ConditionGuard(guard_nonfinite(controller), events, layout)
