"""Explicit name → diffrax class tables, so configs can name solvers and users can list them."""

import dataclasses
from collections.abc import Callable

import diffrax as dfx
import optimistix as optx

from difsim.solvers._etdrk4 import ETDRK4
from difsim.solvers._linear_implicit import BackwardEuler, CrankNicolson


@dataclasses.dataclass(frozen=True)
class SolverInfo:
    """What difsim needs to know about a named solver.

    **Fields:**

    - `name`: the name configs use.
    - `cls`: the diffrax solver class.
    - `order`: order of convergence for ODEs.
    - `adaptive`: whether it carries an embedded error estimate (usable with a PID controller).
    - `implicit`: whether each step solves a nonlinear system (suited to stiff problems).
    - `imex`: whether it needs the right-hand side split into non-stiff and stiff parts.
    - `description`: one line for `difsim solvers`.
    """

    name: str
    cls: type[dfx.AbstractSolver]
    order: int
    adaptive: bool
    implicit: bool
    imex: bool
    description: str


def _info(name, cls, order, adaptive, implicit, imex, description):
    return name, SolverInfo(name, cls, order, adaptive, implicit, imex, description)


SOLVERS: dict[str, SolverInfo] = dict(
    [
        _info("euler", dfx.Euler, 1, False, False, False, "explicit Euler (fixed step)"),
        _info("heun", dfx.Heun, 2, True, False, False, "Heun's method, embedded Euler error"),
        _info("midpoint", dfx.Midpoint, 2, True, False, False, "explicit midpoint"),
        _info("ralston", dfx.Ralston, 2, True, False, False, "Ralston's 2nd-order method"),
        _info("bosh3", dfx.Bosh3, 3, True, False, False, "Bogacki–Shampine 3(2)"),
        _info("tsit5", dfx.Tsit5, 5, True, False, False, "Tsitouras 5(4): the default"),
        _info("dopri5", dfx.Dopri5, 5, True, False, False, "Dormand–Prince 5(4)"),
        _info("dopri8", dfx.Dopri8, 8, True, False, False, "Dormand–Prince 8(7), tight tolerances"),
        _info("implicit_euler", dfx.ImplicitEuler, 1, True, True, False, "backward Euler"),
        _info("kvaerno3", dfx.Kvaerno3, 3, True, True, False, "ESDIRK 3(2), stiff"),
        _info("kvaerno4", dfx.Kvaerno4, 4, True, True, False, "ESDIRK 4(3), stiff"),
        _info("kvaerno5", dfx.Kvaerno5, 5, True, True, False, "ESDIRK 5(4), stiff"),
        _info("kencarp3", dfx.KenCarp3, 3, True, True, True, "IMEX ARK 3(2)"),
        _info("kencarp4", dfx.KenCarp4, 4, True, True, True, "IMEX ARK 4(3)"),
        _info("kencarp5", dfx.KenCarp5, 5, True, True, True, "IMEX ARK 5(4)"),
        # Fixed-step PDE steppers for a linear stiff part: no Newton iterations (so not
        # "implicit" in the table's sense), but stable for stiff linear operators.
        _info("etdrk4", ETDRK4, 4, False, False, True, "exponential RK4, periodic linear stiff"),
        _info("crank_nicolson", CrankNicolson, 2, False, False, True, "CN + Heun, linear solve"),
        _info("imex_euler", BackwardEuler, 1, False, False, True, "IMEX (backward) Euler"),
    ]
)

CONTROLLERS: dict[str, str] = {
    "pid": "adaptive steps from the embedded error estimate (diffrax.PIDController)",
    "constant": "fixed step dt0 (diffrax.ConstantStepSize)",
}

# What each adjoint is for, shown by `difsim solvers` (diffrax's classes carry no one-liner).
ADJOINT_DESCRIPTIONS: dict[str, str] = {
    "checkpoint": "reverse mode with recursive checkpointing (default)",
    "direct": "reverse mode that also supports forward mode; more memory",
    "forward": "forward mode: best for few parameters and jax.jacfwd",
    "backsolve": "continuous adjoint solved backwards in time: O(1) memory",
}

ADJOINTS: dict[str, Callable[[], dfx.AbstractAdjoint]] = {
    "checkpoint": dfx.RecursiveCheckpointAdjoint,
    "direct": dfx.DirectAdjoint,
    "forward": dfx.ForwardMode,
    "backsolve": dfx.BacksolveAdjoint,
}


def _unknown(kind: str, name: object, table: dict) -> ValueError:
    allowed = ", ".join(repr(k) for k in table)
    return ValueError(f"unknown {kind} {name!r}; choose one of {allowed}")


def solver_info(solver: str | dfx.AbstractSolver) -> SolverInfo | None:
    """The [`SolverInfo`][] of a solver given by name or instance (`None` if unregistered)."""
    if isinstance(solver, str):
        try:
            return SOLVERS[solver.lower()]
        except KeyError:
            raise _unknown("solver", solver, SOLVERS) from None
    for info in SOLVERS.values():
        if type(solver) is info.cls:
            return info
    return None


def make_solver(solver: str | dfx.AbstractSolver) -> dfx.AbstractSolver:
    """A diffrax solver from a registered name (case-insensitive), or an instance as is."""
    if isinstance(solver, dfx.AbstractSolver):
        return solver
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a name or a diffrax solver, got {type(solver).__name__}")
    info = solver_info(solver)
    if info.implicit:
        # Chord (one Jacobian per nonlinear solve), tolerances from the step-size controller.
        # Not diffrax's default VeryChord: in diffrax 0.7.2 it reports benign iterations as
        # diverged, so Kvaerno5 takes ~10x the steps on Robertson and KenCarp4 stalls at
        # max_steps on smooth problems (tests/test_solvers.py).
        return info.cls(root_finder=dfx.with_stepsize_controller_tols(optx.Chord)())
    return info.cls()


def make_controller(
    controller: str | dfx.AbstractStepSizeController | None,
    solver: dfx.AbstractSolver,
    *,
    rtol: float,
    atol: float,
    dt0: float | None,
    dtmin: float | None = None,
    dtmax: float | None = None,
) -> dfx.AbstractStepSizeController:
    """The step-size controller: by name, an instance, or `None` (PID when `solver` is adaptive).

    A fixed step (`"constant"`, or a solver with no error estimate) needs `dt0`; the error
    names the solver so the fix is obvious.
    """
    if isinstance(controller, dfx.AbstractStepSizeController):
        return controller
    adaptive = isinstance(solver, dfx.AbstractAdaptiveSolver)
    if controller is None:
        controller = "pid" if adaptive else "constant"
    if not isinstance(controller, str) or controller.lower() not in CONTROLLERS:
        raise _unknown("step-size controller", controller, CONTROLLERS)
    controller = controller.lower()
    name = type(solver).__name__
    if controller == "pid":
        if not adaptive:
            raise ValueError(
                f"solver {name} has no embedded error estimate, so it cannot use the "
                "'pid' controller; use controller='constant' with a step dt0"
            )
        return dfx.PIDController(rtol=rtol, atol=atol, dtmin=dtmin, dtmax=dtmax)
    if dt0 is None:
        raise ValueError(
            f"solver {name} with a constant step size needs a step: pass dt0 "
            "(config key [solver] dt0)"
        )
    return dfx.ConstantStepSize()


def make_adjoint(adjoint: str | dfx.AbstractAdjoint) -> dfx.AbstractAdjoint:
    """A diffrax adjoint from a name in [`ADJOINTS`][] or an instance (returned as is)."""
    if isinstance(adjoint, dfx.AbstractAdjoint):
        return adjoint
    if not isinstance(adjoint, str) or adjoint.lower() not in ADJOINTS:
        raise _unknown("adjoint", adjoint, ADJOINTS)
    return ADJOINTS[adjoint.lower()]()
