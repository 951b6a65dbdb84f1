"""A statistics-keeping Monte Carlo sweep before and after it runs: its checked settings
([`statistics_setup`][]) and the Dataset of its accumulated statistics
([`statistics_dataset`][]): dims of the parameter spec, then `time`; no path dimension."""

import dataclasses
import json
import logging
import math
from typing import Any

import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim._core import Model, SaveSpec
from difsim._io import environment, environment_attrs, fixed_variables, split_kept, time_attrs
from difsim._sweep._chunking import bytes_per_trajectory
from difsim._sweep._layout import (
    coord_meta,
    count_attrs,
    settings,
    settings_hash,
    spec_coords,
    sweep_attrs,
)
from difsim._sweep._observables import _var_dims as var_dims
from difsim._sweep._options import SolverChoice, SweepOptions, SweepTimes
from difsim._sweep._samples import PathSweep
from difsim._sweep._setup import choose_engine, resolve_solver
from difsim._sweep._statistics import BINS, BLOCK, MOMENTS, PILOT, StatsPlan, plan_statistics

logger = logging.getLogger("difsim")

STATISTICS_ATTR = "sweep_statistics"  # marks a Dataset of statistics over paths (plots)


@dataclasses.dataclass(frozen=True)
class MCSetup:
    """A statistics sweep's checked settings: `times`, `save` (the core's `SaveSpec`),
    `solver`, `dtype`, `plan` (what is kept), `block` (paths per block of partial
    statistics) and `padded` (each point's paths rounded up to whole blocks), `per_traj`
    (estimated bytes of one path in a chunk), `settings` (text of everything that
    determines the result), `attrs` (the Dataset's global attributes), `engine`
    (`"ensemble"` or `"diffrax"`) and `fallback` (why `engine="auto"` did not take the
    ensemble engine, or `None`)."""

    times: SweepTimes
    save: SaveSpec
    solver: SolverChoice
    dtype: np.dtype
    plan: StatsPlan
    block: int
    padded: int
    per_traj: int
    settings: dict[str, str]
    attrs: dict[str, Any]
    engine: str = "diffrax"
    fallback: str | None = None

    @property
    def sweep_hash(self) -> str:
        return self.attrs["sweep_hash"]


def statistics_setup(model: Model, spec: PathSweep, options: SweepOptions) -> MCSetup:
    """Check `model`, `spec` and `options` against each other; nothing is compiled.

    **Raises:** `ValueError` naming the culprit (a key, a time, the solver, `keep`).
    """
    spec.check(model)
    save = SaveSpec(t0=options.t0, t1=options.t1, save=options.save)
    ts = None if save.ts is None else np.asarray(save.ts, np.float64)
    times = SweepTimes(float(save.t0), float(save.t1), save.save, ts, save.n_saved,
                       save.save_text)  # fmt: skip
    solver = resolve_solver(model, options)
    engine, fallback = choose_engine(options.engine, solver.settings, model)
    if fallback:
        logger.info("sweep: the diffrax engine runs this sweep (%s)", fallback)
    state = model.initial_state()
    dtype = np.dtype(jnp.result_type(*[jnp.asarray(v) for v in state.values.values()]))
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(jnp.result_type(float))
    plan = plan_statistics(options.keep, type(model), state)
    block = min(BLOCK, spec.samples)
    padded = -(-spec.samples // block) * block
    method = f"blocks of {block} paths; quantiles: {BINS} bins over a {PILOT}-path pilot range"
    # The engine is part of the result's identity (the two round differently).
    env = environment(options.devices)  # where it runs: part of the identity too
    described = {**settings(model, spec, times, solver, plan, dtype), "engine": engine,
                 "statistics": method, **env}  # fmt: skip
    attrs = sweep_attrs(model, spec, times, solver, plan, dtype, options.attrs)
    attrs.update(environment_attrs(env))
    attrs.update(engine=engine, samples=spec.samples, seed=spec.seed,
                 statistics_method=method)  # fmt: skip
    if fallback:
        attrs["engine_fallback"] = fallback
    attrs[STATISTICS_ATTR] = " ".join(plan.names)
    attrs["sweep_hash"] = settings_hash(described)
    attrs["sweep_settings"] = json.dumps(described, sort_keys=True)
    n_state = sum(max(1, math.prod(np.shape(v))) for v in state.values.values())
    per_traj = bytes_per_trajectory(model, [], times.n_saved, dtype)
    per_traj += 2 * dtype.itemsize * n_state * times.n_saved  # the values reduced per path
    return MCSetup(times, save, solver, dtype, plan, block, padded, per_traj, described, attrs,
                   engine, fallback)  # fmt: skip


def _time_coord(model: Model, times: SweepTimes, dtype) -> np.ndarray:
    if times.ts is not None:
        return times.ts.astype(dtype)
    if times.n_saved == 1:
        return np.asarray([times.t1], dtype)
    start, stop = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
    return np.asarray(jnp.linspace(start, stop, times.n_saved))


def _attrs_of(model: Model, name: str, var: str, kind: str) -> dict[str, str]:
    info = dict(model.initial_state().info)[var]
    what = MOMENTS.get(kind, "")
    if kind == "quantile":
        stat = split_kept(name)[1]
        what = MOMENTS["median"] if stat == "median" else f"0.{stat[1:]} quantile over the paths"
    out = {"long_name": f"{info.description or var}: {what}"}
    if info.units:
        out["units"] = f"({info.units})^2" if kind == "var" else info.units
    return out


def statistics_dataset(model: Model, spec: PathSweep, setup: MCSetup, state) -> xr.Dataset:
    """The Dataset of a finished statistics sweep: one variable per kept statistic, dims
    `(*spec dims, time, *variable dims)`, plus `n_paths` (paths that succeeded, per point)."""
    base_dims, base_shape = spec.base_dims, spec.base_shape
    if spec.base is None:
        coords = {}
    else:
        coords = spec_coords(coord_meta(model, spec.base.keys), spec.base, setup.dtype)
    # The same time coordinate as every other output (units; CF's T axis for time units).
    t_attrs = time_attrs(type(model).time_units)
    coords["time"] = (("time",), _time_coord(model, setup.times, setup.dtype), t_attrs)
    info = dict(model.initial_state().info)
    data_vars = {}
    outside = 0
    n_time = setup.times.n_saved
    for name, var, kind, p in setup.plan.entries:
        # A point whose every path failed has no statistics: NaN.
        empty = np.full((n_time, *np.shape(model.initial_state()[var])), np.nan)
        results = [acc.result(kind, var, p) for acc in state.points]
        rows = np.stack([empty if r is None else r for r in results])
        if kind == "quantile":
            outside += int(np.sum(np.isnan(rows) & np.array([acc.n > 0 for acc in state.points])
                                  .reshape((-1,) + (1,) * (rows.ndim - 1))))  # fmt: skip
        tail_dims, _ = var_dims(model, var, info[var], model.initial_state()[var])
        values = rows.reshape(*base_shape, *rows.shape[1:]).astype(setup.dtype)
        data_vars[name] = (
            (*base_dims, "time", *tail_dims),
            values,
            _attrs_of(model, name, var, kind),
        )
    n = np.array([acc.n for acc in state.points], np.int64).reshape(base_shape)
    data_vars["n_paths"] = (base_dims, n, {"long_name": "paths that succeeded", "units": "1"})
    data_vars.update(fixed_variables(model, tuple(spec.keys)))  # array parameters
    attrs = {**setup.attrs, **count_attrs(state.status_counts())}
    attrs["quantiles_outside_range"] = outside
    return xr.Dataset(data_vars, {k: (d, v, dict(a)) for k, (d, v, a) in coords.items()}, attrs)
