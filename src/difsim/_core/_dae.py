r"""Differential-algebraic models: semi-explicit, index 1.

A model whose state declares algebraic variables (`ds.Var(..., algebraic=True)`) is the
system $x' = f(t, x, z)$, $0 = g(t, x, z)$: `rhs` returns $f$ for each differential
variable and the residual $g$ for each algebraic one. It is $M y' = F(t, y)$ with the
singular diagonal mass matrix $M = \operatorname{diag}(1, \ldots, 1, 0, \ldots, 0)$
(on the flattened state, `Rodas5P.mass`), which [`difsim.solvers.Rodas5P`][] solves. Index 1 means
$\partial g / \partial z$ is nonsingular: the constraints determine the algebraic
variables, which [`check_index_one`][] checks before the solve is compiled.

Before the first step [`consistent_state`][] solves the constraints for the algebraic
variables (Newton's method), the differential ones held at their given values; the
solve's gradients pass through that root (implicit differentiation).
"""

import dataclasses
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.flatten_util import ravel_pytree

from difsim import solvers
from difsim._core._vector_field import Layout, VectorField
from difsim._status import Status

# The consistent initialisation's Newton tolerances, as a fraction of the solve's: its
# error must not count against the first steps'.
INIT_TOL_FACTOR = 1e-3
INIT_MAX_STEPS = 64


def dae_solver(solver: dfx.AbstractSolver, layout: Layout, model_name: str):
    """`solver` set up for the mass matrix of `layout`'s algebraic variables (a copy of a
    [`difsim.solvers.Rodas5P`][], [`difsim.solvers.Radau5`][] or [`difsim.solvers.BDF`][]
    holding the mass diagonal),
    or a `ValueError` naming the solver and the variables when it cannot solve a
    differential-algebraic model."""
    if isinstance(solver, solvers.Rodas5P | solvers.Radau5 | solvers.BDF):
        algebraic = set(layout.algebraic)
        mass = tuple(0.0 if name in algebraic else 1.0 for name in _entry_names(layout))
        return dataclasses.replace(solver, mass=mass)
    raise ValueError(
        f"{model_name} is a differential-algebraic model (algebraic variables: "
        f"{', '.join(layout.algebraic)}): solver {type(solver).__name__} cannot solve it; "
        "use solver='rodas5p' (the default for such models), 'radau5' or 'bdf'"
    )


def refuse_singular_mass(solver, layout: Layout, model_name: str) -> None:
    """A `ValueError` for a solver given a singular mass matrix (`mass` with zeros) for a
    model that declares no algebraic variables: the zero entries would be solved as
    constraints that the model never wrote."""
    mass = getattr(solver, "mass", None)
    if mass is None or all(m != 0 for m in mass):
        return
    names = dict.fromkeys(n for n, m in zip(_entry_names(layout), mass, strict=False) if m == 0)
    raise ValueError(
        f"{type(solver).__name__}(mass=...) is singular (zero for {', '.join(names)}) but "
        f"{model_name} declares no algebraic variables: declare them with "
        "ds.Var(..., algebraic=True), and leave mass out (difsim sets it)"
    )


def refuse_dae(layout: Layout, model_name: str, what: str) -> None:
    """A `ValueError` naming `what` (a feature of the solve) when `layout` has algebraic
    variables: what difsim cannot yet do for a differential-algebraic model."""
    if layout.algebraic:
        raise ValueError(
            f"{model_name} is a differential-algebraic model (algebraic variables: "
            f"{', '.join(layout.algebraic)}): {what} is not supported for such models yet"
        )


def algebraic_indices(layout: Layout) -> np.ndarray:
    """Indices of the algebraic entries in the flattened (raveled) state of `layout`."""
    return np.flatnonzero(np.isin(_entry_names(layout), layout.algebraic))


def consistent_state(model, layout: Layout, t0, y0, *, rtol, atol):
    """`(y0, ok)`: the packed state `y0` with its algebraic entries solved from the
    constraints at `t0` (differential entries unchanged), and whether Newton converged.

    Tolerances: `INIT_TOL_FACTOR` times the solve's `rtol`/`atol`, no tighter than 100
    units in the last place of the state's dtype. Differentiable in both modes by the
    implicit function theorem: the gradient of a solve with respect to a parameter
    includes how the consistent algebraic values move with it.
    """
    flat, unravel = ravel_pytree(y0)
    index = algebraic_indices(layout)
    residual = _constraints(layout, unravel, index)
    floor = 100 * jnp.finfo(flat.dtype).eps
    tol = (jnp.maximum(INIT_TOL_FACTOR * rtol, floor),
           jnp.maximum(INIT_TOL_FACTOR * jnp.min(jnp.asarray(atol)), floor))  # fmt: skip
    # The loop sees constants only: no derivative is ever taken through it.
    const = _stop_gradient((model, t0, flat))
    z_root, ok = _newton(lambda z: residual(z, *const), const[2][index], tol)
    # The root's derivatives: one Newton step from the (constant) root, differentiated,
    # is the implicit function theorem's -(dg/dz)^-1 dg/dtheta, forward and reverse.
    jac = jax.jacfwd(residual)(z_root, *const)
    z = z_root - jnp.linalg.solve(jac, residual(z_root, model, t0, flat))
    z = jnp.where(ok, z, flat[index])
    return unravel(flat.at[index].set(z)), ok


def _constraints(layout: Layout, unravel, index: np.ndarray):
    """`residual(z, model, t, base)`: the constraints `g` at time `t`, for the flattened
    state `base` with its algebraic entries (`index`) replaced by `z`."""
    field = VectorField(layout, "rhs")

    def residual(z, model, t, base):
        return ravel_pytree(field(t, unravel(base.at[index].set(z)), model))[0][index]

    return residual


def _newton(g, z0, tol):
    """`(z, converged)`: Newton's method on `g(z) = 0` from `z0`, dense Jacobians, until a
    step is below `atol + rtol |z|` (max norm) or `INIT_MAX_STEPS`. Written out rather
    than `optimistix.root_find`: lineax's solves fail inside `shard_map` + `vmap` (lineax
    issue #185), which is where a sweep makes its lanes' initial values consistent."""
    rtol, atol = tol

    def cond(carry):
        _, k, done, _ = carry
        return (k < INIT_MAX_STEPS) & ~done

    def body(carry):
        z, k, _, _ = carry
        step = jnp.linalg.solve(jax.jacfwd(g)(z), g(z))
        z_new = z - step
        small = jnp.all(jnp.abs(step) <= atol + rtol * jnp.abs(z_new))
        return z_new, k + 1, small | ~jnp.all(jnp.isfinite(z_new)), small

    init = (z0, jnp.asarray(0), jnp.asarray(False), jnp.asarray(False))
    z, _, _, converged = lax.while_loop(cond, body, init)
    return z, converged & jnp.all(jnp.isfinite(z))


def init_status(status, ok):
    """`status`, or `Status.INCONSISTENT_INIT` where the consistent initialisation failed."""
    return jnp.where(ok, status, int(Status.INCONSISTENT_INIT))


def check_index_one(model, layout: Layout, t0, y0) -> None:
    r"""Raise a `ValueError` naming the algebraic variables the constraints do not
    determine at the initial values: $\partial g / \partial z$ is singular there (the
    model's index is above 1, or the guess sits where a constraint is flat).

    Only for a differential-algebraic `layout`, and with concrete values (an eager call);
    under a transformation the values are not known until run time, and a failed Newton
    solve reports `Status.INCONSISTENT_INIT`.
    """
    if not layout.algebraic or not all(_concrete(x) for x in jax.tree.leaves((model, t0, y0))):
        return
    index = algebraic_indices(layout)
    jac = np.asarray(_constraint_jacobian(layout, model, jnp.asarray(t0), y0))
    if not np.all(np.isfinite(jac)):
        return  # the Newton solve reports it
    rank = np.linalg.matrix_rank(jac) if jac.size else 0
    if rank == index.size:
        return
    names = _entry_names(layout)[index]
    # Algebraic entries no constraint depends on, else those in the Jacobian's null space.
    unused = names[np.all(jac == 0, axis=0)]
    if unused.size == 0:
        null = np.linalg.svd(jac)[2][rank:]
        unused = names[np.any(np.abs(null) > 1e-8, axis=0)]
    raise ValueError(_index_message(type(model).__name__, unused, rank, index.size))


@eqx.filter_jit
def _constraint_jacobian(layout: Layout, model, t0, y0):
    """∂g/∂z at `(t0, y0)`, compiled once per model structure: taken eagerly, op by op, it
    cost ~35 ms of every `simulate` of the six-variable Akzo Nobel DAE (2-core EPYC)."""
    flat, unravel = ravel_pytree(y0)
    index = algebraic_indices(layout)
    return jax.jacfwd(_constraints(layout, unravel, index))(flat[index], model, t0, flat)


def _index_message(model_name: str, unused: Any, rank: int, size: int) -> str:
    which = ", ".join(dict.fromkeys(str(n) for n in unused))
    return (
        f"{model_name}: the constraints do not determine the algebraic variable(s) {which} "
        f"at the initial values (the Jacobian of the algebraic entries of rhs with respect "
        f"to the algebraic variables has rank {rank} of {size}). Either the model's index "
        "is above 1 (a constraint that does not involve its algebraic variable, such as the "
        "Cartesian pendulum's length constraint without its multiplier: differentiate the "
        "constraint until it does, see docs/daes.md), or the initial guess sits where a "
        "constraint is flat in that variable: give a better initial value"
    )


def _entry_names(layout: Layout) -> np.ndarray:
    """The variable name of each entry of the flattened state."""
    # The order `ravel_pytree` flattens the packed state in: variable-major when stacked,
    # else a dict's (sorted keys).
    shapes = dict(zip(layout.names, layout.shapes))
    order = layout.names if layout.packed else sorted(layout.names)
    return np.concatenate([np.full(int(np.prod(shapes[n])), n, dtype=object) for n in order])


def _stop_gradient(tree):
    """`tree` with `lax.stop_gradient` on its array leaves (others, e.g. a network's
    activation function, pass as they are)."""
    return jax.tree.map(lambda x: lax.stop_gradient(x) if eqx.is_array(x) else x, tree)


def _concrete(leaf) -> bool:
    return not isinstance(leaf, jax.core.Tracer)
