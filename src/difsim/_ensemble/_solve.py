"""`simulate_ensemble`: many trajectories of one model in one batched integration.

The lanes are cut into blocks (`lax.map` over blocks): a block's working set stays in
cache on a CPU, and a block whose lanes have all finished stops costing work while the
other blocks go on. Differentiation is forward mode underneath, whatever the caller
uses: the Jacobian of every output with respect to the inputs that carry a tangent
(shared parameters, and each lane's own swept values, which perturb only their own lane)
is computed in one batched forward pass, then contracted with the tangents. That
contraction is linear, so `jax.grad` transposes it: reverse mode costs a forward pass
with one tangent per differentiated scalar, never a stored step history.
"""

import dataclasses
import functools
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from difsim._core import VarInfo
from difsim._ensemble._field import BatchField
from difsim._ensemble._loop import Plan, solve_block


@dataclasses.dataclass(frozen=True)
class Config:
    """The static part of an ensemble solve (hashable)."""

    static: Any  # the model's non-array part (`eqx.partition`)
    info: tuple[tuple[str, VarInfo], ...]
    shapes: tuple[tuple[int, ...], ...]
    dtype: Any
    plan: Plan
    block: int
    dt0: float | None


def default_block(n: int) -> int:
    """Lanes per block: on a CPU 256, so that a block's working set stays in a core's L1
    cache (fastest of 64 ... N in `experiments/benchmarks/bench_ensemble.py --blocks`);
    on an accelerator, everything at once."""
    if jax.default_backend() == "cpu":
        return min(n, 256)
    return n


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def solve(cfg: Config, dyn, points: dict, times: tuple) -> tuple[dict, dict]:
    """`(ys, stats)` of every lane: `ys = {var: (lanes, time, *shape)}`, `stats` as
    [`solve_block`][]'s, each `(lanes,)`. `dyn`: the model's arrays; `points`:
    `{key: (lanes, *shape)}`; `times = (t0, t1, ts or None)`."""
    return _blocks(cfg, dyn, points, times)


def _blocks(cfg: Config, dyn, points: dict, times: tuple) -> tuple[dict, dict]:
    model = eqx.combine(dyn, cfg.static)
    field = BatchField(model, cfg.info, cfg.shapes, cfg.dtype)
    n = next(iter(points.values())).shape[0]
    size = min(cfg.block, n)
    count = math.ceil(n / size)
    pad = count * size - n

    def blocked(v):
        v = jnp.concatenate([v, jnp.repeat(v[-1:], pad, axis=0)]) if pad else v
        return v.reshape(count, size, *v.shape[1:])

    t0, t1, ts = times
    run = lambda p: solve_block(field, cfg.plan, p, t0, t1, ts, cfg.dt0)  # noqa: E731
    out = jax.lax.map(run, {k: blocked(v) for k, v in points.items()})
    return jax.tree.map(lambda x: x.reshape(count * size, *x.shape[2:])[:n], out)


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
    n = next(iter(points.values())).shape[0]

    def f(live_leaves, live_points):
        full = list(leaves)
        for i, leaf in zip(live, live_leaves):
            full[i] = leaf
        return _blocks(cfg, jax.tree.unflatten(treedef, full), {**points, **live_points}, times)

    args = ([leaves[i] for i in live], {k: points[k] for k in keys})
    basis, count = _basis(args, n)
    # One loop computes the primal once and every tangent beside it: the primal does not
    # depend on the direction, so vmap leaves it unbatched (out_axes=None).
    out, (jac, _) = jax.vmap(lambda d: jax.jvp(f, args, d), out_axes=(None, 0))(basis)
    coef_shared = [jnp.ravel(t_leaves[i]) for i in live]
    coef_lane = [jnp.reshape(t_points[k], (n, -1)) for k in keys]
    d_shared = count
    t_ys = {}
    for var, j in jac.items():
        total = jnp.zeros_like(out[0][var])
        if coef_shared:
            total += jnp.tensordot(jnp.concatenate(coef_shared).astype(j.dtype), j[:d_shared], 1)
        if coef_lane:
            c = jnp.concatenate(coef_lane, axis=1).astype(j.dtype)
            total += jnp.einsum("nd,dn...->n...", c, j[d_shared:])
        t_ys[var] = total
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
