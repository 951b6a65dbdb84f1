"""Clear errors when a derivative goes through an adjoint that cannot take it.

diffrax's adjoints each support one direction: `RecursiveCheckpointAdjoint` and
`BacksolveAdjoint` are reverse mode only (`jax.grad`, `jax.vjp`), `ForwardMode` is forward
mode only (`jax.jvp`, `jax.jacfwd`); `DirectAdjoint` does both. The wrong pairing reaches
the user as a JAX error about `custom_vjp` functions or `while_loop`s that never names the
adjoint. These helpers turn both into messages saying which `adjoint=` to use, and refuse
the continuous adjoint on stiff problems ([`check_backsolve`][]).
"""

import diffrax as dfx
import equinox.internal as eqxi

from difsim import solvers

_NAMES = {
    dfx.RecursiveCheckpointAdjoint: "'checkpoint' (the default)",
    dfx.BacksolveAdjoint: "'backsolve'",
}

FORWARD_ONLY = (
    "simulate: reverse-mode derivatives (jax.grad, jax.vjp) cannot pass through "
    "adjoint='forward', which is forward mode only: use adjoint='checkpoint' (the default) "
    "for jax.grad, or keep adjoint='forward' with jax.jacfwd / jax.jvp"
)


def _reverse_only_name(adjoint: dfx.AbstractAdjoint) -> str | None:
    for cls, name in _NAMES.items():
        if isinstance(adjoint, cls):
            return name
    return None


def forward_mode_error(adjoint: dfx.AbstractAdjoint, error: TypeError) -> TypeError | None:
    """The difsim error for JAX's `error`, raised when forward-mode differentiation met a
    reverse-only adjoint; `None` when `error` is something else."""
    name = _reverse_only_name(adjoint)
    if name is None or "forward-mode autodiff" not in str(error):
        return None
    return TypeError(
        f"simulate: forward-mode derivatives (jax.jvp, jax.jacfwd) cannot pass through "
        f"adjoint={name}, which is reverse mode only: use adjoint='forward' for forward "
        "mode, adjoint='direct' for both modes (more memory), or jax.grad / jax.jacrev"
    )


def forward_only(adjoint: dfx.AbstractAdjoint, outputs):
    """`outputs` as they are, except that with `adjoint="forward"` a reverse-mode
    derivative of them raises [`FORWARD_ONLY`][] (before JAX reaches the solve's loop and
    raises its own error about `while_loop`s)."""
    if not isinstance(adjoint, dfx.ForwardMode):
        return outputs
    # equinox's identity whose transpose raises: diffrax uses it likewise; a custom_vjp
    # would do too, but would also refuse the forward mode this adjoint is for.
    return eqxi.nondifferentiable_backward(outputs, msg=FORWARD_ONLY)


def check_backsolve(adjoint: str | dfx.AbstractAdjoint, model_cls: type, solver) -> None:
    """Refuse the continuous adjoint (`adjoint="backsolve"`, or a
    `diffrax.BacksolveAdjoint`) for a stiff problem: a model declaring `stiff = True`, or a
    solver for stiff problems (implicit, Rosenbrock), forward or in the adjoint's own
    `solver=`. The backward solve re-solves the state backwards in time, where a stiff,
    dissipative system's decaying modes grow: on Robertson's problem it used to return 1647
    for a derivative of -2.80 with every backward step succeeding, and it now fails
    (NONFINITE or MAX_STEPS) on Robertson, HIRES, the Oregonator and van der Pol
    (mu = 10, 100) alike. `adjoint`: as given to `simulate` (a name or an instance);
    `solver`: a name or a diffrax solver.

    **Raises:** `ValueError` naming the adjoint, why the problem is stiff, and the fix.
    """
    if not isinstance(adjoint, dfx.BacksolveAdjoint | str):
        return
    if isinstance(adjoint, str) and not isinstance(
        solvers.make_adjoint(adjoint), dfx.BacksolveAdjoint
    ):
        return
    backward = None if isinstance(adjoint, str) else adjoint.kwargs.get("solver")
    if getattr(model_cls, "stiff", False):
        why = f"{model_cls.__name__} declares stiff = True"
    elif is_stiff_solver(solver):
        why = f"solver {_label(solver)} is for stiff problems"
    elif backward is not None and is_stiff_solver(backward):
        why = f"the backward solver {_label(backward)} is for stiff problems"
    else:
        return
    name = repr(adjoint) if isinstance(adjoint, str) else f"{type(adjoint).__name__}(...)"
    raise ValueError(
        f"adjoint={name} on a stiff problem ({why}): the continuous adjoint solves the state "
        "backwards in time, which is unstable for stiff problems (its gradient fails or is "
        "wrong); use adjoint='checkpoint' (the default: exact for the forward solve) or "
        "'direct'"
    )


def is_stiff_solver(solver) -> bool:
    """Whether `solver` (a name in `difsim.solvers.SOLVERS` or a diffrax solver, through
    wrappers such as `newton_krylov`) is one for stiff problems: implicit or Rosenbrock."""
    if isinstance(solver, str):
        info = solvers.SOLVERS.get(solver)
        return info is not None and info.stiff
    # Through wrappers (newton_krylov, diffrax.HalfSolver): their `solver` attribute.
    while not isinstance(solver, dfx.AbstractImplicitSolver) and hasattr(solver, "solver"):
        solver = solver.solver
    return isinstance(solver, dfx.AbstractImplicitSolver | solvers.Rodas5P)


def _label(solver) -> str:
    return repr(solver) if isinstance(solver, str) else type(solver).__name__
