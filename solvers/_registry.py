"""Explicit name → class tables, so configs can name solvers, step-size controllers and
adjoints, and users can list them.

Each table is the one place its names live: an entry holds the class (or a small factory
where building one needs arguments) beside its one-line description, and
[`make_solver`][], [`make_controller`][] and [`make_adjoint`][] are the only functions that
resolve a name. The public dicts ([`SOLVERS`][], [`CONTROLLERS`][], [`ADJOINTS`][],
[`ADJOINT_DESCRIPTIONS`][]) are views of these tables, shaped as `difsim solvers` prints them.
"""

import dataclasses
import typing
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import diffrax as dfx

from difsim.solvers._backsolve import CheckedBacksolveAdjoint, checked_adjoint
from difsim.solvers._bdf import BDF
from difsim.solvers._bdf_controller import BDFController
from difsim.solvers._etdrk4 import ETDRK4
from difsim.solvers._linear_implicit import BackwardEuler, CrankNicolson
from difsim.solvers._radau import Radau5
from difsim.solvers._rosenbrock import Rodas5P
from difsim.solvers._stage_newton import StageNewton
from difsim.solvers._vocabulary import check_adjoint_name

# The named implicit solvers' nonlinear solves stop when their estimated error is this
# fraction of the step's error allowance (`root_tol`; see `StageNewton`). Hairer & Wanner
# advise 0.01–0.1; `experiments/benchmarks/bench_stiff.py` measured the choice.
DEFAULT_ROOT_TOL = 1e-2
# PI step control for implicit solvers (diffrax's suggestion for stiff problems, after
# Gustafsson and Söderlind): an integral-only controller lets stiff error estimates
# oscillate, rejecting ~40 % of steps on van der Pol and the Oregonator, and its error
# did not follow the tolerance on HIRES (tests/test_stiff_work_precision.py).
IMPLICIT_PCOEFF, IMPLICIT_ICOEFF = 0.4, 0.3


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

    @property
    def stiff(self) -> bool:
        """Whether it is meant for stiff problems: implicit, or a Rosenbrock method (which
        solves linear systems instead of nonlinear ones, hence not `implicit`)."""
        return self.implicit or issubclass(self.cls, Rodas5P)


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
        _info("rodas5p", Rodas5P, 5, True, False, False, "Rosenbrock 5(4): stiff; index-1 DAEs"),
        _info("radau5", Radau5, 5, True, True, False, "Radau IIA 5(3): stiff; index-1 DAEs"),
        _info("bdf", BDF, 5, True, True, False, "variable-order BDF/NDF 1-5: stiff; index-1 DAEs"),
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

_T = TypeVar("_T")


@dataclasses.dataclass(frozen=True)
class _Entry(Generic[_T]):
    # `build` makes the object: a class, or a factory taking the keywords its
    # `make_*` function passes.
    build: Callable[..., _T]
    description: str


def _resolve(kind: str, name: object, table: dict[str, _T]) -> _T:
    """The entry of `table` that `name` names (case-insensitive), or a `ValueError` listing them."""
    if isinstance(name, str) and name.lower() in table:
        return table[name.lower()]
    allowed = ", ".join(repr(k) for k in table)
    raise ValueError(f"unknown {kind} {name!r}; choose one of {allowed}")


def _pid(solver: dfx.AbstractSolver, *, rtol, atol, dt0, dtmin, dtmax):
    del dt0  # the first step is chosen by diffrax when dt0 is None
    if not isinstance(solver, dfx.AbstractAdaptiveSolver):
        raise ValueError(
            f"solver {type(solver).__name__} has no embedded error estimate, so it cannot use "
            "the 'pid' controller; use controller='constant' with a step dt0"
        )
    if isinstance(solver, BDF):
        # BDF chooses its own step and order (from three orders' estimates): its
        # controller applies them, with the same tolerances and bounds.
        return BDFController(rtol=rtol, atol=atol, dtmin=dtmin, dtmax=dtmax)
    if isinstance(solver, dfx.AbstractImplicitSolver):
        return dfx.PIDController(
            rtol=rtol, atol=atol, dtmin=dtmin, dtmax=dtmax,
            pcoeff=IMPLICIT_PCOEFF, icoeff=IMPLICIT_ICOEFF,
        )  # fmt: skip
    return dfx.PIDController(rtol=rtol, atol=atol, dtmin=dtmin, dtmax=dtmax)


def _constant(solver: dfx.AbstractSolver, *, rtol, atol, dt0, dtmin, dtmax):
    del rtol, atol, dtmin, dtmax  # a fixed step has no tolerances or bounds
    if dt0 is None:
        raise ValueError(
            f"solver {type(solver).__name__} with a constant step size needs a step: pass dt0 "
            "(config key [solver] dt0)"
        )
    return dfx.ConstantStepSize()


_CONTROLLER_TABLE: dict[str, _Entry[dfx.AbstractStepSizeController]] = {
    "pid": _Entry(
        _pid,
        "adaptive steps from the embedded error estimate (diffrax.PIDController; "
        "PI control for implicit solvers; BDF's own step and order choice for 'bdf')",
    ),
    "constant": _Entry(_constant, "fixed step dt0 (diffrax.ConstantStepSize)"),
}

# diffrax's adjoint classes carry no one-liner: the descriptions are ours.
_ADJOINT_TABLE: dict[str, _Entry[dfx.AbstractAdjoint]] = {
    "checkpoint": _Entry(
        dfx.RecursiveCheckpointAdjoint, "reverse mode with recursive checkpointing (default)"
    ),
    "direct": _Entry(
        dfx.DirectAdjoint, "reverse mode that also supports forward mode; more memory"
    ),
    "forward": _Entry(dfx.ForwardMode, "forward mode: best for few parameters and jax.jacfwd"),
    "backsolve": _Entry(
        CheckedBacksolveAdjoint,
        "continuous adjoint solved backwards in time: O(1) memory (not for stiff problems)",
    ),
}

CONTROLLERS: dict[str, str] = {name: e.description for name, e in _CONTROLLER_TABLE.items()}
ADJOINT_DESCRIPTIONS: dict[str, str] = {name: e.description for name, e in _ADJOINT_TABLE.items()}
ADJOINTS: dict[str, Callable[[], dfx.AbstractAdjoint]] = {
    name: e.build for name, e in _ADJOINT_TABLE.items()
}


def solver_info(solver: str | dfx.AbstractSolver) -> SolverInfo | None:
    """The [`SolverInfo`][] of a solver given by name or instance (`None` if unregistered)."""
    if isinstance(solver, str):
        return _resolve("solver", solver, SOLVERS)
    for info in SOLVERS.values():
        if type(solver) is info.cls:
            return info
    return None


def wants_split_terms(solver: dfx.AbstractSolver) -> bool:
    """Whether `solver` takes its vector field as `MultiTerm(non-stiff, stiff)`.

    Read from the solver's type, not its name: diffrax solvers declare the terms they
    accept as `term_structure`, and an IMEX solver's is `MultiTerm[tuple[AbstractTerm,
    AbstractTerm]]` (an instance's, so wrappers such as `diffrax.HalfSolver` answer for the
    solver they wrap). SDE solvers also take a two-term `MultiTerm` (drift, diffusion);
    difsim integrates ODEs only, so they never reach this question.
    """
    structure = getattr(solver, "term_structure", None)
    origin: Any = typing.get_origin(structure) or structure
    if not (isinstance(origin, type) and issubclass(origin, dfx.MultiTerm)):
        return False
    (terms,) = typing.get_args(structure) or (None,)
    return typing.get_origin(terms) is tuple and len(typing.get_args(terms)) == 2


def make_solver(
    solver: str | dfx.AbstractSolver, *, root_tol: float | None = None
) -> dfx.AbstractSolver:
    """A diffrax solver from a registered name (case-insensitive), or an instance as is.

    A named implicit solver solves its stages with [`StageNewton`][], its tolerances the
    step-size controller's and its `kappa` = `root_tol` (default `DEFAULT_ROOT_TOL`).

    **Raises:** `ValueError` for an unknown name, or a `root_tol` beside a solver instance
    (it carries its own root finder) or a solver that solves no nonlinear equations.
    """
    if isinstance(solver, dfx.AbstractSolver):
        if root_tol is not None:
            raise ValueError(
                f"root_tol={root_tol!r} was given beside a {type(solver).__name__} instance, "
                "which carries its own root_finder: name the solver (e.g. 'kvaerno5') or "
                "build its root finder with the tolerance you want"
            )
        return solver
    if not isinstance(solver, str):
        raise TypeError(f"solver must be a name or a diffrax solver, got {type(solver).__name__}")
    info = _resolve("solver", solver, SOLVERS)
    if info.implicit:
        # Not diffrax's default VeryChord with the controller's tolerances: its test, in
        # the units of f and tied to atol, fails most steps at tight tolerances (and in
        # diffrax 0.7.2 reports benign iterations as diverged); see `StageNewton`.
        kappa = DEFAULT_ROOT_TOL if root_tol is None else root_tol
        return info.cls(root_finder=dfx.with_stepsize_controller_tols(StageNewton)(kappa=kappa))
    if root_tol is not None:
        implicit = ", ".join(repr(n) for n, i in SOLVERS.items() if i.implicit)
        raise ValueError(
            f"root_tol applies to the nonlinear solves of implicit solvers ({implicit}); "
            f"{info.name!r} solves none: leave root_tol out"
        )
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
    if controller is None:
        controller = "pid" if isinstance(solver, dfx.AbstractAdaptiveSolver) else "constant"
    entry = _resolve("step-size controller", controller, _CONTROLLER_TABLE)
    return entry.build(solver, rtol=rtol, atol=atol, dt0=dt0, dtmin=dtmin, dtmax=dtmax)


def make_adjoint(adjoint: str | dfx.AbstractAdjoint) -> dfx.AbstractAdjoint:
    """A diffrax adjoint from a name in [`ADJOINTS`][] or an instance (returned as is,
    except that a `diffrax.BacksolveAdjoint` gets its backward solves checked: see
    `CheckedBacksolveAdjoint`)."""
    if isinstance(adjoint, dfx.AbstractAdjoint):
        return checked_adjoint(adjoint)
    # A name of the vocabulary that simulate does not take is refused saying who takes it.
    check_adjoint_name(adjoint.lower() if isinstance(adjoint, str) else adjoint, "simulate")
    return _resolve("adjoint", adjoint, _ADJOINT_TABLE).build()
