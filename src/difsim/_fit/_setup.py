"""The pieces of a fit's setup: the optimizer's driver, the start time, the time-series
problem (single or multiple shooting, or steady states) and its initial guess."""

import numpy as np

from difsim._core import Model
from difsim._fit._drivers import OptimistixDriver, make_driver
from difsim._fit._shooting import (
    MultipleShooting,
    multiple_shooting as make_multiple_shooting,
    single_shooting,
)
from difsim._fit._steady import SteadyStateProblem
from difsim._fit._stochastic import AbstractObjective
from difsim.solvers import check_adjoint_name


def objective_optimizer(objective, model: Model, optimizer):
    """The optimizer of a stochastic model's fit: the objective's default unless another
    was asked for (a likelihood needs a minimiser, not a least-squares solver)."""
    if objective is None:
        raise ValueError(
            f"{type(model).__name__} is stochastic: tell fit what to compare, "
            "objective=ds.SimulatedMoments(paths=1000) (observed paths: mean and variance) "
            "or objective=ds.KalmanLikelihood() (a linear-Gaussian SDE's exact likelihood)"
        )
    if not isinstance(objective, AbstractObjective):
        raise TypeError(
            "objective must be ds.SimulatedMoments(...) or ds.KalmanLikelihood(), got "
            f"{objective!r}"
        )
    return objective.optimizer if optimizer == "trust_region" else optimizer


def start_time(cls: str, coords: np.ndarray, t0: float | None, control: str | None):
    """The time of the model's initial state (`None` in a steady-state fit), checked."""
    if control is not None:
        if t0 is not None:
            raise ValueError("t0 has no meaning in a steady-state fit (control=...)")
        return None
    t0 = float(coords[0]) if t0 is None else float(t0)
    if coords[0] < t0:
        raise ValueError(
            f"time {coords[0]:g} of the data lies before t0 = {t0:g}, outside the "
            f"integration span [{t0:g}, {coords[-1]:g}] of {cls}"
        )
    return t0


def driver_for(optimizer, rate, tol, adjoint, steps, num_free: int, fdata):
    """The optimizer's driver, its adjoint resolved, and the number of steps (`rate`:
    the learning rate and the gradient clip)."""
    learning_rate, clip = rate
    driver = make_driver(
        optimizer, learning_rate=learning_rate, tol=tol, adjoint="checkpoint", clip=clip
    )
    if adjoint is None:
        lsq = isinstance(driver, OptimistixDriver) and driver.least_squares
        # Forward mode when the Jacobian has fewer columns (free variables) than rows.
        adjoint = "forward" if lsq and num_free <= np.prod(fdata.values.shape) else "checkpoint"
    check_adjoint_name(adjoint, "fit")  # refused naming who takes it, if anyone does
    driver = make_driver(
        optimizer, learning_rate=learning_rate, tol=tol, adjoint=adjoint, clip=clip
    )
    default_steps = 256 if isinstance(driver, OptimistixDriver) else 1000
    steps = default_steps if steps is None else steps
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
    return driver, steps


def time_series_problem(
    model, transforms, fdata, noise, control, multiple_shooting, sim, t0, coords
):
    """The fit problem, and the initial values (natural units) of its extra free
    variables (segment states in multiple shooting)."""
    names = tuple(transforms)
    if control is not None:
        if multiple_shooting is not None:
            raise ValueError("multiple_shooting does not apply to a steady-state fit (control=...)")
        # Newton's tolerances, not the ODE's: a root is cheap to get to full precision.
        problem = SteadyStateProblem(
            model, names, tuple(transforms.values()), fdata, noise, control, 1e-10, 1e-10, 256
        )
        return problem, np.zeros(0)
    if multiple_shooting is None:
        problem = single_shooting(model, names, transforms.values(), fdata, noise, sim, t0)
        return problem, np.zeros(0)
    spec = multiple_shooting
    if not isinstance(spec, MultipleShooting):
        spec = MultipleShooting(spec)
    guess = guess_trajectory(model, sim, t0, coords, fdata)
    return make_multiple_shooting(
        spec, model, names, transforms.values(), transforms, fdata, noise, sim, t0, guess
    )


def control_dim(data, control: str) -> str | None:
    dims = getattr(data, "dims", ())
    return control if control in dims else None


def guess_trajectory(model, sim, t0, coords, fdata) -> dict[str, np.ndarray]:
    """State variables on the solve grid: from the data where every state variable is
    observed directly (no solve needed), else from a solve at the initial guess."""
    grid = np.concatenate([[t0], coords]) if t0 < coords[0] else coords
    names = model.initial_state().names
    if all(name in fdata.targets for name in names):
        values = np.where(np.asarray(fdata.mask), np.asarray(fdata.values), np.nan)
        out = {name: values[:, fdata.targets.index(name)] for name in names}
        if grid.shape[0] > coords.shape[0]:
            state = model.initial_state()
            out = {k: np.concatenate([[float(state[k])], v]) for k, v in out.items()}
        if all(np.all(np.isfinite(v)) for v in out.values()):
            return out
    sol = sim.simulate(model, grid)  # (forward only: its adjoint does not matter)
    return {k: np.asarray(v) for k, v in sol.ys.items()}
