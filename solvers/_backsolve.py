"""`CheckedBacksolveAdjoint`: the continuous adjoint, with its backward solve checked.

diffrax's `BacksolveAdjoint` runs its backward solves with the forward solve's `throw`,
which difsim sets to `False` (failures become a `Status`). A backward solve that fails
(`max_steps` reached on a stiff problem, say) then hands back a gradient that is simply
wrong, and nothing says so: the forward status describes the forward solve only.
"""

import diffrax as dfx
import equinox as eqx

from difsim._status import Status, status_from_result


def _messages() -> list[str]:
    return [
        f"adjoint='backsolve': the backward (adjoint) solve failed [{s.name}]: {s.message}. "
        "The gradient would be wrong, so none is returned. Use adjoint='checkpoint' (the "
        "default: exact for the forward solve, and the safe choice for stiff problems), or "
        "give the backward solve more room, e.g. diffrax.BacksolveAdjoint(max_steps=...)"
        for s in Status
    ]


def _checked_diffeqsolve(*args, **kwargs) -> dfx.Solution:
    """`diffrax.diffeqsolve` for the backward pass: its outputs are guarded by a runtime
    error when it did not succeed (under `vmap`: when any trajectory's did not)."""
    sol = dfx.diffeqsolve(*args, **{**kwargs, "throw": False})
    status = status_from_result(sol.result)
    failed = status != Status.SUCCESS
    # Guard the adjoint state the gradient is read from (and the rest of the solution, so
    # that no read of it skips the check).
    guarded = eqx.branched_error_if((sol.ys, sol.solver_state), failed, status, _messages())
    return eqx.tree_at(lambda s: (s.ys, s.solver_state), sol, guarded, is_leaf=_is_none)


def _is_none(x) -> bool:
    return x is None


class CheckedBacksolveAdjoint(dfx.BacksolveAdjoint):
    """diffrax's `BacksolveAdjoint` (continuous adjoint, O(1) memory) whose backward
    solves raise an error when they fail, instead of returning a wrong gradient.

    Takes the same keyword arguments (`solver`, `stepsize_controller`, `max_steps`, … of
    the backward solves). Subclasses diffrax's final class only to replace which
    `diffeqsolve` its backward pass calls: diffrax reads it from this one property.
    """

    @property
    def _diffeqsolve(self):
        return _checked_diffeqsolve


def checked_adjoint(adjoint: dfx.AbstractAdjoint) -> dfx.AbstractAdjoint:
    """`adjoint`, with a plain `BacksolveAdjoint` made a [`CheckedBacksolveAdjoint`][]
    (keeping its keyword arguments)."""
    if isinstance(adjoint, dfx.BacksolveAdjoint) and not isinstance(
        adjoint, CheckedBacksolveAdjoint
    ):
        return CheckedBacksolveAdjoint(**adjoint.kwargs)
    return adjoint
