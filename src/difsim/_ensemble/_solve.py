"""`simulate_ensemble`: many trajectories of one model in one batched integration.

The lanes are cut into blocks (`lax.map` over blocks): a block's working set stays in
cache on a CPU, and a block whose lanes have all finished stops costing work while the
other blocks go on.

Differentiation (`custom_jvp`, with symbolic zeros: the rule sees which inputs carry a
tangent) follows the solve's adjoint strategy (`_adjoint.py`). Forward: the Jacobian of
every output with respect to the differentiated scalars (shared parameters, and each
lane's own swept values, which perturb only their own lane) in batched forward passes
(one per group of tangents), contracted with the tangents; `jax.grad` transposes that
contraction. Reverse: the tangent map is a `linear_call` that pushes a tangent forward in
one forward-mode pass and whose transpose pulls a cotangent back through checkpointed step
loops.
"""

import dataclasses
import functools
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero, linear_call

from difsim._compat import ensure_linear_call_batching
from difsim._core import VarInfo, init_status
from difsim._ensemble._adjoint import AbstractEnsembleAdjoint, AutoAdjoint
from difsim._ensemble._discrete import DEFAULT_SEGMENT, Spec, discrete_block, discrete_bytes
from difsim._ensemble._field import BatchField, per_lane
from difsim._ensemble._loop import Plan, solve_block
from difsim._ensemble._sde_loop import SDEPlan, solve_sde_block


@dataclasses.dataclass(frozen=True)
class Config:
    """The static part of an ensemble solve (hashable)."""

    static: Any  # the model's non-array part (`eqx.partition`), as `(treedef, leaves)`
    info: tuple[tuple[str, VarInfo], ...]
    shapes: tuple[tuple[int, ...], ...]
    dtype: Any
    plan: Plan | SDEPlan
    block: int
    dt0: float | None
    adjoint: AbstractEnsembleAdjoint = AutoAdjoint()
    reverse_block: int | None = None  # lanes per block of the reverse-mode path
    lanes: int = 1  # how many (their points may be empty: one trajectory of the model)

    def reverse(self) -> "Config":
        """The same solve with reverse-mode differentiable step loops: the discrete
        adjoint's (`_discrete.py`) for [`DiscreteAdjoint`][] on an ODE, else checkpointed
        loops."""
        block = self.reverse_block or self.block
        if self.adjoint.discrete and isinstance(self.plan, Plan):
            segment = getattr(self.adjoint, "segment", None) or DEFAULT_SEGMENT
            plan = dataclasses.replace(self.plan, discrete=segment)
            return dataclasses.replace(self, plan=plan)
        checkpoints = self.adjoint.reverse_checkpoints or default_checkpoints(self.plan.max_steps)
        plan = dataclasses.replace(
            self.plan, reverse=True, checkpoints=min(checkpoints, self.plan.max_steps)
        )
        return dataclasses.replace(self, plan=plan, block=block)


def default_block(n: int, size: int = 1, reverse: bool = False) -> int:
    """Lanes per block for `n` lanes of a state of `size` entries each.

    On a CPU, a block's working set (state, stages, error estimate: some 20 arrays of
    `lanes × size` entries) should stay in a core's L1/L2 cache while each of the step's
    ~20 kernels is still long enough to amortise its fixed cost: about 2,048 entries per
    array, a power of two between 8 and 256 lanes (`bench_ensemble.py --blocks`, with the
    stage boundaries of `_boundary.py`: Lorenz, 3 entries, as fast from 64 to 512 lanes,
    1.2x slower at 32 and 2x in one block of 10⁴; Lorenz-96, 40 entries, as fast from 8 to
    64, 1.3x slower at 128 and 256). The reverse-mode path, whose backward steps are many
    more small kernels, takes 4x that (256 lanes of Lorenz took 1.4x as long as 1,024).
    On an accelerator, every lane at once."""
    if jax.default_backend() != "cpu":
        return n
    entries = 8192 if reverse else 2048
    lanes = 2 ** int(math.floor(math.log2(max(1, entries // max(1, size)))))
    return min(n, max(8, min(lanes, 1024 if reverse else 256)))


def default_sde_block(n: int, size: int = 1) -> int:
    """Lanes per block of a stochastic solve on a CPU: as many as a block of about 2**16
    state entries holds, in balanced blocks (every lane at once on an accelerator).

    A fixed SDE step costs far less per lane than a Runge–Kutta step with its error
    control, and is dominated by drawing the Brownian increments (four threefry hashes per
    lane and step): the fixed cost of each of the loop's kernels then outweighs the cache
    misses of a large block. On the double well, 1e4 lanes took 0.53 s of CPU in blocks
    of 256, 0.30 s in blocks of 1,024 and 0.20 s in one block; 1e5 lanes 2.5 s in blocks
    of 4,000 and 1.5 s in one (bench_sde_ensemble.py, measured on 2 cores)."""
    if jax.default_backend() != "cpu":
        return n
    cap = max(1, 2**16 // max(1, size))
    count = math.ceil(n / cap)
    return math.ceil(n / count)


def default_checkpoints(max_steps: int) -> int:
    """Checkpoints of a block's state on the reverse-mode path: equinox's default (as
    diffrax's `RecursiveCheckpointAdjoint`), about `sqrt(2 max_steps)`, 181 for 16,384.

    Up to that many steps nothing is recomputed, and the gradient is exactly that of the
    solve's own steps. Beyond, the backward pass recomputes steps from the checkpoints in
    another compiled program, whose rounding may differ in the last bits; the error
    estimate of a step amplifies that (it is a difference of nearly equal stages), an
    accept or a step size can then differ, and the gradient becomes that of a neighbouring
    sequence of steps: right to about the solver's accuracy, not to rounding (1e-9 in
    float64 at rtol 1e-10 on Lorenz, but 1e-2 in float32 at rtol 1e-6, measured). Fewer
    checkpoints are faster (32 took 0.45x the time of 181 on Lorenz), at that price."""
    if max_steps <= 1:
        return 1
    return math.floor(-1.5 + math.sqrt(2 * max_steps + 0.25)) + 1


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def solve(cfg: Config, dyn, points: dict, times: tuple) -> tuple[dict, dict]:
    """`(ys, stats)` of every lane: `ys = {var: (lanes, time, *shape)}`, `stats` as
    [`solve_block`][]'s, each `(lanes,)`. `dyn`: the model's arrays; `points`:
    `{key: (lanes, *shape)}`; `times = (t0, t1, ts or None)`."""
    return _blocks(cfg, dyn, points, times)


def _blocks(cfg: Config, dyn, points: dict, times: tuple) -> tuple[dict, dict]:
    model = eqx.combine(dyn, jax.tree.unflatten(*cfg.static))
    field = BatchField(model, cfg.info, cfg.shapes, cfg.dtype)
    n = cfg.lanes
    size = min(cfg.block, n)
    count = math.ceil(n / size)
    pad = count * size - n

    def blocked(v):
        v = jnp.concatenate([v, jnp.repeat(v[-1:], pad, axis=0)]) if pad else v
        return v.reshape(count, size, *v.shape[1:])

    t0, t1, ts = times
    if isinstance(cfg.plan, SDEPlan):
        mapped = points
        run = lambda p: solve_sde_block(field, cfg.plan, p, t0, t1, ts, cfg.dt0)  # noqa: E731
    else:
        # Every lane's initial state in one pass before the block loop, each block taking
        # its slice. Built inside the loop from a model passed as an argument (a sweep's
        # program), it made the Lorenz engine take 1.2x the CPU time it took with the
        # model's values compiled in, though XLA compiled identical step loops for both;
        # now 1.02x (docs/benchmarks.md, "the (a)/(a2) gap closed").
        y0, consistent = _initial(cfg, field, points, t0)
        mapped = (points, y0)
        run = lambda p: solve_block(field, cfg.plan, *p, t0, t1, ts, cfg.dt0)  # noqa: E731
    if isinstance(cfg.plan, Plan) and cfg.plan.discrete:
        spec = Spec(cfg, cfg.plan.discrete)
        run = lambda p: discrete_block(spec, dyn, *p, times)  # noqa: E731
        if count * discrete_bytes(spec, size) > REMAT_BYTES:
            run = jax.checkpoint(run)
    elif cfg.plan.reverse and count * _checkpoint_bytes(cfg, size) > REMAT_BYTES:
        # The backward pass recomputes one block at a time (one more forward solve): the
        # memory is then one block's checkpoints, not every block's.
        run = jax.checkpoint(run)
    out = jax.lax.map(run, jax.tree.map(blocked, mapped))
    ys, stats = jax.tree.map(lambda x: x.reshape(count * size, *x.shape[2:])[:n], out)
    if isinstance(cfg.plan, Plan) and consistent is not None:
        stats = _inconsistent_lanes(stats, consistent)
    return ys, stats


def _initial(cfg: Config, field: BatchField, points, t0):
    """`(y0, consistent)`: every lane's initial state, and for a differential-algebraic
    model whether its algebraic values were made consistent (`None` for an ODE). A lane
    whose were not starts from NaN: it stops at once, and `_inconsistent_lanes` says why."""
    y0 = field.initial(points, cfg.lanes)
    if not field.algebraic:
        return y0, None
    ctrl = cfg.plan.controller
    y0, ok = field.consistent(t0, y0, points, ctrl.rtol, ctrl.atol)
    return jax.tree.map(lambda v: jnp.where(per_lane(ok, v), v, jnp.nan), y0), ok


def _inconsistent_lanes(stats: dict, consistent) -> dict:
    """`stats` with `Status.INCONSISTENT_INIT` and no steps for the lanes whose algebraic
    values could not be made consistent."""
    out = {k: jnp.where(consistent, v, 0) for k, v in stats.items()}
    out["status"] = init_status(stats["status"], consistent)
    return out


# Above this many bytes of checkpoints for all blocks together, the reverse-mode path keeps
# one block's at a time instead (and recomputes each block's forward solve).
REMAT_BYTES = 2**28


def _checkpoint_bytes(cfg: Config, lanes: int) -> int:
    """Bytes of one block's checkpoints: per checkpoint, each lane's state and carried
    derivative, its two times and five counters."""
    size = sum(math.prod(s) for s in cfg.shapes)
    per_lane = (2 * size + 2) * cfg.dtype.itemsize + 5 * 4
    return cfg.plan.checkpoints * lanes * per_lane


def _is_zero(t) -> bool:
    return isinstance(t, SymbolicZero)


def _solve_jvp(cfg: Config, primals, tangents):
    dyn, points, times = primals
    t_dyn, t_points, t_times = tangents
    if not all(_is_zero(t) for t in jax.tree.leaves(t_times, is_leaf=_is_zero)):
        raise ValueError(
            "the ensemble engine does not differentiate with respect to t0, t1 or the save "
            "times; use engine='diffrax'"
        )
    leaves, treedef = jax.tree.flatten(dyn)
    t_leaves = jax.tree.leaves(t_dyn, is_leaf=_is_zero)
    live = [i for i, t in enumerate(t_leaves) if not _is_zero(t)]
    keys = [k for k in points if not _is_zero(t_points[k])]
    if not live and not keys:
        out = solve(cfg, dyn, points, times)
        return out, _zero_tangents(out)
    n = cfg.lanes

    def f(cfg, live_leaves, live_points):
        full = list(leaves)
        for i, leaf in zip(live, live_leaves):
            full[i] = leaf
        return _blocks(cfg, jax.tree.unflatten(treedef, full), {**points, **live_points}, times)

    args = ([leaves[i] for i in live], {k: points[k] for k in keys})
    t_args = ([t_leaves[i] for i in live], {k: t_points[k] for k in keys})
    count = sum(int(np.size(x)) for x in args[0])
    count += sum(int(np.prod(v.shape[1:], dtype=int)) for v in args[1].values())
    if cfg.adjoint.reverse(count):
        return _reverse_jvp(cfg, f, args, t_args)
    return _forward_jvp(cfg, f, args, t_args, n)


# Tangents carried together by one forward-mode pass. Beyond about 16 a pass outgrows the
# cache (Lorenz: 7.6x its forward solve with 16 tangents, 24x with 24; Lorenz-96: 20x and
# 40x), so more are carried in groups, each pass solving the primal again.
TANGENT_GROUP = 12


def _forward_jvp(cfg: Config, f, args, t_args, n: int):
    """The Jacobian with respect to every differentiated scalar, from batched forward
    passes of up to `TANGENT_GROUP` tangents each, contracted with the tangents `t_args`."""
    basis, count = _basis(args, n)
    # One loop computes the primal once and every tangent of a group beside it: the primal
    # does not depend on the direction, so vmap leaves it unbatched (out_axes=None).
    run = lambda d: jax.jvp(lambda *a: f(cfg, *a), args, d)  # noqa: E731
    total = jax.tree.leaves(basis)[0].shape[0]
    jacs = []
    for start in range(0, total, TANGENT_GROUP):
        group = jax.tree.map(lambda b: b[start : start + TANGENT_GROUP], basis)
        out, (jac, _) = jax.vmap(run, out_axes=(None, 0))(group)
        jacs.append(jac)
    jac = jacs[0] if len(jacs) == 1 else jax.tree.map(lambda *j: jnp.concatenate(j), *jacs)
    coef_shared = [jnp.ravel(t) for t in t_args[0]]
    coef_lane = [jnp.reshape(t, (n, -1)) for t in t_args[1].values()]
    t_ys = {}
    for var, j in jac.items():
        total = jnp.zeros_like(out[0][var])
        if coef_shared:
            total += jnp.tensordot(jnp.concatenate(coef_shared).astype(j.dtype), j[:count], 1)
        if coef_lane:
            c = jnp.concatenate(coef_lane, axis=1).astype(j.dtype)
            total += jnp.einsum("nd,dn...->n...", c, j[count:])
        t_ys[var] = total
    return out, (t_ys, _zero_tangents(out)[1])


def _reverse_jvp(cfg: Config, f, args, t_args):
    """The primal from a forward pass through the checkpointed step loops, which keeps
    what the backward pass needs, and the tangent map as a `linear_call`: transposed
    (`jax.grad`), it pulls the cotangent back through those loops, whatever the number of
    differentiated scalars; evaluated (`jax.jvp`), it pushes the tangent forward in one
    forward-mode pass."""
    out_ys, pullback, stats = jax.vjp(lambda *a: f(cfg.reverse(), *a), *args, has_aux=True)

    def push(residuals, tangents):
        primals, _ = residuals
        return jax.jvp(lambda *a: f(cfg, *a)[0], primals, tangents)[1]

    def pull(residuals, cotangent):
        _, pullback = residuals
        return pullback(cotangent)

    ensure_linear_call_batching()  # for vmap of this linear_call (`difsim/_compat.py`)
    t_ys = linear_call(push, pull, (args, pullback), t_args)
    out = (out_ys, stats)
    return out, (t_ys, _zero_tangents(out)[1])


def _basis(args, n: int):
    """One tangent per differentiated scalar: unit vectors for the shared leaves, then
    for each element of a lane's swept values, ones in that element of every lane (lanes
    are independent, so one direction gives every lane's derivative)."""
    shared, lane = args
    sizes = [int(np.size(x)) for x in shared]
    per_lane = {k: int(np.prod(v.shape[1:], dtype=int)) for k, v in lane.items()}
    total = sum(sizes) + sum(per_lane.values())
    eye = jnp.eye(total)
    out_shared, offset = [], 0
    for x, s in zip(shared, sizes):
        out_shared.append(
            eye[:, offset : offset + s].reshape(total, *np.shape(x)).astype(jnp.result_type(x))
        )
        offset += s
    out_lane = {}
    for k, v in lane.items():
        e = eye[:, offset : offset + per_lane[k]].reshape(total, 1, *v.shape[1:])
        out_lane[k] = jnp.broadcast_to(e, (total, *v.shape)).astype(v.dtype)
        offset += per_lane[k]
    return (out_shared, out_lane), sum(sizes)


def _zero_tangents(out):
    ys, stats = out
    zeros = {k: jnp.zeros_like(v) for k, v in ys.items()}
    return zeros, {k: np.zeros(v.shape, jax.dtypes.float0) for k, v in stats.items()}


solve.defjvp(_solve_jvp, symbolic_zeros=True)

# `solve` compiled once per configuration: a call outside `jit` (a notebook calling
# `simulate_ensemble` again) reuses the program instead of tracing and compiling its loops
# anew (~1 s for a 15 ms Lorenz ensemble); inside a trace it is inlined.
solve_jit = jax.jit(solve, static_argnums=0)
