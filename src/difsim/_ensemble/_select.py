"""Which solves the ensemble engine takes, and why not the others (the reason is what
`engine="auto"` logs and stores when it falls back to diffrax)."""

import diffrax as dfx
import numpy as np
import optimistix as optx

from difsim._core import SolverSettings
from difsim._ensemble._control import Controller
from difsim._ensemble._methods import METHODS, AbstractEnsembleMethod


def method_for(settings: SolverSettings) -> AbstractEnsembleMethod | None:
    """The ensemble method reproducing `settings.solver`, or `None`."""
    cls = METHODS.get(type(settings.solver))
    return None if cls is None else cls()


def unsupported(settings: SolverSettings, model=None) -> str | None:
    """Why the ensemble engine cannot run a solve with `settings` (of `model`, when given),
    or `None` if it can."""
    if model is not None and getattr(type(model), "events", ()):
        return f"{type(model).__name__} has events, which the ensemble engine does not handle"
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


def controller_for(settings: SolverSettings, method: AbstractEnsembleMethod) -> Controller:
    """The per-lane controller with the constants of `settings.controller`."""
    ctrl = settings.controller
    return Controller(
        float(ctrl.rtol), float(ctrl.atol), float(method.error_order),
        float(ctrl.safety), float(ctrl.factormin), float(ctrl.factormax),
    )  # fmt: skip
