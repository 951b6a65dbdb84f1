"""The step loop of one block of lanes: one `lax.while_loop`, every lane its own `t`,
`dt`, accept/reject, save cursor and status; the loop ends when no lane is running."""

from typing import Any, NamedTuple

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Float, Int

from difsim._ensemble._control import (
    DIFFRAX_FIRST_STEP,
    Controller,
    all_finite,
    clip_floor,
    next_interval,
    scaled_error,
)
from difsim._ensemble._field import BatchField, BlockRHS, Lanes, per_lane
from difsim._ensemble._methods import AbstractEnsembleMethod
from difsim._status import Status

RUNNING = -1
# Rejected steps with a non-finite candidate after which a lane is NONFINITE. A step that
# overshoots into a region where the model is undefined (a square root of a negative
# number) is rejected and shrunk 5x, and the solve goes on; a lane that keeps meeting
# NaN/inf — its right-hand side is undefined from some time on, or its state blows up —
# stops within a few dozen steps instead of creeping towards the singularity until
# max_steps.
NONFINITE_REJECTS = 40


class Plan(eqx.Module):
    """What a block solve needs besides its data (all static). `reverse`: run the step
    loops as reverse-mode differentiable loops that keep `checkpoints` copies of a
    block's state (`None`: equinox's default, about `sqrt(2 max_steps)`) and recompute
    the steps in between on the backward pass."""

    method: AbstractEnsembleMethod
    controller: Controller = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    final_only: bool = eqx.field(static=True)
    reverse: bool = eqx.field(static=True, default=False)
    checkpoints: int | None = eqx.field(static=True, default=None)
    # The discrete adjoint's iterations per segment (`_discrete.py`); `None`: not used.
    discrete: int | None = eqx.field(static=True, default=None)

    def while_loop(self, cond, body, init, *, max_steps: int, buffers, checkpoints=None):
        """`lax.while_loop(cond, body, init)`, or with `reverse` its checkpointed
        counterpart, for which the arrays `buffers(init)` are written once per entry and
        never saved in the checkpoints."""
        if not self.reverse:
            return lax.while_loop(cond, body, init)
        return eqxi.while_loop(
            cond, body, init, max_steps=max_steps, buffers=buffers, kind="checkpointed",
            checkpoints=checkpoints if checkpoints is not None else self.checkpoints,
        )  # fmt: skip


class Carry(NamedTuple):
    tprev: Float[Array, " lanes"]
    tnext: Float[Array, " lanes"]
    y: Lanes
    f0: Lanes
    status: Int[Array, " lanes"]
    steps: Int[Array, "3 lanes"]  # attempted, accepted, rejected
    bad: Int[Array, " lanes"]  # rejections for a non-finite candidate
    cursor: Int[Array, " lanes"]  # index of the next save time
    saved: dict[str, Array]  # {var: (lanes, time + 1, *shape)}: the last row is scratch


def solve_block(
    field: BatchField, plan: Plan, points, y0: Lanes, t0, t1, ts, dt0
) -> tuple[dict, dict]:
    """Integrate one block. `points`: `{key: (lanes, *shape)}`; `y0`: the lanes' initial
    states ([`BatchField.initial`][]); `ts`: save times `(time,)` or `None` (final state
    only); `dt0`: scalar or `None` (automatic first step).

    **Returns:** `(ys, stats)`: `ys = {var: (lanes, time, *shape)}` (NaN where not
    reached), `stats = {"status", "num_steps", "num_accepted_steps",
    "num_rejected_steps"}`, each `(lanes,)`.
    """
    carry, body = start_block(field, plan, points, y0, t0, t1, ts, dt0)
    carry = plan.while_loop(
        lambda c: jnp.any(c.status == RUNNING), body, carry,
        max_steps=plan.max_steps, buffers=lambda c: c.saved,
    )  # fmt: skip
    return finish_block(carry, ts)


def start_block(field: BatchField, plan: Plan, points, y0: Lanes, t0, t1, ts, dt0):
    """The first carry of a block solve (its initial saves written) and the loop's body,
    `Carry -> Carry` (arguments as [`solve_block`][]'s)."""
    f = BlockRHS(field, points)
    lanes = jax.tree.leaves(y0)[0].shape[0]
    dtype = field.dtype
    t = jnp.full((lanes,), t0, dtype)
    f0 = f(t, y0)
    h = jnp.minimum(t + (DIFFRAX_FIRST_STEP if dt0 is None else dt0), t1) - t
    n = 1 if ts is None else ts.shape[0]
    # One scratch row beyond the save times takes the writes of lanes with nothing to save
    # (an out-of-bounds write would be dropped, but its transpose reads a NaN fill value).
    saved = {k: jnp.full((lanes, n + 1, *v.shape[1:]), jnp.nan, dtype) for k, v in y0.items()}
    ok = all_finite(y0) & all_finite(f0)
    carry = Carry(
        t, t + h, y0, f0,
        jnp.where(ok, RUNNING, int(Status.NONFINITE)).astype(jnp.int32),
        jnp.zeros((3, lanes), jnp.int32), jnp.zeros((lanes,), jnp.int32),
        jnp.zeros((lanes,), jnp.int32), saved,
    )  # fmt: skip
    if ts is not None:
        carry = _save(carry, plan, ts, None, t, t, y0, y0, ok)
    floor = clip_floor(jnp.asarray(t1, dtype))
    return carry, lambda c: _body(c, f, plan, t1, floor, ts)


def finish_block(carry: Carry, ts) -> tuple[dict, dict]:
    """`(ys, stats)` of a finished block (see [`solve_block`][])."""
    ys = block_outputs(carry.status, carry.y, carry.saved, ts)
    stats = dict(
        status=carry.status,
        num_steps=carry.steps[0],
        num_accepted_steps=carry.steps[1],
        num_rejected_steps=carry.steps[2],
    )
    return ys, stats


def block_outputs(status, y: Lanes, saved: dict[str, Array], ts) -> dict[str, Array]:
    """A finished block's `{var: (lanes, time, *shape)}`: with `ts` the saved rows (the
    scratch row dropped), else the final state, NaN for lanes that did not succeed."""
    if ts is not None:
        return {k: v[:, :-1] for k, v in saved.items()}
    good = status == Status.SUCCESS
    return {k: jnp.where(per_lane(good, v), v, jnp.nan)[:, None] for k, v in y.items()}


def _body(c: Carry, f, plan: Plan, t1, floor, ts) -> Carry:
    active = c.status == RUNNING
    h = jnp.where(active, c.tnext - c.tprev, 0)
    f = f.stepping(active)
    out = plan.method.step(f, c.tprev, c.y, h, c.f0)
    ctrl = plan.controller
    err = scaled_error(c.y, out.y1, out.y_err, ctrl.rtol, ctrl.atol)
    finite = all_finite(out.y1) & all_finite(out.f1) & jnp.isfinite(err)
    # Read by most of what follows: computed once (`_boundary.py`).
    accept, factor, finite = f.stored(ctrl.decide(err, finite) + (finite,))
    accept = accept & active
    if ts is not None:
        c = _save(c, plan, ts, out.dense, c.tprev, c.tnext, c.y, out.y1, accept)
    keep = lambda new, old: jnp.where(per_lane(accept, new), new, old)  # noqa: E731
    y, f0 = jax.tree.map(keep, out.y1, c.y), jax.tree.map(keep, out.f1, c.f0)
    bad = c.bad + (active & ~finite)
    steps = c.steps + jnp.stack([active, accept, active & ~accept]).astype(jnp.int32)
    done = accept & (c.tnext >= t1)
    status = jnp.where(done, int(Status.SUCCESS), c.status)
    status = jnp.where(active & (bad >= NONFINITE_REJECTS), int(Status.NONFINITE), status)
    out_of_steps = (status == RUNNING) & (steps[0] >= plan.max_steps)
    status = jnp.where(out_of_steps, int(Status.MAX_STEPS), status)
    tprev, tnext = next_interval(c.tprev, c.tnext, accept, factor, t1, floor)
    tprev, tnext = jnp.where(active, tprev, c.tprev), jnp.where(active, tnext, c.tnext)
    return Carry(tprev, tnext, y, f0, status, steps, bad, c.cursor, c.saved)


def _save(c: Carry, plan: Plan, ts, dense: Any, ta, tb, ya: Lanes, yb: Lanes, accept) -> Carry:
    """Write every save time in `(ta, tb]` (or `== ta` at the start, `dense=None`) of the
    lanes that accepted a step, interpolated with the method's dense output."""
    n = ts.shape[0]
    lane = jnp.arange(accept.shape[0])

    def pending(cursor):
        return accept & (cursor < n) & (ts[jnp.minimum(cursor, n - 1)] <= tb)

    def write(state):
        cursor, saved = state
        todo = pending(cursor)
        t = ts[jnp.minimum(cursor, n - 1)]
        if dense is None:
            value = ya
        else:
            value = plan.method.interpolate(dense, ta, tb, ya, yb, jnp.clip(t, ta, tb))
        row = jnp.where(todo, cursor, n)  # the scratch row
        saved = {k: saved[k].at[lane, row].set(value[k]) for k in saved}
        return cursor + todo, saved

    cursor, saved = plan.while_loop(
        lambda s: jnp.any(pending(s[0])), write, (c.cursor, c.saved),
        max_steps=n, buffers=lambda s: s[1], checkpoints=n,
    )  # fmt: skip
    return c._replace(cursor=cursor, saved=saved)
