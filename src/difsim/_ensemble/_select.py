"""Which solves the ensemble engine takes, and why not the others (the reason is what
`engine="auto"` logs and stores when it falls back to diffrax)."""

import diffrax as dfx
import numpy as np
import optimistix as optx

from difsim import solvers
from difsim._core import SolverSettings
from difsim._ensemble._control import Controller
from difsim._ensemble._methods import METHODS, AbstractEnsembleMethod
from difsim._ensemble._sde_methods import SDE_METHODS, AbstractSDEMethod


def method_for(settings: SolverSettings) -> AbstractEnsembleMethod | None:
    """The ensemble method reproducing `settings.solver`, or `None`."""
    cls = METHODS.get(type(settings.solver))
    return None if cls is None else cls()


def sde_method_for(settings: SolverSettings) -> AbstractSDEMethod | None:
    """The ensemble SDE method reproducing `settings.solver`, or `None`."""
    cls = SDE_METHODS.get(type(settings.solver))
    return None if cls is None else cls()


def unsupported(settings: SolverSettings, model=None) -> str | None:
    """Why the ensemble engine cannot run a solve with `settings` (of `model`, when given),
    or `None` if it can."""
    if model is not None and getattr(type(model), "events", ()):
        return f"{type(model).__name__} has events, which the ensemble engine does not handle"
    if model is not None and model.is_stochastic():
        return _sde_unsupported(settings)
    solver = type(settings.solver).__name__
    if type(settings.solver) not in METHODS:
        names = ", ".join(sorted(cls.name for cls in METHODS.values()))
        return f"solver {solver} has no ensemble kernel (ensemble methods: {names})"
    ctrl = settings.controller
    if type(ctrl) is not dfx.PIDController:
        return f"controller {type(ctrl).__name__}: the ensemble engine steps adaptively (PID)"
    if (ctrl.pcoeff, ctrl.dcoeff, ctrl.icoeff) != (0, 0, 1):
        return "a PID controller with pcoeff/dcoeff: the ensemble engine's is integral-only"
    if ctrl.dtmin is not None or ctrl.dtmax is not None:
        return "a controller with dtmin/dtmax"
    if ctrl.norm is not optx.rms_norm:
        return "a controller with its own norm"
    if np.ndim(ctrl.rtol) or np.ndim(ctrl.atol):
        return "a vector rtol/atol"
    return None


def _sde_unsupported(settings: SolverSettings) -> str | None:
    """Why the ensemble engine cannot run a stochastic solve with `settings`: it takes
    fixed steps on the step lattice of `brownian="steps"` with the SDE methods of
    `SDE_METHODS`."""
    solver = type(settings.solver)
    if solver not in SDE_METHODS:
        info = solvers.sde_solver_info(settings.solver)
        label = info.name if info is not None else solver.__name__
        names = ", ".join(sorted(cls.name for cls in SDE_METHODS.values()))
        return f"SDE solver {label!r} has no ensemble kernel (ensemble SDE methods: {names})"
    if not isinstance(settings.controller, dfx.ConstantStepSize):
        return (
            "adaptive steps: the ensemble engine takes fixed steps for SDEs (give dt0, "
            "with brownian='steps')"
        )
    if settings.brownian != "steps":
        return (
            f"brownian={settings.brownian!r}: the ensemble engine draws each fixed step's "
            "increment from the key (brownian='steps'; the same path as the diffrax engine's)"
        )
    return None


def controller_for(settings: SolverSettings, method: AbstractEnsembleMethod) -> Controller:
    """The per-lane controller with the constants of `settings.controller`."""
    ctrl = settings.controller
    return Controller(
        float(ctrl.rtol), float(ctrl.atol), float(method.error_order),
        float(ctrl.safety), float(ctrl.factormin), float(ctrl.factormax),
    )  # fmt: skip
