"""Running a checked [`Experiment`][]: check and lock its outputs, simulate (or sweep, or
fit), then write netCDF and PNG atomically.

Every output path is checked before any work (see `difsim._io`'s ownership rules): a
problem is an [`OutputError`][], one line naming the path. An existing output is replaced
only if it is a difsim output of the same kind and either this same run wrote it (same
config, same difsim) or `[output] overwrite` (`--overwrite`) is set.
"""

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
import xarray as xr

from difsim import solvers
from difsim._config import (
    ConfigError,
    Experiment,
    check_atol_against_state,
    declared_state,
    label_terms,
    load_config,
    network_references,
)
from difsim._core import noise_summary, reports_model_time, simulate
from difsim._fit import check_checkpoint, fit, with_networks
from difsim._io import (
    RUN_ATTR,
    atomic_write,
    check_output,
    check_target,
    difsim_version,
    output_lock,
    png_metadata,
    recorded,
)
from difsim._plot import plot as plot_dataset
from difsim._status import SolveError, Status, max_steps_message
from difsim._sweep import run_sweep


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What one run produced.

    **Fields:** `dataset` (the labelled result; `attrs["config"]` holds the complete config
    as TOML), `output` and `plot` (paths written, or `None`), `wall_time` (seconds spent in
    `simulate`, `sweep` or `fit`, including JIT compilation), `status` (a [`Status`][]; for a
    sweep, `SUCCESS` unless no trajectory succeeded; for a fit, the fit's own), `report`
    (a sweep's `SweepReport`).
    """

    dataset: xr.Dataset
    output: Path | None
    plot: Path | None
    wall_time: float
    status: Status
    report: Any = None
    fit: Any = None


@dataclasses.dataclass(frozen=True)
class Outputs:
    """The checked output paths of a run (`None`: not written) and the run's identity."""

    netcdf: Path | None
    plot: Path | None
    summary: Path | None  # a fit's JSON summary
    run: str


def execute(
    experiment: Experiment,
    *,
    output: str | os.PathLike | None = None,
    plot: bool = True,
    progress: bool | None = False,
) -> RunResult:
    """Run `experiment` and write its outputs; a failed solve is reported in `status`.

    `progress`: `None` shows it where the work is long (sweeps, fits, PDE solves; an ODE
    solve takes well under a second and keeps its program cacheable), `True` everywhere,
    `False` nowhere (docs: "Progress and logging").

    The output paths are checked, and the output locked, before anything is computed. The
    solve runs with `throw=False`, so a failure still writes the (partial) output: values
    after the failure are NaN and the `status` variable says what went wrong.

    **Raises:** [`OutputError`][] for an output path that cannot or may not be written, or
    one that another run is writing; [`ConfigError`][] for an `[solver] atol` at least as
    large as a computed initial state (see `check_atol_against_state`).
    """
    outputs = check_outputs(experiment, output, plot)
    _check_atol(experiment)
    if experiment.sweep is not None:  # `run_sweep` locks its output itself
        return _execute_sweep(experiment, outputs, progress=progress)
    with output_lock(outputs.netcdf or outputs.plot):
        if experiment.fit is not None:
            return _execute_fit(experiment, outputs, progress=progress)
        return _execute_simulation(experiment, outputs, progress=progress)


def _check_atol(experiment: Experiment) -> None:
    """`[solver] atol` against the initial state of a model that computes its own (a
    field on a grid), which checking the config cannot see without building the model;
    before any work, as a config error naming the config."""
    model = experiment.model
    if experiment.solver is None or declared_state(model) is not None:
        return  # checked with the config
    with jax.enable_x64(experiment.solver.dtype == "float64"):
        state = list(model.build().initial_state().items())
    try:
        check_atol_against_state(experiment.solver, model, state=state)
    except ConfigError as e:
        raise ConfigError(e.problem, e.key, experiment.source) from None


def check_outputs(experiment: Experiment, output: str | os.PathLike | None, plot: bool) -> Outputs:
    """The run's output paths, each checked (suffix, folder, ownership) before any work."""
    nc_path, png_path = experiment.output.paths(output)
    png_path = png_path if plot else None
    kind = "sweep" if experiment.sweep else "fit" if experiment.fit else "simulation"
    config = experiment.to_dict()
    config.pop("output")  # where the results go, and whether to replace, are not the run
    identity = json.dumps([config, difsim_version()], sort_keys=True, default=str)
    run = hashlib.sha256(identity.encode()).hexdigest()[:32]
    inputs = [experiment.source] if experiment.source else []
    checkpoint = experiment.fit.checkpoint if experiment.fit is not None else None
    if experiment.fit is not None:
        inputs.append(experiment.fit.data)
        if checkpoint:
            check_checkpoint(checkpoint, reads=inputs)
    reads = [*inputs, checkpoint] if checkpoint else inputs
    common = dict(overwrite=experiment.output.overwrite, run=run, reads=reads)
    where = "[output] path" if output is None else "output"
    summary = None
    if nc_path is not None:
        if kind == "sweep":  # replacing a sweep's output is the chunk store's decision
            check_target(nc_path, kind, reads=reads, name=where)
        else:
            check_output(nc_path, kind, name=where, **common)
        if kind == "fit":
            summary = check_output(
                nc_path.with_suffix(".json"), "fit summary", name="fit summary", **common
            )
    if png_path is not None and not _store_refuses(kind, nc_path, common):
        name = "[output] plot" if isinstance(experiment.output.plot, str) else "plot"
        check_output(png_path, "plot", name=name, **common)
    return Outputs(nc_path, png_path, summary, run)


def _store_refuses(kind: str, nc_path: Path | None, common: dict) -> bool:
    """Whether a sweep's chunk store will refuse its existing output (another run's, no
    overwrite) before any work: then it says so, with what differs, rather than the plot."""
    if kind != "sweep" or nc_path is None or common["overwrite"] or not nc_path.exists():
        return False
    return recorded(nc_path)[1] != common["run"]


def _execute_simulation(experiment: Experiment, outputs: Outputs, *, progress: bool | None):
    x64 = experiment.solver.dtype == "float64"
    # Scoped precision: the model's arrays, the times and the compiled solve all take the
    # config's dtype, whatever the process-wide setting is.
    with jax.enable_x64(x64):
        model = experiment.model.build()
        spec, tspec = experiment.solver, experiment.time
        if progress is None:
            progress = reports_model_time(model)
        start = time.perf_counter()
        key = spec.key() if model.is_stochastic() else None  # one path of a noisy model
        sol = simulate(
            model,
            **tspec.kwargs(),
            **spec.kwargs(),
            key=key,
            adjoint=spec.adjoint,
            throw=False,
            progress=progress,
        )
        sol = jax.block_until_ready(sol)
        wall = time.perf_counter() - start
        dataset = sol.to_xarray()
    dataset.attrs.update(
        difsim_output="simulation",
        difsim_run=outputs.run,
        config=experiment.to_toml(),
        dtype=experiment.solver.dtype,
        num_accepted_steps=int(sol.num_accepted_steps),
        num_rejected_steps=int(sol.num_rejected_steps),
        **noise_summary(model),
    )
    nc_path, png_path = outputs.netcdf, outputs.plot
    if nc_path is not None:
        atomic_write(nc_path, lambda p: dataset.to_netcdf(p))
    if png_path is not None:
        figure = plot_dataset(dataset, phase=type(model).phase)
        _save_png(figure, png_path, outputs.run, dpi=120)
    return RunResult(dataset, nc_path, png_path, wall, Status(int(sol.status)))


def _save_png(figure, path: Path, run: str, dpi: int) -> None:
    """Save `figure` as a PNG marked as this run's difsim plot."""
    atomic_write(path, lambda p: figure.savefig(p, dpi=dpi, metadata=png_metadata(run)))


def _execute_sweep(experiment: Experiment, outputs: Outputs, *, progress) -> RunResult:
    nc_path, png_path = outputs.netcdf, outputs.plot
    spec, tspec, sweep = experiment.solver, experiment.time, experiment.sweep
    with jax.enable_x64(spec.dtype == "float64"):
        dataset, report = run_sweep(
            experiment.model.build(),
            sweep.spec,
            **tspec.kwargs(),
            **spec.kwargs(),
            keep=list(sweep.keep) if isinstance(sweep.keep, tuple) else sweep.keep,
            chunk_size=sweep.chunk_size,
            memory_budget=sweep.budget,
            engine=sweep.engine,
            max_events=sweep.max_events,
            **sweep.paths(),
            output=nc_path,
            store=experiment.output.store,
            overwrite=experiment.output.overwrite,
            progress=progress,
            attrs={"config": experiment.to_toml(), RUN_ATTR: outputs.run},
        )
    if dataset is None:
        png_path = None
    if png_path is not None:
        _save_png(plot_dataset(dataset), png_path, outputs.run, dpi=120)
    counts = report.status_counts
    failed = {code: n for code, n in counts.items() if not Status(code).ok}
    status = Status.SUCCESS
    if failed and sum(failed.values()) == sum(counts.values()):
        status = Status(max(failed, key=failed.get))
    return RunResult(dataset, nc_path, png_path, report.wall_time, status, report)


def _execute_fit(experiment: Experiment, outputs: Outputs, *, progress) -> RunResult:
    nc_path, png_path = outputs.netcdf, outputs.plot
    spec = experiment.solver
    with jax.enable_x64(spec.dtype == "float64"):
        model = with_networks(experiment.model.build(), experiment.fit.network)
        try:  # before the fit: a reference that cannot be drawn loses no training
            references = network_references(experiment.fit.network, model)
        except ConfigError as e:
            raise ConfigError(e.problem, e.key, experiment.source) from None
        start = time.perf_counter()
        try:
            result = fit(
                model,
                experiment.fit.data,
                solver=spec.name,
                rtol=spec.rtol,
                atol=spec.atol,
                max_steps=spec.max_steps,
                root_tol=spec.root_tol,
                progress=progress,
                **experiment.fit.kwargs(),
            )
        except (ValueError, TypeError, FileNotFoundError) as e:
            # What the config check cannot see without solving (a start outside its range,
            # a loss that is not finite at the guess, ...): a config problem all the same.
            raise ConfigError(str(e), "fit", experiment.source) from e
        wall = time.perf_counter() - start
        # Still in the fit's precision: the outputs evaluate the fitted model again.
        dataset = label_terms(result.to_xarray(references=references), experiment.fit.network)
        dataset.attrs.update(
            {RUN_ATTR: outputs.run, "config": experiment.to_toml(), "dtype": spec.dtype}
        )
        if nc_path is not None:
            atomic_write(nc_path, lambda p: dataset.to_netcdf(p, engine="h5netcdf"))
            result.save(outputs.summary, overwrite=True, attrs={RUN_ATTR: outputs.run})
        if png_path is not None:
            _save_png(plot_dataset(dataset), png_path, outputs.run, dpi=120)
    # The fit's own Status (CONVERGED, DIVERGED, OPTIMIZER_FAILED, ...): one scheme, so
    # nothing is lost translating it.
    return RunResult(dataset, nc_path, png_path, wall, result.status, fit=result)


def run_config(
    config: "str | os.PathLike | Mapping[str, Any] | Experiment",
    *,
    overrides: Mapping[str, Any] | None = None,
    output: str | os.PathLike | None = None,
    plot: bool = True,
    progress: bool | None = None,
    throw: bool = True,
    overwrite: bool = False,
) -> xr.Dataset:
    """Run an experiment config from Python: what `difsim run` does, minus the printing:
    `ds.run_config("experiments/lorenz.toml", overrides={"model.parameters.rho": 20})`.

    **Arguments:**

    - `config`: a TOML path, a dict with the same content, or an [`Experiment`][].
    - `overrides`: dotted keys to change, as with `--set` (`{"solver.rtol": 1e-8}`).
    - `output`: netCDF path, replacing `[output] path` (no file is written if neither is
      given).
    - `plot`: `False` skips the PNG; `True` follows `[output] plot`.
    - `progress`: `None` (default) as `difsim run`: shown for sweeps, fits and PDE solves (a
      bar on a terminal, log lines elsewhere); `True` also for an ODE solve; `False`: none.
    - `throw`: if the solve fails, raise [`SolveError`][difsim.SolveError] (a `RuntimeError`,
      with the `status`; after writing the partial output);
      with `False` the failure is only recorded in the Dataset's `status`. A sweep
      (`[sweep]`) raises only if every trajectory failed; per-trajectory failures are in
      its `status` variable and `n_<status>` attributes. A fit (`[fit]`) raises if it
      neither converged nor ran all its steps (outputs are written first).
    - `overwrite`: replace earlier difsim outputs of the same kind (as `--overwrite`).

    **Returns:** the `xarray.Dataset` (also written to the output path, if any).

    **Raises:** [`ConfigError`][] for an invalid config, `OutputError` (a `ValueError`) for
    an output path that cannot or may not be written; both before anything is compiled.

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    config = {  # the content of a TOML file, as a dict
        "model": {"name": "exponential_decay", "parameters": {"k": 0.5}},
        "time": {"t0": 0.0, "t1": 2.0, "save": 5},
    }
    out = ds.run_config(config, plot=False)  # no [output] path: nothing is written
    np.testing.assert_allclose(out["y"], np.exp(-0.5 * out["time"]), rtol=1e-5)  # exp(-k t)

    swept = ds.run_config({**config, "sweep": {"k": [0.5, 1.0]}}, progress=False, plot=False)
    np.testing.assert_allclose(swept["y"], np.exp(-2 * swept["k"]), rtol=1e-5)  # y(t1)
    ```
    """
    overrides = dict(overrides or {})
    if overwrite:
        overrides["output.overwrite"] = True
    experiment = load_config(config, overrides=overrides)
    result = execute(experiment, output=output, plot=plot, progress=progress)
    if throw and experiment.fit is not None and not result.fit.ok:
        raise RuntimeError(
            f"fit({experiment.model.cls.__name__}) ended {result.fit.status}: "
            f"{result.fit.message}" + (f"; output in {result.output}" if result.output else "")
        )
    if throw and not result.status.ok:
        where = f"; partial output in {result.output}" if result.output else ""
        what = "every trajectory of sweep" if experiment.sweep is not None else "simulate"
        message = status_message(result.status, experiment, result.dataset.attrs)
        raise SolveError(
            f"{what}({experiment.model.cls.__name__}) failed "
            f"[{result.status.name}]: {message}{where}",
            status=result.status,
        )
    return result.dataset


def status_message(status: Status, experiment: Experiment, attrs: Mapping | None = None) -> str:
    """The message of a run's `status`; for `MAX_STEPS`, the one that fits its solver (no
    'try kvaerno5' to a user of kvaerno5) and, given a single solve's `attrs` (its step
    counts), whether most steps were rejected."""
    if status != Status.MAX_STEPS:
        return status.message
    info = solvers.SOLVERS.get(experiment.solver.name)
    attrs = attrs or {}
    accepted, rejected = attrs.get("num_accepted_steps"), attrs.get("num_rejected_steps")
    mostly = accepted is not None and rejected is not None and rejected > accepted
    return max_steps_message(None if info is None else info.stiff, mostly)


def final_state(dataset: xr.Dataset) -> tuple[float, dict[str, str]]:
    """`(t, {variable: text})`: the last saved state with no NaN (after a failure, the last
    one before it), scalars as numbers and fields summarised."""
    names = [n for n, da in dataset.data_vars.items() if "time" in da.dims]
    finite = np.ones(dataset.sizes["time"], dtype=bool)
    for name in names:
        values = np.asarray(dataset[name].transpose("time", ...))
        finite &= np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
    index = int(np.flatnonzero(finite)[-1]) if finite.any() else -1
    out = {}
    for name in names:
        last = np.asarray(dataset[name].isel(time=index))
        if last.ndim == 0:
            out[name] = f"{float(last):.6g}"
        else:
            out[name] = (
                f"shape {last.shape}, min {np.min(last):.4g}, "
                f"max {np.max(last):.4g}, mean {np.mean(last):.4g}"
            )
    return float(dataset["time"][index]), out
