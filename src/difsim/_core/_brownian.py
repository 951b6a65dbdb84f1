"""Brownian paths for fixed-step SDE solves: increments drawn step by step from the key.

A `diffrax.VirtualBrownianTree` (difsim's default, `brownian="tree"`) answers any query
`W(tb) - W(ta)` consistently: the same key gives the same path for every step size, which
adaptive steps, strong-order checks and reverse-mode gradients need. Each query descends
the tree, though, about 16 levels of random draws: for fixed-step Monte Carlo ensembles
that dominates the cost. [`StepBrownianPath`][] (`brownian="steps"`) draws the increment
of step `k` (and its Lévy areas) directly from `fold_in(key, k)`, one draw per step (≈ 30×
cheaper on a CPU): exact Brownian increments on the step lattice `t0 + k·dt`, and
deterministic (so gradients through a fixed key are exact), but a key's path depends on
`dt`: refining the step gives a new path, not a finer one.
"""

import math

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PRNGKeyArray, PyTree

from difsim._core._custom_types import RealScalarLike

BROWNIAN = ("tree", "steps")


class StepBrownianPath(dfx.AbstractBrownianPath):
    """Brownian increments over the steps of a fixed-step solve: step `k` (from `t0 + k·dt`)
    draws its increment from `fold_in(key, k)`, scaled by the square root of its length
    (the last step may be cut short at `t1`). Only increments over single steps may be
    asked for (what fixed-step SDE solvers ask)."""

    t0: RealScalarLike
    t1: RealScalarLike
    dt: RealScalarLike
    key: PRNGKeyArray
    shape: PyTree[jax.ShapeDtypeStruct] = eqx.field(static=True)
    levy_area: type = eqx.field(static=True)

    def evaluate(self, t0, t1=None, left: bool = True, use_levy: bool = False):
        del left
        if t1 is None:
            raise ValueError(
                "brownian='steps' gives increments over solver steps only, not W(t); use "
                "brownian='tree' for the value of the path at a time"
            )
        step = jnp.round((t0 - self.t0) / self.dt).astype(jnp.int32)
        key = jax.random.fold_in(self.key, step)
        leaves, treedef = jax.tree.flatten(self.shape)
        keys = jax.random.split(key, len(leaves))
        out = [_leaf(k, s, t1 - t0, self.levy_area, use_levy) for k, s in zip(keys, leaves)]
        if not use_levy:
            return jax.tree.unflatten(treedef, out)
        fields = {f: jax.tree.unflatten(treedef, [getattr(o, f) for o in out])
                  for f in ("W", "H", "K") if hasattr(out[0], f)}  # fmt: skip
        return self.levy_area(dt=out[0].dt, **fields)


def _leaf(key, shape: jax.ShapeDtypeStruct, h, levy_area: type, use_levy: bool):
    """One leaf's increment over a step of length `h`, with the Lévy areas `levy_area` asks
    for (independent of W: H ~ N(0, h/12), K ~ N(0, h/720))."""
    scale = jnp.sqrt(h).astype(shape.dtype)
    k_w, k_h, k_k = jax.random.split(key, 3)
    w = jax.random.normal(k_w, shape.shape, shape.dtype) * scale
    if not use_levy:
        return w
    dt = jnp.asarray(h, shape.dtype)
    if levy_area is dfx.BrownianIncrement:
        return dfx.BrownianIncrement(dt=dt, W=w)
    hh = jax.random.normal(k_h, shape.shape, shape.dtype) * scale / math.sqrt(12)
    if levy_area is dfx.SpaceTimeLevyArea:
        return dfx.SpaceTimeLevyArea(dt=dt, W=w, H=hh)
    kk = jax.random.normal(k_k, shape.shape, shape.dtype) * scale / math.sqrt(720)
    return dfx.SpaceTimeTimeLevyArea(dt=dt, W=w, H=hh, K=kk)
