"""Solves with events that change the state: diffrax from event to event, in one loop.

diffrax's events only end a solve. Here each pass of a loop solves from the current time
to the next scheduled event (or `t1`), with the root-found conditions as a diffrax
`Event`; where one fires, or the scheduled time is reached, the event's affect gives the
state the next pass starts from. The loop is an `equinox.internal.while_loop` of the kind
the adjoint asks for (checkpointed for reverse mode, `lax` for forward mode), so `jit`,
`vmap` (each trajectory with its own events) and `grad` (through the event times too) pass
through. At most one event happens per pass; one pass past `max_events` events ends the
solve with `Status.EVENT_LIMIT`, so a chattering model cannot hang it. Where detection
cannot be trusted (events that accumulate, a lost crossing, a NaN condition) the solve ends
with its own status (`_event_guard.py`).

Saved values at an event time are the state just after the event (right-continuous).
"""

from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jax import lax

from difsim._core._dense import DenseBuffer, DenseOutput, info_struct
from difsim._core._event import Event
from difsim._core._event_guard import (
    ZENO_SPACINGS,
    Watch,
    accelerations,
    accumulates,
    guard_conditions,
    lost,
    probe,
    resolution,
    too_close,
    wrong_way,
)
from difsim._core._event_plan import EventPlan
from difsim._core._event_record import EventRecord, RecordBuffer
from difsim._core._vector_field import Layout
from difsim._status import Status, result_index, status_from_result


class HybridSolution(NamedTuple):
    """Shaped like a diffrax solution with `SaveAt(subs=[saves, t1])`, plus the rest."""

    ts: tuple[Any, Any]
    ys: tuple[Any, Any]
    status: Any
    result: Any
    stats: dict
    record: EventRecord
    dense: DenseOutput | None


class _Carry(NamedTuple):
    t: Any
    y: Any
    saved_t: Any  # (time,) inf where not (yet) saved; None when only the end is kept
    saved_y: Any
    pointers: Any  # per scheduled event, the index of its next time
    fired: Any  # which root-found event the last one was (-1: none)
    residual: Any  # |condition| where it fired: a restart at least this close is "on it"
    watch: Watch  # per root-found event, its last firings (Zeno accumulation)
    record: RecordBuffer
    dense: DenseBuffer | None
    status: Any
    result: Any
    done: Any
    stats: Any  # (steps, accepted, rejected)


class _Condition(eqx.Module):
    """One root-found condition as a diffrax `cond_fn`, for one pass that starts at
    `t_start`. There, when the state sits on the condition's zero (just after it fired,
    or a start exactly on it), the value is replaced by one with the sign the condition
    is heading to (`start_value`, NaN: no replacement): a rounding-level sign at the start
    would otherwise read as a new crossing in the first step. A NaN value reads as 0 for
    an event in both directions (NaN differs from itself: every step would be a crossing);
    the guards end the solve on it (`_event_guard.py`)."""

    event: Event
    layout: Layout
    t_start: Any
    start_value: Any

    def __call__(self, t, y, args, **kwargs):
        g = self.event.value(t, self.layout.view(y), args)
        if jnp.issubdtype(g.dtype, jnp.bool_):
            return g
        on_zero = (t == self.t_start) & ~jnp.isnan(self.start_value)
        if self.event.direction is None:
            g = jnp.where(jnp.isnan(g), 0.0, g)
        return jnp.where(on_zero, self.start_value.astype(g.dtype), g)


class _Context(NamedTuple):
    plan: EventPlan
    terms: Any
    solver: Any
    controller: Any
    adjoint: Any
    model: Any
    layout: Layout
    t0: Any
    t1: Any
    dt0: Any
    ts: Any
    max_steps: int
    meter: Any


def solve_hybrid(plan: EventPlan, *, terms, solver, t0, t1, dt0, y0, model, ts, controller,
                 adjoint, max_steps: int, layout: Layout, meter) -> HybridSolution:  # fmt: skip
    """Solve from `t0` to `t1` with the events of `plan`, saving at `ts` (or, when `None`,
    only the end); see the module's docstring. `meter`: diffrax's progress meter, shown
    when the solve is one pass (a bar per pass would be noise)."""
    single = all(e.terminal is True for e in plan.events)
    ctx = _Context(plan, terms, solver, controller, adjoint, model, layout, t0, t1, dt0, ts,
                   max_steps, meter if single else dfx.NoProgressMeter())  # fmt: skip
    carry = _init(ctx, y0)
    if single:
        # Dense output alone, or events that all end the solve: one pass is the whole
        # solve, and no loop (whose reverse mode would cost a second level of checkpoints).
        final = _pass(ctx, carry)
    else:
        final = eqxi.while_loop(
            lambda c: ~c.done, lambda c: _pass(ctx, c), carry,
            max_steps=plan.max_events + 1, kind=_loop_kind(adjoint),
        )  # fmt: skip
    # The loop's bound is one pass per event plus the last: a solve still running here
    # had more events than the cap (cannot happen, as a pass over the cap ends it).
    status = jnp.where(final.done, final.status, int(Status.EVENT_LIMIT))
    t_end, y_end = final.t, final.y
    if ts is None:
        saved_t = jnp.broadcast_to(t_end, (1,))
        saved_y = jax.tree.map(lambda v: v[None], y_end)
    else:
        saved_t, saved_y = final.saved_t, final.saved_y
    dense = None
    if plan.dense:
        dense = final.dense.finish(t0, t1, t_end, y_end, solver.interpolation_cls, layout)
    steps, accepted, rejected = final.stats
    return HybridSolution(
        ts=(saved_t, jnp.broadcast_to(t_end, (1,))),
        ys=(saved_y, jax.tree.map(lambda v: v[None], y_end)),
        status=status,
        result=final.result,
        stats=dict(num_steps=steps, num_accepted_steps=accepted, num_rejected_steps=rejected),
        record=final.record.finish(plan.names, layout),
        dense=dense,
    )


def _loop_kind(adjoint) -> str:
    if isinstance(adjoint, dfx.RecursiveCheckpointAdjoint):
        return "checkpointed"
    if isinstance(adjoint, dfx.DirectAdjoint):
        return "bounded"
    return "lax"  # forward mode (jvp through a lax loop), or no derivatives


def _init(ctx: _Context, y0) -> _Carry:
    plan, model, t0 = ctx.plan, ctx.model, ctx.t0
    dtype = jnp.result_type(t0)
    timed = [plan.events[i] for i in plan.timed]
    pointers = jnp.stack([e.first_index(model, t0) for e in timed] or [jnp.zeros((), jnp.int32)])
    saved_t = saved_y = None
    if ctx.ts is not None:
        n = ctx.ts.shape[0]
        saved_t = jnp.full(n, jnp.inf, dtype)
        saved_y = jax.tree.map(lambda v: jnp.full((n, *v.shape), jnp.nan, v.dtype), y0)
    dense = None
    if plan.dense:
        struct = info_struct(ctx.solver, ctx.terms, t0, ctx.t1, y0, model)
        dense = DenseBuffer.empty(struct, ctx.max_steps, dtype)
    zero = jnp.asarray(0, jnp.int32)
    return _Carry(
        t=jnp.asarray(t0, dtype), y=y0, saved_t=saved_t, saved_y=saved_y,
        pointers=pointers.astype(jnp.int32), fired=jnp.asarray(-1, jnp.int32),
        residual=jnp.asarray(0.0, dtype), watch=Watch.empty(len(plan.root), dtype),
        record=RecordBuffer.empty(plan.max_events, y0, dtype), dense=dense,
        status=jnp.asarray(int(Status.SUCCESS), jnp.int32), result=zero,
        done=jnp.asarray(False), stats=(zero, zero, zero),
    )  # fmt: skip


def _next_scheduled(ctx: _Context, pointers):
    """`(time, k)`: the earliest next scheduled time and which scheduled event has it."""
    timed = [ctx.plan.events[i] for i in ctx.plan.timed]
    if not timed:
        return jnp.asarray(jnp.inf, jnp.result_type(ctx.t0)), jnp.asarray(0, jnp.int32)
    times = jnp.stack([e.time_at(pointers[k], ctx.model, ctx.t0) for k, e in enumerate(timed)])
    return jnp.min(times), jnp.argmin(times).astype(jnp.int32)


def _conditions(ctx: _Context, c: _Carry):
    """`(conditions, values, signs, stuck)`: the root-found conditions of one pass starting
    at `c.t`, their values there, and the signs they start the pass with: where a
    condition sits on its zero, the sign it is heading to. A directional one on its zero
    with zero rate starts on the side before its crossing, so that it fires if it crosses;
    `stuck` where the flow would take it back across sooner than the solve resolves (a
    ball at rest on the floor: it would fire again and again at this time, Zeno)."""
    root = _root(ctx)
    t, y = lax.stop_gradient(c.t), lax.stop_gradient(c.y)
    values, rates = probe(root, ctx.layout, ctx.model, t, y)
    curving = accelerations(root, ctx.layout, ctx.model, t, y)
    res = resolution(ctx.plan.root_finder, t)
    conds, signs, stuck = [], [], jnp.asarray(False)
    for j, event in enumerate(root):
        g, g_dot = values[j], rates[j]
        before = {None: jnp.nan, True: -1.0, False: 1.0}[event.direction]
        near = jnp.abs(g) <= jnp.where(c.fired == j, c.residual, 0.0)
        heading = jnp.where(g_dot != 0, jnp.sign(g_dot), before)
        start = jnp.where(near, heading, jnp.nan).astype(c.t.dtype)
        conds.append(_Condition(event, ctx.layout, c.t, start))
        signs.append(jnp.where(jnp.isnan(start), jnp.sign(g), start))
        # Back across its zero sooner than can be resolved (a flight of 2 |g'| / |g''|).
        back = (g_dot * before >= 0) & (curving[j] * before < 0)
        brief = 2 * jnp.abs(g_dot) < jnp.abs(curving[j]) * ZENO_SPACINGS * res
        stuck = stuck | (near & back & brief)
    signs = jnp.stack(signs) if signs else jnp.zeros((1,), c.t.dtype)
    return tuple(conds), values, signs, stuck


def _solve_pass(ctx: _Context, c: _Carry, conds, t_stop):
    subs = [] if ctx.ts is None else [dfx.SubSaveAt(ts=jnp.clip(ctx.ts, c.t, t_stop))]
    saveat = dfx.SaveAt(subs=[*subs, dfx.SubSaveAt(t1=True)], dense=ctx.plan.dense)
    event, controller = None, ctx.controller
    if conds:
        directions = tuple(cond.event.direction for cond in conds)
        event = dfx.Event(conds, ctx.plan.root_finder, direction=directions)
        controller = guard_conditions(controller, tuple(d.event for d in conds), ctx.layout)
    return dfx.diffeqsolve(
        ctx.terms, ctx.solver, c.t, t_stop, ctx.dt0, c.y, args=ctx.model, saveat=saveat,
        stepsize_controller=controller, adjoint=ctx.adjoint, event=event,
        max_steps=ctx.max_steps, throw=False, progress_meter=ctx.meter,
    )  # fmt: skip


def _affect(ctx: _Context, which, t, y):
    """`(y_after, stops)`: event `which`'s new state from `y` at `t`, and whether the solve
    ends there."""

    def branch(event):
        def apply(t, y):
            updates = event.updates(t, ctx.layout.view(y), ctx.model)
            values = {**ctx.layout.unpack(y), **updates}
            y_after = ctx.layout.pack(values)
            return y_after, event.stops(t, ctx.layout.view(y_after), ctx.model)

        return apply

    branches = [branch(e) for e in ctx.plan.events]
    if not branches:  # dense output only: no event ever happens
        return y, jnp.asarray(False)
    if len(branches) == 1:
        return branches[0](t, y)
    return lax.switch(which, branches, t, y)


def _pass(ctx: _Context, c: _Carry) -> _Carry:
    """One pass of the loop: solve to the next event (or `t1`), then apply it."""
    active = ~c.done
    t_sched, k_sched = _next_scheduled(ctx, c.pointers)
    conds, g_start, s_start, stuck = _conditions(ctx, c)
    go = active & jnp.all(jnp.isfinite(g_start)) & ~stuck  # else it ends here (_verdict)
    sol = _solve_pass(ctx, c, conds, jnp.where(go, jnp.minimum(t_sched, ctx.t1), c.t))
    t_stop = sol.ts[-1][0].astype(c.t.dtype)
    y_stop = jax.tree.map(lambda v, old: v[0].astype(old.dtype), sol.ys[-1], c.y)
    ok = sol.result == dfx.RESULTS.successful
    root_fired = sol.result == dfx.RESULTS.event_occurred
    timed_fires = ok & (t_sched <= ctx.t1)
    steps = tuple((a + sol.stats[k]).astype(jnp.int32) for a, k in zip(c.stats, _STATS))
    over = active & (steps[0] > ctx.max_steps)  # max_steps counts all passes together
    live = active & ~over
    fires = live & (root_fired | timed_fires)
    failed = live & ~(ok | root_fired)
    # Under vmap, once one lane has an event diffrax root-finds every lane: a failed lane's
    # end is then its refused last step's end, interpolated. Keep its pass's start instead.
    moved = failed & eqxi.unvmap_any(root_fired)
    t_stop = jnp.where(moved, c.t, t_stop)
    y_stop = jax.tree.map(lambda old, new: jnp.where(moved, old, new), c.y, y_stop)
    slot, which = _which(ctx, sol, root_fired, k_sched)
    values, rates = probe(_root(ctx), ctx.layout, ctx.model, *lax.stop_gradient((t_stop, y_stop)))
    probes = (g_start, s_start, stuck, values, rates)
    verdict, watch = _verdict(ctx, c, probes, slot, root_fired, t_stop)
    verdict = jnp.where(live & ~failed, verdict, -1)  # -1: none; else the status it ends with
    stopped = verdict >= 0
    limit = fires & ~stopped & (c.record.count >= ctx.plan.max_events)
    apply = fires & ~stopped & ~limit
    finished = live & ok & ~timed_fires & ~stopped
    y_after, stops = _affect(ctx, which, t_stop, y_stop)
    stop_here = apply & stops
    status = jnp.where(failed, status_from_result(sol.result), c.status)
    status = jnp.where(over, int(Status.MAX_STEPS), status)
    status = jnp.where(stopped, verdict, status)
    status = jnp.where(limit, int(Status.EVENT_LIMIT), status)
    status = jnp.where(stop_here, int(Status.EVENT), status).astype(jnp.int32)
    lost_here = verdict == int(Status.EVENT_LOST)  # this pass's values are past a crossing
    saved_t, saved_y = _merge_saves(ctx, c, sol, live & ~lost_here, t_stop, finished, apply,
                                    y_after)  # fmt: skip
    pick = lambda a, b, m: jax.tree.map(lambda u, v: jnp.where(m, u, v), a, b)  # noqa: E731
    y_new = pick(c.y, pick(y_after, y_stop, apply), ~live)
    residual = lax.stop_gradient(jnp.abs(values[slot]))
    return _Carry(
        t=jnp.where(live, t_stop, c.t), y=y_new, saved_t=saved_t, saved_y=saved_y,
        pointers=c.pointers.at[k_sched].add((apply & timed_fires).astype(jnp.int32)),
        fired=jnp.where(apply & root_fired, slot, -1).astype(jnp.int32),
        residual=jnp.where(apply & root_fired, residual, 0.0).astype(c.residual.dtype),
        watch=pick(watch, c.watch, apply & root_fired),
        record=c.record.add(apply, t_stop, which, y_stop, y_after),
        dense=None if c.dense is None else c.dense.append(sol.interpolation, live),
        status=status,
        result=jnp.where(failed, result_index(sol.result), c.result).astype(jnp.int32),
        done=c.done | over | failed | stopped | limit | stop_here | finished, stats=steps,
    )  # fmt: skip


_STATS = ("num_steps", "num_accepted_steps", "num_rejected_steps")


def _root(ctx: _Context) -> tuple[Event, ...]:
    return tuple(ctx.plan.events[i] for i in ctx.plan.root)


def _verdict(ctx: _Context, c: _Carry, probes, slot, root_fired, t_stop):
    """`(status, watch)`: the status a pass ends the solve with where detection failed (-1:
    none; see `_event_guard.py`): `NONFINITE` for a condition NaN or infinite at the pass's
    start or end, `ZENO` for a firing of an accumulating sequence (or a condition the flow
    pushes across its zero as soon as it fired), `EVENT_LOST` for a lost crossing; and the
    Zeno watch with this pass's firing, to keep if it is applied."""
    if not ctx.plan.root:
        return jnp.asarray(-1, jnp.int32), c.watch
    g_start, s_start, stuck, values, rates = probes
    root = _root(ctx)
    res = resolution(ctx.plan.root_finder, lax.stop_gradient(t_stop))
    nonfinite = ~jnp.all(jnp.isfinite(g_start) & jnp.isfinite(values))
    zeno, watch = accumulates(c.watch, slot, lax.stop_gradient(t_stop), res)
    # A root at the wrong crossing right after the same event's last firing: an
    # unresolvable bounce (Zeno) rather than a crossing lost in a long step.
    unresolved = wrong_way(root, rates, slot) & too_close(c.watch, slot, t_stop, res)
    zeno = (root_fired & (zeno | unresolved)) | stuck
    missed = lost(root, s_start, values, rates, slot, root_fired, res)
    verdict = jnp.where(missed, int(Status.EVENT_LOST), -1)
    verdict = jnp.where(zeno, int(Status.ZENO), verdict)
    verdict = jnp.where(nonfinite, int(Status.NONFINITE), verdict)
    return verdict.astype(jnp.int32), watch


def _which(ctx: _Context, sol, root_fired, k_sched):
    """`(slot, which)`: the root-found event that fired (its position among them, `slot`),
    and which event happened (an index into `plan.events`)."""
    plan = ctx.plan
    if not plan.events:  # dense output only
        return jnp.asarray(0, jnp.int32), jnp.asarray(0, jnp.int32)
    if not plan.root:
        return jnp.asarray(0, jnp.int32), jnp.asarray(plan.timed)[k_sched]
    mask = jnp.stack([jnp.asarray(m) for m in jax.tree.leaves(sol.event_mask)])
    slot = jnp.argmax(mask).astype(jnp.int32)
    which = jnp.asarray(plan.root)[slot]
    if plan.timed:
        which = jnp.where(root_fired, which, jnp.asarray(plan.timed)[k_sched])
    return slot, which.astype(jnp.int32)


def _merge_saves(ctx: _Context, c: _Carry, sol, live, t_stop, finished, apply, y_after):
    """The saved series with this pass's values: save times in `[start, stop)` from the
    solve (`t1` itself when the solve ends there), and a save time at the event itself
    with the state after it."""
    if ctx.ts is None:
        return None, None
    ts = ctx.ts
    reached = jnp.isfinite(sol.ts[0])
    take = live & reached & (ts >= c.t) & ((ts < t_stop) | (finished & (ts == t_stop)))
    after = apply & (ts == t_stop)

    def merge(old, new, post):
        shape = (ts.shape[0],) + (1,) * (old.ndim - 1)
        new = jnp.where(take.reshape(shape), new.astype(old.dtype), old)
        return jnp.where(after.reshape(shape), post[None].astype(old.dtype), new)

    saved_y = jax.tree.map(merge, c.saved_y, sol.ys[0], y_after)
    return jnp.where(take | after, ts, c.saved_t), saved_y
