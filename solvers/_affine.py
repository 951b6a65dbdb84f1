r"""Is a stiff term affine in the state? What the linear-implicit steppers rely on.

[`BackwardEuler`][] and [`CrankNicolson`][] replace the stiff term $L(t, y)$ by its
linearisation at zero, $b + A y$ with $b = L(t, 0)$ and $A = \partial_y L(t, 0)$, and solve
each step's implicit equation with one linear solve. That is exact if and only if $L$ is
affine in $y$; for any other $L$ the steps are silently wrong (for $L = -y^2$, $A = 0$ and
$b = 0$: the stiff term vanishes). So each solve first compares $L$ with its linearisation.

**The check.** At times $t_0$ and $t_1$ (the first step's ends) and at two probe states,
the initial state $y_0$ and $y_0 + \sigma r$ ($r$ a fixed random vector of $\pm 1$,
$\sigma = \max|y_0|$, or 1 if $y_0 = 0$), the defect

$$d = \max_i |L(t, p)_i - b_i - (A p)_i|$$

must not exceed what rounding can explain,

$$2^6 \varepsilon \big(\max|b| + \max|A p| + \max|L(t, p)| + \max|A r| \max|p|\big),$$

with $\varepsilon$ the machine epsilon of the state's dtype ($2^6\varepsilon$ = 1.4e-14 in
float64, 7.6e-6 in float32). The last term is for cancellation: $\max|A r| \max|p|$ stands
for the size of the products whose sum is $A p$ (the stencil's size times the state's), and
an affine $L$ whose terms cancel to far less than their size (the finite-difference
Laplacian of a smooth or constant field: $4/\Delta x^2$ times the state, summing to about
zero) may differ from its linearisation by a few $\varepsilon$ times that where the two
are computed in another order (boundary values, fused multiply-adds). In practice they
agree to the last bit: the defect of a Laplacian on 4096 cells is 0.

So an affine term is not refused, and a nonlinearity is found when it changes $L$ at a
probe by more than this. For $L = u_{xx} + \epsilon u^2$ and a smooth state of size 1:
on 4096 cells ($4/\Delta x^2 = 6.7 \cdot 10^7$) in float64 from $\epsilon \approx
10^{-6}$; on 128 cells in float32 from $\epsilon \approx 1$ (rounding alone changes that
$L$ by about $10^{-2}$ there). A smaller nonlinearity is not found, nor one that shows only
at other times or far from the probes. A probe where anything is NaN or infinite refuses
nothing: the solve then reports the non-finite values itself.

**Cost**, once per solve: per probe time one linearisation (one evaluation of $L$), two
evaluations of $L$ and three Jacobian–vector products; no gradient flows through it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float, PyTree


class AffineDefect(NamedTuple):
    """The check at one time and probe state (scalars; batched under `vmap`)."""

    defect: Float[Array, ""]  # max_i |L(t, p)_i - b_i - (A p)_i|
    allowed: Float[Array, ""]  # what rounding can explain
    leaf: jax.Array  # index (in `jax.tree.leaves` order) of the leaf with the largest defect

    @property
    def refused(self) -> Bool[Array, ""]:
        # `>`, not `<=`: a NaN defect refuses nothing (the solve reports non-finite values).
        return self.defect > self.allowed


def affine_defects(vector_field, ts, y0: PyTree, args) -> AffineDefect:
    """The check of the module docstring for `vector_field(t, y, args)` at each time of
    `ts` and both probe states: an [`AffineDefect`][] of arrays of shape `(len(ts), 2)`.
    Works on traced values (inside `jit`/`vmap`); no gradient flows through it."""
    y0, args = _no_gradient((y0, args))
    flat, unravel = ravel_pytree(y0)
    dtype = flat.dtype
    r = unravel(jax.random.rademacher(jax.random.key(0), flat.shape, dtype))
    size = _max_abs(y0)
    sigma = jnp.where(size > 0, size, 1).astype(dtype)
    probes = (y0, jax.tree.map(lambda y, ri: y + sigma * ri, y0, r))
    eps = float(np.finfo(dtype).eps)

    def at(t):
        b, jvp = jax.linearize(lambda y: vector_field(t, y, args), _zeros(y0))
        stencil = _max_abs(jvp(r))
        rows = []
        for p in probes:
            value, linear = vector_field(t, p, args), jvp(p)
            diff = jax.tree.map(lambda v, bi, lp: jnp.abs(v - bi - lp), value, b, linear)
            per_leaf = jnp.stack([_max_abs(d) for d in jax.tree.leaves(diff)])
            size = _max_abs(b) + _max_abs(linear) + _max_abs(value) + stencil * _max_abs(p)
            allowed = 2**6 * eps * size
            rows.append(AffineDefect(jnp.max(per_leaf), allowed, jnp.argmax(per_leaf)))
        return jax.tree.map(lambda *xs: jnp.stack(xs), *rows)

    return jax.tree.map(lambda *xs: jnp.stack(xs), *[at(t) for t in ts])


def is_affine(vector_field, ts, y0: PyTree, args) -> Bool[Array, ""]:
    """`False` where [`affine_defects`][] finds `vector_field` not affine in the state."""
    return ~jnp.any(affine_defects(vector_field, ts, y0, args).refused)


def check_affine(solver, vector_field, t0, t1, y0: PyTree, args, *, name: str) -> None:
    """Raise a `ValueError` naming `name` (e.g. `"Model.rhs_stiff"`) if `vector_field` is not
    affine in the state, as linear-implicit `solver` needs: the check of the module
    docstring, before a solve, on concrete values. Skipped (silently) when any of `t0`,
    `t1`, `y0`, `args` is traced: the solver then checks at run time and ends the solve
    with `diffrax.RESULTS.nonlinear_divergence`.
    """
    leaves = jax.tree.leaves((t0, t1, y0, args))
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return
    found = jax.device_get(affine_defects(vector_field, (t0, t1), y0, args))
    refused = np.argwhere(found.defect > found.allowed)
    if not refused.size:
        return
    i, j = refused[0]
    paths = [path for path, _ in jax.tree_util.tree_leaves_with_path(y0)]
    at = "the initial state" if j == 0 else "a random state of the initial state's size"
    t = float(np.asarray((t0, t1)[i]))
    raise ValueError(
        f"{name} is not affine in the state, which {type(solver).__name__} needs: at "
        f"t = {t:g} and {at}, its value{_leaf_name(paths[found.leaf[i, j]])} differs from its "
        f"linearisation at zero by {found.defect[i, j]:.3g} (rounding allows "
        f"{found.allowed[i, j]:.3g}). "
        f"{type(solver).__name__} solves the stiff part as linear, L(t, y) = A(t) y + b(t), "
        "with one linear solve per step, so a nonlinear one gives wrong results: move the "
        "nonlinear terms to the non-stiff part, or use an IMEX solver with Newton "
        "iterations (e.g. 'kencarp4')"
    )


def _leaf_name(path) -> str:
    """`" for 'u'"` for the leaf `u` of a dict (a model's variable), `""` for a bare array."""
    if not path:
        return ""
    if len(path) == 1 and isinstance(path[0], jax.tree_util.DictKey):
        return f" for {path[0].key!r}"
    return f" at {jax.tree_util.keystr(path)}"


def _no_gradient(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: lax.stop_gradient(x) if isinstance(x, jax.Array) else x, tree)


def _zeros(tree: PyTree) -> PyTree:
    return jax.tree.map(jnp.zeros_like, tree)


def _max_abs(tree: PyTree) -> Float[Array, ""]:
    leaves = [jnp.max(jnp.abs(x)) for x in jax.tree.leaves(tree) if jnp.size(x)]
    return jnp.max(jnp.stack(leaves)) if leaves else jnp.zeros(())
