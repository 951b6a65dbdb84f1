"""`fit`: estimate a model's parameters and initial state from observations."""

import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import Layout, Model
from difsim._fit._curriculum import Curriculum, staged_result, with_curriculum
from difsim._fit._data import (
    coordinate_values,
    fit_data,
    observation_map,
    read_data,
    residuals,
)
from difsim._fit._diagnostics import FitWarning
from difsim._fit._drivers import (
    AbstractDriver,
    OptaxDriver,
)
from difsim._fit._experiments import (
    experiment_dim,
    experiment_points,
    experiments_problem,
    stacked_data,
)
from difsim._fit._free import free_transforms, initial_values
from difsim._fit._loop import run
from difsim._fit._make_result import make_result
from difsim._fit._monitor import Monitor
from difsim._fit._multistart import multistart_spec, perturbed_starts
from difsim._fit._result import FitResult, predict
from difsim._fit._setup import (
    control_dim,
    driver_for,
    objective_optimizer,
    start_time,
    time_series_problem,
)
from difsim._fit._shooting import (
    AbstractProblem,
    MultipleShooting,
    MultipleShootingProblem,
    SimOptions,
    SingleShooting,
)
from difsim._fit._steady import SteadyStateProblem
from difsim._fit._stochastic import AbstractObjective
from difsim._fit._transforms import AbstractTransform
from difsim._status import Status


def fit(
    model: Model,
    data: Any,
    free: Mapping[str, AbstractTransform | Any] | Sequence[str],
    *,
    observe: Mapping[str, str | Callable] | None = None,
    noise: str = "gaussian",
    objective: AbstractObjective | None = None,
    weights: Mapping[str, Any] | None = None,
    sigma: Mapping[str, Any] | None = None,
    optimizer: Any = "trust_region",
    steps: int | None = None,
    learning_rate: float | Callable = 1e-2,
    clip: float | None = None,
    tol: float = 1e-8,
    adjoint: str | None = None,
    time: str | None = None,
    t0: float | None = None,
    control: str | None = None,
    multiple_shooting: int | MultipleShooting | None = None,
    multistart: int | tuple | None = None,
    experiment: str | None = None,
    batch_size: int | None = None,
    validation: float | Sequence | None = None,
    patience: int | None = None,
    seed: int = 0,
    curriculum: int | Sequence[float] | None = None,
    checkpoint: str | os.PathLike | None = None,
    progress: bool | None = None,
    max_failures: int = 20,
    solver: Any = None,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    max_steps: int = 4096,
    root_tol: float | None = None,
) -> FitResult:
    r"""Fit free parameters (and initial state) of `model` to observations.

    Minimises $\tfrac12\sum_i r_i^2$ over the free variables, with weighted residuals
    $r_i = w_i\,(y_i^{\rm model} - y_i^{\rm data})$ (`noise="gaussian"`) or
    $r_i = w_i\,(\log y_i^{\rm model} - \log y_i^{\rm data})$ (`noise="lognormal"`).
    Gradients go through the ODE solver (diffrax adjoints). See `docs/fitting.md`.

    **Arguments:**

    - `model`: a [`Model`][]; its values are the initial guess of the free variables and
      the fixed values of the others.
    - `data`: an `xarray.Dataset`, a path to a netCDF or CSV file, a `pandas.DataFrame` or
      a mapping of columns; one coordinate (`time`) and the observed variables. NaN marks a
      missing value.
    - `free`: the variables to fit: `{name: transform}` with `ds.Positive()`,
      `ds.Bounded(lo, hi)`, `ds.Identity()` (or `"positive"`, `[lo, hi]`), or a list of
      names (unconstrained). Names are parameters or `"state.<var>"` (an initial value).
    - `observe`: `{data variable: state variable or function(state) -> value}`; default:
      data variables named like state variables observe those.
    - `noise`: `"gaussian"` or `"lognormal"` (positive data, relative errors).
    - `objective`: for a stochastic model (see `docs/stochastic.md`), what is compared:
      [`SimulatedMoments`][] (observed paths: their mean and variance per time) or
      [`KalmanLikelihood`][] (one path of a linear-Gaussian SDE: its exact likelihood;
      `sigma` is then the measurement noise). Required for a stochastic model.
    - `weights`, `sigma`: per data variable, a residual weight or a noise scale
      (weight `1/sigma`), each a number or an array over the time points.
    - `optimizer`: `"trust_region"` (default: a trust-region Levenberg–Marquardt method
      with scipy `trf`'s rules, difsim's `TrustRegionLM`), `"minpack"` (the same with
      MINPACK `lmder`'s rules), `"levenberg_marquardt"`, `"gauss_newton"`, `"dogleg"`,
      `"bfgs"`, `"nonlinear_cg"` (optimistix), `"adam"`, `"adamw"`, `"adabelief"`,
      `"rmsprop"`, `"sgd"`, `"lbfgs"` (optax), an optax `GradientTransformation` or an
      optimistix least-squares solver or minimiser. A local optimizer finds the minimum of
      its start's basin: for several minima use `multistart`.
    - `steps`: most optimizer steps (default 256 for the least-squares solvers and
      optimistix minimisers, 1000 for optax).
    - `learning_rate`: for named optax optimizers: a number, or an optax schedule (e.g.
      `optax.cosine_decay_schedule(1e-2, 2000)`). `clip`: with an optax optimizer, scale
      each gradient down to this global norm at most (`optax.clip_by_global_norm`): keeps
      a network's first steps from blowing up a stiff solve. `tol`: `rtol = atol` of named
      optimistix solvers (the convergence test).
    - `adjoint`: `"checkpoint"` (reverse mode through diffrax's solve), `"forward"`
      (forward mode, one tangent per free variable) or `"discrete"` (reverse mode by the
      discrete adjoint of the ensemble engine's own steps: for many free variables, e.g. a
      network, on ODEs the engine runs; see `docs/learning.md`). Default: forward for
      least-squares solvers (their Jacobian has fewer columns than rows), checkpoint
      otherwise.
    - `time`: the data coordinate (or CSV column) holding the times. `t0`: the time of the
      model's initial state (default: the first data time).
    - `control`: fit *steady states* instead of a time series: the name of a model
      parameter whose values the data coordinate holds; each data point is the
      equilibrium at that value (see [`steady_state`][]).
    - `multiple_shooting`: a number of segments, or [`MultipleShooting`][].
    - `multistart`: `n`, `(n, key)` or `(n, key, scale)`: run `n` fits in parallel (vmap)
      from the guess and `n - 1` perturbations of it (normal, standard deviation `scale`
      = 0.3 in unconstrained units, relative for unbounded variables); keep the best.
      `key`: a `jax.random.key` or an integer seed from 0 to 2**63 - 1 (default 0).
    - `experiment`: the data dimension of experiments (default: `"experiment"` if the
      data have it): one time series each, from its own values (data variables over the
      experiment dimension alone, named after a parameter or `"state.<var>"`); see
      `docs/learning.md`. `batch_size`: each step sees that many training experiments
      (optax optimizers). `validation`: a fraction of the experiments, or their labels,
      held out; their loss after every block of 50 steps picks the result.
      `patience`: stop after that many evaluations without a lower validation loss.
      `seed`: of the minibatches and of a fractional validation split.
    - `curriculum`: growing horizons (optax optimizers): a number of stages (horizons
      evenly from `t0` to the last data time) or the horizons, increasing (the last data
      time appended if they end before it). Each stage fits the data up to its horizon
      for `steps // stages` steps (the last stage the rest); the result is the best
      iterate of the last stage. `FitResult.curriculum` records the stages.
    - `checkpoint`: a file to save the optimisation state in after every block of steps;
      if it exists, the fit resumes from it (with `validation` or `batch_size`, the record
      of evaluations too: a resumed fit ends bit for bit as an uninterrupted one).
    - `progress`: `None` (default) or `True` show progress: a bar on a terminal, log lines
      every 10 s elsewhere (steps, loss, time left); `False`: none.
    - `max_failures`: consecutive rejected steps (non-finite loss, failed solves) before
      the fit stops.
    - `solver`, `rtol`, `atol`, `max_steps`, `root_tol`: passed to [`simulate`][]
      (`max_steps` is lower than `simulate`'s default: a trial point that needs more steps
      has almost always blown up, and is then rejected sooner).

    A fit in float32 (x64 not enabled when the model was made) warns (`UserWarning`):
    its steps, convergence test and standard errors need float64. A result whose estimates
    the data barely determine (relative standard errors above 100 %, a near-singular
    Gauss–Newton Hessian) or that explains less than half of the data's variation warns
    with [`FitWarning`][] (the same lines are in `FitResult.notes` and the summary).

    The optimizer's own convergence test is checked again at the result (the final-point
    test, see `docs/fitting.md`): an optimizer that stopped where a Gauss–Newton step would
    still lower the loss ends `Status.FIT_STALLED` (`"stalled"`, `ok` false).

    **Returns:** a [`FitResult`][].

    **Example:**

    ```python
    import numpy as np
    import xarray as xr
    import difsim as ds

    t = np.linspace(0.0, 4.0, 21)
    data = xr.Dataset({"y": ("time", np.exp(-0.35 * t))}, coords={"time": t})
    result = ds.fit(ds.models.ExponentialDecay(), data, free={"k": ds.Positive()})
    assert abs(result.parameters["k"] - 0.35) < 1e-3
    ```
    """
    setup = prepare_fit(
        model, data, free, observe=observe, noise=noise, objective=objective, weights=weights,
        sigma=sigma, optimizer=optimizer, steps=steps, learning_rate=learning_rate, clip=clip,
        tol=tol,
        adjoint=adjoint, time=time, t0=t0, control=control,
        multiple_shooting=multiple_shooting, multistart=multistart, solver=solver, rtol=rtol,
        atol=atol, max_steps=max_steps, root_tol=root_tol, experiment=experiment,
        batch_size=batch_size, validation=validation, patience=patience, seed=seed,
        curriculum=curriculum,
    )  # fmt: skip
    carry, history = run(
        setup.driver,
        setup.problem,
        setup.u0,
        steps=setup.steps,
        max_failures=max_failures,
        checkpoint=checkpoint,
        progress=progress,
        monitor=setup.monitor,
    )
    batched = setup.u0.ndim == 2
    result = make_result(setup.problem.full(), setup.driver, carry, history, setup.transforms,
                         batched, setup.monitor)  # fmt: skip
    if isinstance(setup.problem, Curriculum):
        result = staged_result(result, setup.problem.stages())
    for note in result.notes:
        warnings.warn(f"fit({type(model).__name__}): {note}", FitWarning, stacklevel=2)
    return result


class FitSetup(NamedTuple):
    """A fit ready to run: `problem` (unconstrained `u` → residuals), `driver` (the
    optimizer), `steps` (its budget), `u0` (start, `(p,)`, or `(starts, p)` for a
    multistart) and the free variables' `transforms`."""

    problem: AbstractProblem
    driver: AbstractDriver
    steps: int
    u0: jax.Array
    transforms: dict[str, AbstractTransform]
    monitor: Monitor | None = None


def prepare_fit(model: Model, data: Any, free, *, observe=None, noise="gaussian", objective=None,
                weights=None, sigma=None, optimizer="trust_region", steps=None, learning_rate=1e-2,
                clip=None, tol=1e-8, adjoint=None, time=None, t0=None, control=None,
                multiple_shooting=None, multistart=None, solver=None, rtol=1e-6, atol=1e-6,
                max_steps=4096, root_tol=None, experiment=None, batch_size=None,
                validation=None, patience=None, seed=0, curriculum=None) -> FitSetup:  # fmt: skip
    """Everything [`fit`][] does before optimising, checked (same arguments); also what
    `experiments/benchmarks/bench_fit_robustness.py` hands scipy's optimizers."""
    if not isinstance(model, Model):
        raise TypeError(f"fit expects a difsim.Model instance, got {type(model).__name__}")
    dataset, coord = read_data(
        data, time if time is not None or control is None else control_dim(data, control)
    )
    transforms = free_transforms(model, free, control)
    x0 = initial_values(model, transforms)
    num_free = sum(x.size for x in x0)
    coords = coordinate_values(dataset, coord, increasing=control is None)
    t0 = start_time(type(model).__name__, coords, t0, control)
    dtype = Layout.of(model.initial_state()).dtype
    warn_precision(dtype, type(model).__name__)
    pairs = observation_map(dataset, coord, model, observe)
    starts = None if multistart is None else multistart_spec(multistart)
    dim = None if control is not None else experiment_dim(dataset, coord, experiment)
    monitor = None
    if dim is not None:
        _check_experiments(objective, model, multiple_shooting, starts)
        problem, monitor, driver, steps = _experiments_setup(
            model, transforms, dataset, (coord, coords, pairs, dim, t0), num_free, dtype,
            noise=noise, weights=weights, sigma=sigma, optimizer=optimizer,
            rate=(learning_rate, clip), tol=tol, adjoint=adjoint, steps=steps,
            sim=(solver, rtol, atol, max_steps, root_tol), batch_size=batch_size,
            validation=validation, patience=patience, seed=seed,
        )  # fmt: skip
        extra = np.zeros(0)
    elif batch_size is not None or validation is not None or patience is not None:
        raise ValueError(
            "batch_size, validation and patience apply to data of several experiments (a "
            "data dimension 'experiment', or experiment='<dim>')"
        )
    elif objective is not None or model.is_stochastic():
        optimizer = objective_optimizer(objective, model, optimizer)
        sim = SimOptions(solver, rtol, atol, max_steps, "checkpoint", root_tol)
        problem = objective.problem(
            model, tuple(transforms), tuple(transforms.values()), dataset, coord, coords,
            pairs, sigma, t0, sim, dtype,
        )  # fmt: skip
        rate, fdata = (learning_rate, clip), problem.data
        driver, steps = driver_for(optimizer, rate, tol, adjoint, steps, num_free, fdata)
        problem, extra = problem.with_adjoint(driver.adjoint), np.zeros(0)
    else:
        fdata = fit_data(
            dataset, coord, coords, pairs, noise=noise, weights=weights, sigma=sigma, dtype=dtype
        )
        rate = (learning_rate, clip)
        driver, steps = driver_for(optimizer, rate, tol, adjoint, steps, num_free, fdata)
        sim = SimOptions(solver, rtol, atol, max_steps, driver.adjoint, root_tol)
        problem, extra = time_series_problem(
            model, transforms, fdata, noise, control, multiple_shooting, sim, t0, coords
        )
    # Each free variable's values through its transform, then the extras one by one.
    x_all = [*x0, *np.asarray(extra).reshape(-1, 1)]
    u0 = [np.asarray(t.inverse(x)) for t, x in zip(problem.all_transforms(), x_all)]
    u0 = jnp.asarray(np.concatenate(u0), dtype)
    _check_initial(problem, u0, model)
    problem = with_curriculum(problem, curriculum, steps, driver, t0)
    if starts is not None:
        u0 = perturbed_starts(u0, *starts)
    return FitSetup(problem, driver, steps, u0, transforms, monitor)


def _experiments_setup(model, transforms, dataset, where, num_free, dtype, *, noise, weights,
                       sigma, optimizer, rate, tol, adjoint, steps, sim, batch_size, validation,
                       patience, seed):  # fmt: skip
    """`(problem, monitor, driver, steps)` of a fit to experiments (`where`: the data's
    coordinate, its values, the observation pairs, the experiment dimension, t0)."""
    coord, coords, pairs, dim, t0 = where
    fdata = stacked_data(dataset, coord, coords, pairs, dim, noise=noise, weights=weights,
                         sigma=sigma, dtype=dtype)  # fmt: skip
    driver, steps = driver_for(optimizer, rate, tol, adjoint, steps, num_free, fdata)
    if batch_size is not None and not isinstance(driver, OptaxDriver):
        raise ValueError(
            f"batch_size needs an optax optimizer (each step sees other experiments); "
            f"{driver.name} compares steps on one loss: choose e.g. optimizer='adam'"
        )
    solver, rtol, atol, max_steps, root_tol = sim
    options = SimOptions(solver, rtol, atol, max_steps, driver.adjoint, root_tol)
    points = experiment_points(model, dataset, dim, dtype)
    problem, held = experiments_problem(
        model, transforms, fdata, points, dataset, dim, options, t0, noise=noise,
        batch_size=batch_size, validation=validation, seed=seed,
    )  # fmt: skip
    return problem, _monitor(problem, held, patience), driver, steps


def _monitor(problem, held, patience) -> Monitor | None:
    """What watches a fit to experiments: the held-out experiments' loss, else (with
    minibatches) the full training loss, else nothing."""
    if held is not None:
        return Monitor(held, "validation", patience)
    if patience is not None:
        raise ValueError("patience stops on the validation loss: give validation too")
    return Monitor(problem.full(), "training") if problem.batch is not None else None


def _check_experiments(objective, model, multiple_shooting, starts) -> None:
    if objective is not None or model.is_stochastic():
        raise ValueError("a fit to several experiments takes a deterministic model")
    if multiple_shooting is not None or starts is not None:
        raise ValueError(
            "multiple_shooting and multistart do not apply to a fit to several experiments yet"
        )


def warn_precision(dtype, name: str) -> None:
    """Warn when a fit would run below float64: its Gauss–Newton steps, covariance and
    convergence test at `tol` = 1e-8 need more digits than float32's ~7."""
    if jnp.finfo(dtype).bits < 64:
        warnings.warn(
            f"fitting {name} in {jnp.dtype(dtype).name}: least-squares steps, the "
            "convergence test and the standard errors need float64. Enable it before "
            'creating the model: jax.config.update("jax_enable_x64", True) (configs: '
            '[solver] dtype = "float64", the default for fits)',
            UserWarning,
            stacklevel=3,
        )


def _check_initial(problem, u0, model) -> None:
    """Raise if the loss at the initial guess is not finite, saying why."""
    if isinstance(problem, MultipleShootingProblem):
        return  # each segment starts from data or a solve already checked to be finite
    start = problem.model_from(u0)
    predicted = predict(problem, start, problem.data.times)
    r = np.asarray(residuals(jnp.asarray(predicted), problem.data, problem.noise))
    if np.all(np.isfinite(r)):
        return
    cls = type(model).__name__
    hint = ""
    if isinstance(problem, SingleShooting):
        grid = np.asarray(problem.data.times)
        if problem.prepend:
            grid = np.concatenate([[float(problem.t0)], grid])
        status = Status(int(problem.sim.simulate(start, jnp.asarray(grid)).status))
        if not status.ok:
            hint = f": simulate({cls}) ended with status {status.name} ({status.message})"
    elif isinstance(problem, SteadyStateProblem):
        hint = ": the steady-state solve failed (try another initial state as the guess)"
    if not hint and problem.noise == "lognormal":
        hint = ": with noise='lognormal' every prediction must be positive"
    raise ValueError(f"the loss of {cls} is not finite at the initial guess{hint}")
