"""One trajectory on the ensemble engine: `simulate(model, ..., adjoint="discrete")`.

The model runs as an ensemble of one lane, differentiated by the discrete adjoint of the
engine's own steps (`_discrete.py`): reverse mode whose backward pass is one pullback of
each step and of its saves, earlier steps recomputed from checkpoints, memory a fixed
ring and set of checkpoints whatever the number of steps. The steps are those `simulate`
takes with diffrax (same methods, same integral controller, diffrax's first step), to
rounding. For models with many parameters — a network in the right-hand side — the
gradient costs less than diffrax's `RecursiveCheckpointAdjoint` (docs/benchmarks.md,
"Reverse mode on one trajectory").
"""

from difsim._core import Model, SaveSpec, Solution, SolverSettings, register_own_steps
from difsim._ensemble._adjoint import DiscreteAdjoint
from difsim._ensemble._select import unsupported
from difsim._ensemble._simulate import run_ensemble


def simulate_one(
    model: Model, times: SaveSpec, settings: SolverSettings, adjoint: DiscreteAdjoint
) -> Solution:
    """The [`Solution`][] of `simulate(model, times, ...)` (no lanes axis), solved and
    differentiated by the engine under `adjoint`.

    **Raises:** `ValueError` naming what the engine does not run (a solver without an
    ensemble kernel, a controller other than the integral PID).
    """
    if (reason := unsupported(settings, model)) is not None:
        raise ValueError(
            f"simulate: adjoint='discrete' runs the ensemble engine's own steps, and {reason}; "
            "use adjoint='checkpoint' (diffrax's, the default)"
        )
    sol = run_ensemble(model, {}, times, settings, adjoint=adjoint, lanes=1)
    return Solution(
        ts=sol.ts[0],
        ys={k: v[0] for k, v in sol.ys.items()},
        status=sol.status[0],
        num_steps=sol.num_steps[0],
        num_accepted_steps=sol.num_accepted_steps[0],
        num_rejected_steps=sol.num_rejected_steps[0],
        t_end=None,  # as diffrax's solves without events: the status says where it ended
        y_end=None,
        model=model,
        var_info=sol.var_info,
        solver=sol.solver,
        result=None,
    )


register_own_steps(DiscreteAdjoint.name, DiscreteAdjoint, simulate_one)
