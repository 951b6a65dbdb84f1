"""`plot`: one entry point that draws any difsim output by its kind.

The kinds are an explicit table (`PLOTS`): a sweep's Dataset, fields on a 2-D/3-D grid, or
time series. Which kind a Dataset is gets decided in `output_kind` alone.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import xarray as xr

from difsim._plot._fan import is_fan, plot_fan
from difsim._plot._field import field_variables, plot_snapshots
from difsim._plot._figure import sweep_kind
from difsim._plot._series import plot_series
from difsim._plot._sweep import plot_sweep


def _ignore_phase(draw: Callable[..., Any]) -> Callable[..., Any]:
    # A phase portrait is a time-series panel: other kinds draw without one.
    def draw_without_phase(dataset, path, phase):
        del phase
        return draw(dataset, path=path)

    return draw_without_phase


# Output kind → `draw(dataset, path, phase)`.
PLOTS: dict[str, Callable[[xr.Dataset, Any, Any], Any]] = {
    "fan": _ignore_phase(plot_fan),
    "sweep": _ignore_phase(plot_sweep),
    "fields": _ignore_phase(plot_snapshots),
    "series": plot_series,
}


def output_kind(dataset: xr.Dataset) -> str:
    """Which entry of `PLOTS` draws `dataset`: `"sweep"` for a sweep's Dataset (it carries
    its layout as an attribute), `"fields"` when it holds a field on a ≥2-D grid, else
    `"series"`; `"fan"` for statistics over Monte Carlo paths."""
    if is_fan(dataset):
        return "fan"
    if sweep_kind(dataset) is not None:
        return "sweep"
    if field_variables(dataset):
        return "fields"
    return "series"


def plot(dataset: xr.Dataset, path: str | Path | None = None, phase: tuple[str, str] | None = None):
    """Plot a difsim output Dataset by its kind.

    - An unbatched simulation's Dataset: every state variable against time. Scalar
      variables get one panel each (sharing the time axis); a variable on a 1-D axis is
      drawn as a space–time image. `phase=("x", "z")` adds a phase portrait.
    - A dataset with fields on a 2-D/3-D grid: snapshot panels instead (see
      [`plot_snapshots`][]).
    - A sweep's Dataset (from [`sweep`][]): by spec kind, lines, heat maps or a scatter
      plot of the kept quantities (see `difsim._plot._sweep.plot_sweep`); for statistics
      over Monte Carlo paths, a fan chart (mean inside quantile bands; `_fan.plot_fan`).

    With `path`, the figure is saved there (PNG at 120 dpi) and closed.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    return PLOTS[output_kind(dataset)](dataset, path, phase)
