"""Matrix-free (Newton–Krylov) variants of diffrax's implicit solvers, for large PDE states."""

import diffrax as dfx
import equinox as eqx
import lineax as lx

from difsim.solvers._linear_implicit import ScaledKrylov
from difsim.solvers._registry import DEFAULT_ROOT_TOL, make_solver
from difsim.solvers._stage_newton import StageNewton


def newton_krylov(
    solver: str | dfx.AbstractImplicitSolver = "kvaerno5",
    *,
    rtol: float = 1e-5,
    atol: float | None = None,
    restart: int = 20,
    max_steps: int | None = None,
) -> dfx.AbstractImplicitSolver:
    r"""A copy of an implicit diffrax solver whose nonlinear solves never build a Jacobian.

    diffrax's implicit Runge–Kutta solvers (Kvaerno, KenCarp, ImplicitEuler) solve each stage
    with a Newton-type root finder whose default linear solver materialises the dense
    Jacobian and LU-factorises it: $O(n^2)$ memory and $O(n^3)$ work for a state of $n$
    entries, prohibitive for method-of-lines on 2-D/3-D grids. Here the root finder's linear
    solver becomes GMRES inside a Newton iteration ([`StageNewton`][] re-linearising at
    every iteration: Jacobian-free Newton–Krylov): each iteration linearises with
    `jax.linearize` and GMRES needs only Jacobian-vector products, so memory stays $O(n)$.

    Unpreconditioned GMRES needs more iterations as $h\,\|J\|$ grows (fine diffusive
    grids, large steps); `restart` bounds its memory.

    **Arguments:**

    - `solver`: a registered name (`"kvaerno5"`, `"kencarp4"`, ...) or a diffrax implicit
        solver instance; its root finder keeps its tolerances (those of the step-size
        controller, for named solvers) and its `kappa` (`root_tol`), if it has one.
    - `rtol`, `atol`: GMRES tolerances on each Newton correction (an inexact Newton method
        needs only a few digits); `atol=None` scales it with the residual (see
        [`ScaledKrylov`][]).
    - `restart`: Krylov subspace size before GMRES restarts.
    - `max_steps`: most GMRES iterations (default: until converged or stagnated).

    **Returns:** a solver of the same class, usable wherever the original is.
    """
    solver = make_solver(solver)
    if not isinstance(solver, dfx.AbstractImplicitSolver):
        raise TypeError(
            f"newton_krylov needs an implicit diffrax solver (e.g. 'kvaerno5'), got "
            f"{type(solver).__name__}"
        )
    old = solver.root_finder
    if not all(hasattr(old, name) for name in ("rtol", "atol", "norm")):
        raise TypeError(
            f"newton_krylov: the root finder {type(old).__name__} of {type(solver).__name__} "
            "has no rtol/atol/norm to carry over"
        )
    gmres = lx.GMRES(rtol=rtol, atol=0.0 if atol is None else atol, restart=restart,
                     max_steps=max_steps)  # fmt: skip
    if atol is None:
        gmres = ScaledKrylov(gmres)
    # Newton, not chord: matrix-free, re-linearising costs one evaluation per iteration,
    # and a Krylov solve has no factorisation to reuse.
    kappa = getattr(old, "kappa", DEFAULT_ROOT_TOL)
    newton = StageNewton(rtol=1.0, atol=1.0, kappa=kappa, reuse_jacobian=False,
                         linear_solver=gmres)  # fmt: skip
    # Keep the tolerances as they were (possibly diffrax's "take them from the controller").
    newton = eqx.tree_at(lambda r: (r.rtol, r.atol, r.norm), newton, (old.rtol, old.atol, old.norm))
    return eqx.tree_at(lambda s: s.root_finder, solver, newton)
