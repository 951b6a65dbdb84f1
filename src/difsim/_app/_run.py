"""Running a checked [`Experiment`][]: simulate, then write netCDF and PNG atomically."""

import dataclasses
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np
import xarray as xr

from difsim._config import ConfigError, Experiment, load_config
from difsim._core import simulate
from difsim._fit import fit
from difsim._io import atomic_write
from difsim._plot import plot as plot_dataset
from difsim._status import Status
from difsim._sweep import run_sweep


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What one run produced.

    **Fields:** `dataset` (the labelled result; `attrs["config"]` holds the complete config
    as TOML), `output` and `plot` (paths written, or `None`), `wall_time` (seconds spent in
    `simulate` or `sweep`, including JIT compilation), `status` (a [`Status`][]; for a
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


def execute(
    experiment: Experiment,
    *,
    output: str | os.PathLike | None = None,
    plot: bool = True,
    progress: bool = False,
) -> RunResult:
    """Run `experiment` and write its outputs; a failed solve is reported in `status`.

    The solve runs with `throw=False`, so a failure still writes the (partial) output:
    values after the failure are NaN and the `status` variable says what went wrong.
    """
    if experiment.sweep is not None:
        return _execute_sweep(experiment, output=output, plot=plot, progress=progress)
    if experiment.fit is not None:
        return _execute_fit(experiment, output=output, plot=plot, progress=progress)
    x64 = experiment.solver.dtype == "float64"
    # Scoped precision: the model's arrays, the times and the compiled solve all take the
    # config's dtype, whatever the process-wide setting is.
    with jax.enable_x64(x64):
        model = experiment.model.build()
        spec, tspec = experiment.solver, experiment.time
        start = time.perf_counter()
        sol = simulate(
            model,
            **tspec.kwargs(),
            **spec.kwargs(),
            adjoint=spec.adjoint,
            throw=False,
            progress=progress,
        )
        sol = jax.block_until_ready(sol)
        wall = time.perf_counter() - start
        dataset = sol.to_xarray()
    dataset.attrs.update(
        config=experiment.to_toml(),
        dtype=experiment.solver.dtype,
        num_accepted_steps=int(sol.num_accepted_steps),
        num_rejected_steps=int(sol.num_rejected_steps),
    )
    nc_path, png_path = experiment.output.paths(output)
    if nc_path is not None:
        atomic_write(nc_path, lambda p: dataset.to_netcdf(p))
    if not plot:
        png_path = None
    if png_path is not None:
        phase = type(model).phase
        atomic_write(png_path, lambda p: plot_dataset(dataset, path=p, phase=phase))
    return RunResult(dataset, nc_path, png_path, wall, Status(int(sol.status)))


def _execute_sweep(
    experiment: Experiment, *, output: str | os.PathLike | None, plot: bool, progress: bool
) -> RunResult:
    nc_path, png_path = experiment.output.paths(output)
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
            output=nc_path,
            overwrite=experiment.output.overwrite,
            progress=progress,
            attrs={"config": experiment.to_toml()},
        )
    if not plot or dataset is None:
        png_path = None
    if png_path is not None:
        atomic_write(png_path, lambda p: plot_dataset(dataset, path=p))
    counts = report.status_counts
    failed = {code: n for code, n in counts.items() if not Status(code).ok}
    status = Status.SUCCESS
    if failed and sum(failed.values()) == sum(counts.values()):
        status = Status(max(failed, key=failed.get))
    return RunResult(dataset, nc_path, png_path, report.wall_time, status, report)


def _execute_fit(
    experiment: Experiment, *, output: str | os.PathLike | None, plot: bool, progress: bool
) -> RunResult:
    nc_path, png_path = experiment.output.paths(output)
    spec = experiment.solver
    with jax.enable_x64(spec.dtype == "float64"):
        model = experiment.model.build()
        start = time.perf_counter()
        try:
            result = fit(
                model,
                experiment.fit.data,
                solver=spec.name,
                rtol=spec.rtol,
                atol=spec.atol,
                max_steps=spec.max_steps,
                progress=progress,
                **experiment.fit.kwargs(),
            )
        except (ValueError, TypeError, FileNotFoundError) as e:
            # What the config check cannot see without solving (a start outside its range,
            # a loss that is not finite at the guess, ...): a config problem all the same.
            raise ConfigError(str(e), "fit") from e
        wall = time.perf_counter() - start
        # Still in the fit's precision: the outputs evaluate the fitted model again.
        dataset = result.to_xarray()
        dataset.attrs.update(config=experiment.to_toml(), dtype=spec.dtype)
        if nc_path is not None:
            atomic_write(nc_path, lambda p: dataset.to_netcdf(p, engine="h5netcdf"))
            result.save(nc_path.with_suffix(".json"))
        if not plot:
            png_path = None
        if png_path is not None:
            atomic_write(png_path, lambda p: result.plot(p))
    # The fit's own Status (CONVERGED, DIVERGED, OPTIMIZER_FAILED, ...): one scheme, so
    # nothing is lost translating it.
    return RunResult(dataset, nc_path, png_path, wall, result.status, fit=result)


def run_config(
    config: "str | os.PathLike | Mapping[str, Any] | Experiment",
    *,
    overrides: Mapping[str, Any] | None = None,
    output: str | os.PathLike | None = None,
    plot: bool = True,
    progress: bool = False,
    throw: bool = True,
) -> xr.Dataset:
    """Run an experiment config from Python: what `difsim run` does, minus the printing.

    ```python
    ds = difsim.run_config("experiments/lorenz.toml", overrides={"model.parameters.rho": 20})
    ```

    **Arguments:**

    - `config`: a TOML path, a dict with the same content, or an [`Experiment`][].
    - `overrides`: dotted keys to change, as with `--set` (`{"solver.rtol": 1e-8}`).
    - `output`: netCDF path, replacing `[output] path` (no file is written if neither is
      given).
    - `plot`: `False` skips the PNG; `True` follows `[output] plot`.
    - `progress`: show a progress bar while solving.
    - `throw`: if the solve fails, raise `RuntimeError` (after writing the partial output);
      with `False` the failure is only recorded in the Dataset's `status`. A sweep
      (`[sweep]`) raises only if every trajectory failed; per-trajectory failures are in
      its `status` variable and `n_<status>` attributes. A fit (`[fit]`) raises if it
      neither converged nor ran all its steps (outputs are written first).

    **Returns:** the `xarray.Dataset` (also written to the output path, if any).

    **Raises:** [`ConfigError`][] for an invalid config, before anything is compiled.
    """
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
        raise RuntimeError(
            f"{what}({experiment.model.cls.__name__}) failed "
            f"[{result.status.name}]: {result.status.message}{where}"
        )
    return result.dataset


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
