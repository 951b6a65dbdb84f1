"""What a config's run will need, estimated when the config is checked (nothing is built):
counts from `[time] save`, the `[model.grid]` and `[sweep]`, times sizes, against the
machine's memory and disk (`difsim._resources`).

These are lower bounds from the model class's declared state: `difsim check` refuses what
certainly cannot fit, naming the key, and the run checks again with the built model's exact
sizes (`simulate`, `ds.sweep`).
"""

import math
from typing import Any

import numpy as np

from difsim._config._experiment import ModelSpec, OutputSpec, SweepSpec, TimeSpec, field_defaults
from difsim._config._schema import ConfigError
from difsim._core import declared_events
from difsim._pde import Grid, grid_from_table
from difsim._resources import ResourceError, check_disk, check_memory
from difsim._sweep import RandomSweep

_BOOKKEEPING = 12  # bytes of a sweep trajectory's status and num_steps


def check_linspace_count(n: int, where: str) -> None:
    """An entry `{ linspace = [a, b, n] }` allocates `n` float64 values when it is parsed."""
    _as_config_error(
        lambda: check_memory(8 * n, f"{n:,} values", where, "give fewer values"), where
    )


def check_experiment_resources(parsed: dict[str, Any]) -> None:
    """Refuse a config whose saved values or sweep results certainly cannot fit.

    **Raises:** [`ConfigError`][] naming `time.save`, `sweep`, `sweep.samples` or
    `output.path`, with the estimate and the limit.
    """
    model, time, solver = parsed["model"], parsed.get("time"), parsed["solver"]
    if time is None:  # a fit: its times (and sizes) come from the data
        return
    item = np.dtype(solver.dtype).itemsize
    n_values = state_size(model)
    n = time.n_saved
    _as_config_error(
        lambda: check_memory(
            n * (n_values + 1) * item,
            f"saving {n:,} times of at least {n_values:,} value(s) per trajectory",
            "time.save",
            'save fewer times (a smaller number, "final", or a list of times)',
        ),
        "time.save",
    )
    output = parsed["output"]
    if parsed.get("sweep") is not None:
        events = event_bytes(model.cls, n_values, item, parsed["sweep"].max_events)
        _check_sweep(parsed["sweep"], output, time, n_values, item, events)
    elif output.path is not None:
        _as_config_error(
            lambda: check_disk(
                n * (n_values + 1) * item,
                output.path,
                f"the netCDF file of {n:,} saved times",
                "output.path",
                "save fewer times, or write the output elsewhere",
            ),
            "time.save",
        )


def state_size(model: ModelSpec) -> int:
    """How many numbers the model's state holds at least: the declared defaults (or the
    config's values), a variable declared `ds.Var(None)` counting as one field on the grid."""
    defaults = field_defaults(model.cls)
    state, grid = defaults.get("state"), defaults.get("grid")
    if model.grid and isinstance(grid, Grid):
        grid = grid_from_table(grid, model.grid)
    size = 0
    for name, value in getattr(state, "items", lambda: [])():
        value = model.state.get(name, value)
        if value is None:
            size += grid.size if isinstance(grid, Grid) else 1
        else:
            size += max(1, math.prod(np.shape(value)))
    return max(size, 1)


def event_bytes(cls: type, n_values: int, item: int, max_events: int | None = None) -> int:
    """Bytes of one trajectory's event record in a sweep of a model of class `cls` with
    events (docs/events.md; 0 without): room for `max_events` (default: the class's cap)
    times, types (int32) and states before and after, the count (int32) and `t_end`."""
    names, cap = declared_events(cls)
    cap = cap if max_events is None else max_events
    return cap * (item + 4 + 2 * n_values * item) + 4 + item if names else 0


def _check_sweep(
    sweep: SweepSpec, output: OutputSpec, time: TimeSpec, n_values: int, item: int, events: int
) -> None:
    spec = sweep.spec
    n = 1 if spec is None else spec.size  # a Monte Carlo sweep may have no swept key
    if sweep.samples and sweep.keep in ("final", "trajectory"):
        n *= sweep.samples  # kept per path
    if isinstance(spec, RandomSweep):
        _as_config_error(
            lambda: check_memory(
                n * len(spec.keys) * (8 + item),
                f"drawing {n:,} points of {len(spec.keys)} key(s)",
                "sweep.samples",
                "draw fewer samples",
            ),
            "sweep.samples",
        )
    keep = sweep.keep
    if keep == "final":
        kept = n_values
    elif keep == "trajectory":
        kept = n_values * time.n_saved
    elif sweep.samples:  # statistics over the paths: one value per saved time each
        kept, events = len(keep) * time.n_saved, 0  # and no event record
    else:  # observables: at least one value each
        kept = len(keep)
    per_point = kept * item + events + _BOOKKEEPING
    what = f"the results of {n:,} trajectories (at least {per_point:,} bytes each)"
    if output.path is None:
        _as_config_error(
            lambda: check_memory(
                n * per_point,
                what + ", held in memory without [output] path",
                "sweep",
                "sweep fewer points, keep less, or give [output] path to write them to disk",
            ),
            "sweep",
        )
        return
    _as_config_error(
        lambda: check_disk(
            2 * n * per_point,
            output.path,
            what + " in the chunk store and the netCDF file",
            "output.path",
            "sweep fewer points, keep less, or write the output elsewhere",
        ),
        "sweep",
    )


def _as_config_error(check, key: str) -> None:
    try:
        check()
    except ResourceError as e:
        raise ConfigError(str(e).removeprefix(f"{e.key}: "), key) from None
