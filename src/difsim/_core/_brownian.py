"""Brownian paths of a solve: the virtual Brownian tree and its resolution, and increments
drawn step by step from the key.

A `diffrax.VirtualBrownianTree` (difsim's default, `brownian="tree"`) answers any query
`W(tb) - W(ta)` consistently: the same key gives the same path for every step size, which
adaptive steps, strong-order checks and reverse-mode gradients need. It halves `[t0, t1]`
until an interval (a leaf) is no longer than its tolerance `tol`, and inside a leaf it
draws one Brownian-bridge sample for all times. Times in different leaves are jointly
exact Brownian motion; two times in the same leaf are not (the increment between them has
a variance of order `(tb - ta)² / leaf`, not `tb - ta`). So every step of a solve must be
longer than a leaf: [`fixed_step_tol`][] makes a fixed step's tree four leaves per step at
least, [`adaptive_dtmin`][] gives an adaptive solve's controller a smallest step sixteen
leaves long (a step it would need below that ends the solve with `Status.DT_MIN`).

Each query descends the tree, one level per halving (16 to 30 levels of random draws):
for fixed-step Monte Carlo ensembles that dominates the cost. [`StepBrownianPath`][]
(`brownian="steps"`) draws the increment of step `k` (and its Lévy areas) directly from
`fold_in(key, k)`, one draw per step (≈ 30× cheaper on a CPU): exact Brownian increments
on the step lattice `t0 + k·dt`, and deterministic (so gradients through a fixed key are
exact), but a key's path depends on `dt`: refining the step gives a new path, not a finer
one.
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


# A fixed step's tree halves [t0, t1] 16 times, more for a step below four leaves of that:
# a step spans four leaves at least, so its two ends never share one.
FIXED_STEP_DEPTH = 16
# An adaptive solve's tree resolves a sixteenth of the smallest step its controller may
# take (`dtmin`): a step's two ends, and a rejected step's end and its shorter retry (at
# least a tenth of a step apart: diffrax's PID controller shrinks a rejected step by its
# safety factor 0.9 at least), lie in different leaves.
LEAVES_PER_DTMIN = 16
# An adaptive solve's default `dtmin` is an eighth of the mean step of a solve that takes
# all its `max_steps`: a span of 1 with 16384 steps, 7.6e-6, in a tree of 21 levels (16
# before the floor: 21 levels cost 1.1-1.35x the CPU time of short ShARK and Heun solves).
DTMIN_PER_MEAN_STEP = 8


def levy_area(solver: dfx.AbstractSolver) -> type:
    """The least Lévy area `solver` needs (`diffrax.BrownianIncrement` for most; space-time
    Lévy area for the stochastic Runge–Kutta methods: ShARK, SRA1, SEA, SPaRK, …)."""
    need = getattr(solver, "minimal_levy_area", None)
    kinds = (dfx.BrownianIncrement, dfx.SpaceTimeLevyArea, dfx.SpaceTimeTimeLevyArea)
    return next((k for k in kinds if need is None or issubclass(k, need)), kinds[-1])


def fixed_step_tol(t0, t1, dt0):
    """The tree tolerance of a fixed step `dt0` on `[t0, t1]`: `(t1 - t0) / 2**16`, or
    `dt0 / 4` for a smaller step (a leaf is never longer than the tolerance)."""
    return jnp.minimum((t1 - t0) * 2.0**-FIXED_STEP_DEPTH, dt0 / 4)


def adaptive_dtmin(t0, t1, max_steps: int, dtype, dtmin=None):
    """The smallest step of an adaptive SDE solve on `[t0, t1]`: the controller's `dtmin`,
    else `(t1 - t0) / (8 · max_steps)`; at least 16 leaves of the finest tree whose leaf
    bounds the times' `dtype` resolves (`(t1 - t0) · eps / 2`: 24 levels below `[t0, t1]` in
    float32 at most)."""
    span = t1 - t0
    floor = LEAVES_PER_DTMIN * span * float(jnp.finfo(dtype).eps) / 2
    if dtmin is None:
        dtmin = span / (DTMIN_PER_MEAN_STEP * max_steps)
    return jnp.maximum(jnp.asarray(dtmin, jnp.result_type(span)), floor)


def adaptive_tol(t0, t1, dtmin):
    """The tree tolerance of an adaptive solve whose steps are `dtmin` at least: the
    leaf `(t1 - t0) · 2**-depth` of the shallowest tree with 16 leaves per `dtmin`, a power
    of two of the span exactly (diffrax divides it by the span: no rounding to a level
    deeper)."""
    span = t1 - t0
    depth = jnp.ceil(jnp.log2(span * LEAVES_PER_DTMIN / dtmin) - 1e-6)
    return span * 2.0 ** -jnp.maximum(depth, 0.0)


class BrownianPath(dfx.AbstractBrownianPath):
    """A Brownian path with the scale down to which it is exact: what
    [`difsim.brownian_path`][] returns.

    `evaluate(ta, tb)` is `W(tb) - W(ta)` of the path `path` (a
    `diffrax.VirtualBrownianTree`), refused for `|tb - ta| < resolution`: below its leaf
    size the tree draws one Brownian-bridge sample for all times of a leaf, so such an
    increment is not a Brownian increment (its variance is too small). `W(t)` itself
    (`evaluate(t)`, or the increment from the path's start) is exact at every time; two
    such values less than `resolution` apart are not jointly Brownian.

    **Fields:** `path`; `resolution`, in the model's time units.
    """

    path: dfx.AbstractBrownianPath
    resolution: RealScalarLike

    @property
    def t0(self):
        return self.path.t0

    @property
    def t1(self):
        return self.path.t1

    @property
    def levy_area(self):
        return self.path.levy_area

    def evaluate(self, t0, t1=None, left: bool = True, use_levy: bool = False):
        out = self.path.evaluate(t0, t1, left, use_levy)
        if t1 is None:
            return out
        ta, tb = jnp.asarray(t0), jnp.asarray(t1)
        ends = (ta == self.t0) | (ta == self.t1) | (tb == self.t0) | (tb == self.t1)
        short = (jnp.abs(tb - ta) < self.resolution) & ~ends  # W(t) itself is exact
        try:
            refused = bool(short)
        except jax.errors.ConcretizationTypeError:  # traced: checked when it runs
            return eqx.error_if(out, short, _SHORT)
        if refused:
            raise ValueError(
                f"the increment from {float(t0):g} to {float(t1):g} is shorter than the "
                f"Brownian path's resolution {float(self.resolution):.3g}: " + _HINT
            )
        return out


_HINT = (
    "below it the tree draws one Brownian-bridge sample per leaf, not a Brownian increment. "
    "Ask for longer increments, or for a finer path: brownian_path(..., max_steps=n) "
    "resolves (t1 - t0) / (128 n), the path a solve with max_steps=n integrates against"
)
_SHORT = "brownian_path: an increment shorter than the path's resolution; " + _HINT
