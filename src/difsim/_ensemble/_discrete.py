r"""Reverse mode by a discrete adjoint of the engine's own steps ([`DiscreteAdjoint`][]).

The forward pass is the ordinary step loop of a block (`_loop.py`), which also writes, per
loop iteration, what the backward pass needs into two buffers:

- a **ring** of the last `segment` iterations (a chunk): each lane's
  `(tprev, tnext, y, f0)` at the start of the iteration and whether it accepted the step;
- **checkpoints**: the whole carry (times, state, carried derivative, counters) every
  `stride` iterations, in `segment` slots ([`Schedule`][]): the stride starts at `segment`
  and doubles, every other checkpoint dropped, whenever the slots are full.

The backward pass walks the iterations from the last to the first. For an iteration that
a lane accepted, the step $y_1 = \Phi(y, f_0; \theta)$, $f_1$ of the method is pulled back
with `jax.vjp` of the method's own `step` (the same function the forward pass called, with
the same `t`, `h`), and so is every save time the step wrote, through the method's dense
output; a rejected iteration leaves the lane's state, so its adjoint, as it is. The last
chunk's iterations are in the ring; every earlier chunk is recomputed (with the step-size
controller) into a second ring, then walked back: from its segment's checkpoint, which is
first run through once to keep the start of each of its chunks. Recomputation costs at
most one more forward pass while the stride is `segment` (up to `segment²` iterations),
two beyond. Memory: a ring and `segment` checkpoints of a block's lanes in the forward
pass (and the chunk starts of one segment in the backward), whatever the number of steps.

What this differentiates is the solve's sequence of steps with its step sizes held fixed
(the step-size factor carries no derivative, as on the engine's other paths,
`_control.Controller.decide`): the exact derivative of the numbers the forward pass
computed, to rounding. A chunk recomputed from a checkpoint runs in another compiled
loop; its rounding may differ in the last bits, which moves the following step sizes (or
flips an accept), and the derivative is then that of a neighbouring sequence of steps,
right to about the solver's accuracy. Solves of at most `segment` iterations recompute
nothing.

Why not JAX's own reverse mode through the step loop (the `"checkpoint"` adjoint,
`eqxi.while_loop(kind="checkpointed")`): its backward pass differentiates the whole loop
body, the step-size control and the save loop with it, one small kernel after another;
here each backward iteration is the pullback of one step and of its saves only.
"""

import functools
import math
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from difsim._ensemble._control import clip_floor
from difsim._ensemble._field import BatchField, BlockRHS, Lanes, per_lane
from difsim._ensemble._loop import RUNNING, Carry, Plan, _body, finish_block, start_block
from difsim._status import Status


class Record(NamedTuple):
    """One iteration of the step loop, per lane: where the step started and ended, the
    state and carried derivative it started from, and whether the lane accepted it."""

    tprev: jax.Array
    tnext: jax.Array
    y: Lanes
    f0: Lanes
    accept: jax.Array


# Iterations per chunk (the ring's length), and checkpoint slots, by default: up to
# 32 × 32 = 1,024 iterations, each chunk but the last is recomputed once on the backward
# pass (16 and 64 were 1.1x slower on Lorenz, 20 and 126 iterations).
DEFAULT_SEGMENT = 32


def stride_cap(segment: int, max_steps: int) -> int:
    """The longest stride between checkpoints a solve of `max_steps` iterations reaches:
    `segment` doubled until `segment` slots of it cover `max_steps`."""
    stride = segment
    while segment * stride < max_steps:
        stride *= 2
    return stride


def discrete_bytes(spec: "Spec", lanes: int) -> int:
    """Bytes of one block's ring and checkpoints (what its backward pass keeps)."""
    size = sum(math.prod(s) for s in spec.cfg.shapes)
    floats = (2 * size + 2) * spec.cfg.dtype.itemsize
    return spec.segment * (2 * floats + 1 + 6 * 4) * lanes


def _strip(c: Carry) -> Carry:
    """The carry without the save buffer (which checkpoints and recomputation skip)."""
    return c._replace(saved={})


def _stack(tree, count: int):
    return jax.tree.map(lambda x: jnp.zeros((count, *jnp.shape(x)), jnp.result_type(x)), tree)


def _put(buffer, index, tree):
    """`buffer` with row `index` set to `tree` (an index out of bounds writes nothing)."""
    return jax.tree.map(lambda b, x: b.at[index].set(x, mode="drop"), buffer, tree)


def _row(buffer, index):
    return jax.tree.map(lambda b: b[index], buffer)


def _record(c: Carry, new: Carry) -> Record:
    return Record(c.tprev, c.tnext, c.y, c.f0, new.steps[1] > c.steps[1])


class Schedule(NamedTuple):
    """Where the checkpoints are: one every `stride` iterations, that of the `q`-th in
    slot `slots[q]`. When the slots are full, every other checkpoint is dropped (its slot
    handed to the next ones) and the stride doubles: however many iterations a solve
    takes, its checkpoints fit in a fixed number of slots."""

    stride: jax.Array
    slots: jax.Array

    @staticmethod
    def start(segment: int) -> "Schedule":
        return Schedule(jnp.asarray(segment, jnp.int32), jnp.arange(segment, dtype=jnp.int32))

    def advance(self, i) -> tuple["Schedule", jax.Array]:
        """The schedule at iteration `i` and the slot its checkpoint goes to (out of
        bounds: none at `i`)."""
        count = self.slots.shape[0]
        half = count // 2
        due = i % self.stride == 0
        q = i // self.stride
        full = due & (q == count)
        r = jnp.arange(count)
        kept = self.slots[jnp.minimum(2 * r, count - 1)]
        freed = self.slots[jnp.minimum(2 * (r - half) + 1, count - 1)]
        slots = jnp.where(full, jnp.where(r < half, kept, freed), self.slots)
        stride = jnp.where(full, 2 * self.stride, self.stride)
        q = jnp.where(full, half, q)
        return Schedule(stride, slots), jnp.where(due, slots[jnp.minimum(q, count - 1)], count)


def record_block(field: BatchField, plan: Plan, segment: int, points, y0, times, dt0):
    """The block solve of [`solve_block`][] with its ring of the last `segment` iterations
    (iteration `i` in row `i % segment`) and its checkpoints:
    `((ys, stats), (ring, checkpoints, schedule, iterations))`."""
    t0, t1, ts = times
    carry, body = start_block(field, plan, points, y0, t0, t1, ts, dt0)

    def step(state):
        c, i, ring, checkpoints, schedule = state
        schedule, slot = schedule.advance(i)
        checkpoints = _put(checkpoints, slot, _strip(c))
        new = body(c)
        return new, i + 1, _put(ring, i % segment, _record(c, new)), checkpoints, schedule

    ring = _stack(_record(carry, carry), segment)
    checkpoints = _stack(_strip(carry), segment)
    state = (carry, jnp.asarray(0, jnp.int32), ring, checkpoints, Schedule.start(segment))
    carry, n, ring, checkpoints, schedule = lax.while_loop(
        lambda s: jnp.any(s[0].status == RUNNING), step, state
    )
    return finish_block(carry, ts), (ring, checkpoints, schedule, n)


def _advance(body, count, start: Carry) -> Carry:
    """`start` after `count` iterations of the step loop's `body`."""
    return lax.fori_loop(0, count, lambda _, c: body(c), start)


def _recompute(body, segment: int, start: Carry) -> Record:
    """The ring of the `segment` iterations that follow `start`."""

    def step(i, state):
        c, ring = state
        new = body(c)
        return new, _put(ring, i, _record(c, new))

    ring = _stack(_record(start, start), segment)
    return lax.fori_loop(0, segment, step, (start, ring))[1]


class _Adjoint(NamedTuple):
    """The backward pass's carry: the adjoints of the state and of the carried
    derivative, and the cotangents gathered so far of the model's arrays and the points."""

    y: Lanes
    f0: Lanes
    dyn: Any
    points: Any


def _masked(accept, tree):
    return jax.tree.map(lambda x: jnp.where(per_lane(accept, x), x, 0), tree)


def _add(a, b):
    return jax.tree.map(jnp.add, a, b)


def _save_cotangents(method, rec: Record, y1, dense, ts, ct_saved):
    """The cotangents of `(dense, y, y1)` from every save time the step of `rec` wrote
    (those in `(tprev, tnext]`, as `_loop._save` writes them), per lane."""
    lanes = rec.tprev.shape[0]
    lane = jnp.arange(lanes)
    n = ts.shape[0]
    lo = jnp.searchsorted(ts, rec.tprev, side="right")
    hi = jnp.where(rec.accept, jnp.searchsorted(ts, rec.tnext, side="right"), lo)
    # Lanes that did not step get a step of unit length to interpolate in (their
    # cotangent is zero): `(t - ta) / (tb - ta)` would be 0 / 0 there, and 0 · NaN is NaN.
    ta = jnp.where(rec.accept, rec.tprev, 0)
    tb = jnp.where(rec.accept, rec.tnext, 1)

    def pull(m, total):
        j = jnp.minimum(lo + m, n - 1)
        todo = lo + m < hi
        t = jnp.where(todo, jnp.clip(ts[j], ta, tb), ta)
        ct = {k: jnp.where(per_lane(todo, v[lane, j]), v[lane, j], 0) for k, v in ct_saved.items()}

        def interp(dense, ya, yb):
            return method.interpolate(dense, ta, tb, ya, yb, t)

        _, vjp = jax.vjp(interp, dense, rec.y, y1)
        return _add(total, vjp(ct))

    zero = jax.tree.map(jnp.zeros_like, (dense, rec.y, y1))
    count = jnp.max(hi - lo)
    return lax.fori_loop(0, count, pull, zero)


def bounded_backward(dyn_f, y0: Lanes) -> bool:
    """Whether the backward steps evaluate the right-hand side behind the stage boundaries
    of `_boundary.py`, as the forward steps do: only when the differentiated arrays of the
    model (`dyn_f`) have no more entries than the block's state (`y0`). Each boundary's
    transpose returns a cotangent of every differentiated array of the model, one per
    evaluation, materialised and added apart, which for a network is most of the
    backward pass; without them XLA accumulates the weight cotangents of a step's stages
    in place. Measured on 2 cores, CPU time: one lane of a 10⁵-weight MLP, gradient 50 →
    14 ms; 256 lanes of a 1,218-weight MLP 7.3 → 5.1 ms; the UDE Lotka–Volterra (87
    weights, one lane) 570 → 350 µs; but 1,024 Lorenz lanes in (σ, β) 34–48 → 65–68 ms
    without them (recomputed stage chains, `_boundary.py`)."""
    weights = sum(x.size for x in jax.tree.leaves(dyn_f))
    return weights <= sum(x.size for x in jax.tree.leaves(y0))


def _back_iteration(spec, dyn_f, dyn_o, points, bounded: bool, rec: Record, adj: _Adjoint, ts,
                    ct_saved):  # fmt: skip
    """Pull the adjoint back through one iteration of the step loop (`bounded`:
    [`bounded_backward`][])."""
    method = spec.cfg.plan.method
    h = jnp.where(rec.accept, rec.tnext - rec.tprev, 0)

    def step(dyn_f, points, y, f0):
        f = BlockRHS(spec.field(eqx.combine(dyn_f, dyn_o)), points)
        f = f.stepping(rec.accept) if bounded else f
        out = method.step(f, rec.tprev, y, h, f0)
        return out.y1, out.f1, out.dense

    (y1, _, dense), vjp = jax.vjp(step, dyn_f, points, rec.y, rec.f0)
    ct_y1 = adj.y
    ct_dense = jax.tree.map(jnp.zeros_like, dense)
    ct_y = jax.tree.map(jnp.zeros_like, rec.y)
    if ts is not None:
        ct_dense, ct_y, ct_save_y1 = _save_cotangents(method, rec, y1, dense, ts, ct_saved)
        ct_y1 = _add(ct_y1, ct_save_y1)
    d_dyn, d_points, d_y, d_f0 = vjp(
        (_masked(rec.accept, ct_y1), _masked(rec.accept, adj.f0), ct_dense)
    )
    keep = lambda new, old: jnp.where(per_lane(rec.accept, new), new, old)  # noqa: E731
    return _Adjoint(
        jax.tree.map(keep, _add(d_y, ct_y), adj.y),
        jax.tree.map(keep, d_f0, adj.f0),
        _add(adj.dyn, d_dyn),
        _add(adj.points, d_points),
    )


def _walk(spec, dyn_f, dyn_o, points, bounded, ring: Record, count, adj: _Adjoint, ts, ct_saved):
    """Pull `adj` back through the first `count` iterations of `ring`, last first."""

    def body(k, adj):
        rec = jax.tree.map(lambda b: b[count - 1 - k], ring)
        return _back_iteration(spec, dyn_f, dyn_o, points, bounded, rec, adj, ts, ct_saved)

    return lax.fori_loop(0, count, body, adj)


def _walk_back(spec, body, walk, ring, checkpoints, schedule, n, adj, ts, ct_saved):
    """Pull `adj` back through all `n` iterations: the last chunk from the forward pass's
    ring, each earlier one recomputed. A segment of the final schedule (`stride`
    iterations from its checkpoint) is first run through once, keeping the state at the
    start of each of its chunks; then its chunks, last first, are each recomputed from
    there into a ring and walked back."""
    seg = spec.segment
    stride = schedule.stride
    last = jnp.maximum(n - 1, 0) // seg
    adj = walk(ring, n - last * seg, adj, ts, ct_saved)
    subs = stride_cap(seg, spec.cfg.plan.max_steps) // seg

    def segment(k, adj):
        q = (last * seg - 1) // stride - k
        first = q * stride // seg
        count = jnp.minimum((q + 1) * stride // seg, last) - first
        start = _row(checkpoints, schedule.slots[q])

        starts = _put(_stack(start, subs), 0, start)
        starts = lax.fori_loop(
            0, count - 1, lambda j, b: _put(b, j + 1, _advance(body, seg, _row(b, j))), starts
        )

        def chunk(j, adj):
            rec = _recompute(body, seg, _row(starts, count - 1 - j))
            return walk(rec, seg, adj, ts, ct_saved)

        return lax.fori_loop(0, count, chunk, adj)

    segments = jnp.where(last > 0, (last * seg - 1) // stride + 1, 0)
    return lax.fori_loop(0, segments, segment, adj)


class Spec(NamedTuple):
    """What the discrete block solve is specialised on (static): the ensemble solve's
    configuration (`_solve.Config`) and the ring's length."""

    cfg: Any
    segment: int

    def field(self, dyn) -> BatchField:
        cfg = self.cfg
        model = eqx.combine(dyn, jax.tree.unflatten(*cfg.static))
        return BatchField(model, cfg.info, cfg.shapes, cfg.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def discrete_block(spec: Spec, dyn, points, y0: Lanes, times):
    """One block's `(ys, stats)`, as [`solve_block`][]; its reverse-mode derivative is the
    discrete adjoint of this module."""
    return _forward(spec, dyn, points, y0, times)[0]


def _forward(spec: Spec, dyn, points, y0, times):
    field = spec.field(dyn)
    out, (ring, checkpoints, schedule, n) = record_block(
        field, spec.cfg.plan, spec.segment, points, y0, times, spec.cfg.dt0
    )
    return out, (dyn, points, y0, times, ring, checkpoints, schedule, n, out[1]["status"])


def _backward(spec: Spec, residuals, cotangent):
    dyn, points, y0, times, ring, checkpoints, schedule, n, status = residuals
    t0, t1, ts = times
    ct_ys = cotangent[0]
    plan = spec.cfg.plan
    dyn_f, dyn_o = eqx.partition(dyn, eqx.is_inexact_array)
    points_f = {k: v for k, v in points.items() if jnp.issubdtype(v.dtype, jnp.inexact)}
    points_o = {k: v for k, v in points.items() if k not in points_f}
    f_of = lambda d, p: BlockRHS(spec.field(eqx.combine(d, dyn_o)), {**p, **points_o})  # noqa: E731
    if ts is None:
        good = status == Status.SUCCESS
        lam = {k: jnp.where(per_lane(good, v[:, 0]), v[:, 0], 0) for k, v in ct_ys.items()}
        ct_saved = None
    else:
        lam = jax.tree.map(jnp.zeros_like, y0)
        ct_saved = ct_ys
    zeros = lambda t: jax.tree.map(jnp.zeros_like, t)  # noqa: E731
    adj = _Adjoint(lam, zeros(y0), zeros(dyn_f), zeros(points_f))
    points_all, bounded = {**points_f, **points_o}, bounded_backward(dyn_f, y0)
    walk = functools.partial(_walk, spec, dyn_f, dyn_o, points_all, bounded)
    floor = clip_floor(jnp.asarray(t1, spec.cfg.dtype))
    f = f_of(dyn_f, points_f)
    body = lambda c: _body(c, f, plan, t1, floor, None)  # noqa: E731
    adj = _walk_back(spec, body, walk, ring, checkpoints, schedule, n, adj, ts, ct_saved)
    # The start: saves at or before t0 hold y0 itself; f0 = f(t0, y0).
    lam_y = adj.y
    if ts is not None:
        first = jnp.sum(ts <= t0)
        mask = jnp.arange(ts.shape[0]) < first
        at_start = {
            k: jnp.einsum("lt...,t->l...", v, mask.astype(v.dtype)) for k, v in ct_saved.items()
        }
        lam_y = _add(lam_y, at_start)
    t = jnp.full(status.shape, t0, spec.cfg.dtype)
    _, vjp0 = jax.vjp(lambda d, p, y: f_of(d, p)(t, y), dyn_f, points_f, y0)
    d_dyn, d_points, d_y0 = vjp0(adj.f0)
    ct_dyn = _cotangent_like(dyn, _add(adj.dyn, d_dyn))
    ct_points = {
        k: (_add(adj.points, d_points)[k] if k in points_f else _float0(v))
        for k, v in points.items()
    }
    return ct_dyn, ct_points, _add(lam_y, d_y0), jax.tree.map(jnp.zeros_like, times)


def _float0(x):
    return np.zeros(jnp.shape(x), jax.dtypes.float0)


def _cotangent_like(dyn, ct_f):
    """The cotangent of `dyn` (floating arrays: `ct_f`'s; other arrays: float0 zeros)."""
    flat_f = iter(jax.tree.leaves(ct_f))
    return jax.tree.map(lambda x: next(flat_f) if eqx.is_inexact_array(x) else _float0(x), dyn)


discrete_block.defvjp(_forward, _backward)
