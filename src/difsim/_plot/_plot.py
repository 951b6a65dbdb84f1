"""`plot`: one entry point that draws any difsim output by its kind.

The kinds are an explicit table (`PLOTS`): a fit's Dataset, a sweep's Dataset, fields on a
2-D/3-D grid, or time series. Which kind a Dataset is gets decided in `output_kind` alone.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import xarray as xr

from difsim._io import KIND_ATTR
from difsim._plot._fan import is_fan, plot_fan
from difsim._plot._field import field_variables, plot_snapshots
from difsim._plot._figure import sweep_kind
from difsim._plot._fit import plot_fit
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
    "fit": _ignore_phase(plot_fit),
    "fan": _ignore_phase(plot_fan),
    "sweep": _ignore_phase(plot_sweep),
    "fields": _ignore_phase(plot_snapshots),
    "series": plot_series,
}


def output_kind(dataset: xr.Dataset) -> str:
    """Which entry of `PLOTS` draws `dataset`: `"fit"` for a fit's Dataset and `"sweep"` for
    a sweep's (each says so in its attributes), `"fan"` for statistics over Monte Carlo
    paths, `"fields"` when it holds a field on a ≥2-D grid, else `"series"`."""
    if dataset.attrs.get(KIND_ATTR) == "fit":
        return "fit"
    if is_fan(dataset):
        return "fan"
    if sweep_kind(dataset) is not None:
        return "sweep"
    if field_variables(dataset):
        return "fields"
    return "series"


def plot(output: Any, path: str | Path | None = None, phase: tuple[str, str] | None = None):
    """Plot a difsim output by its kind, by the conventions its model declares.

    `output` is a Dataset (from `to_xarray()`, or a netCDF file opened with xarray), or
    anything with a `to_xarray()` method: a [`Solution`][], a [`FitResult`][].

    - An unbatched simulation: every state variable against time. Scalar variables get
      one panel each (sharing the time axis); a variable on a 1-D axis is drawn as a
      space–time image. The model's phase portrait (its `phase`, or `phase=("x", "z")`),
      a log time axis (`plot_time_scale = "log"`), wrapped angles (`ds.Var(angle=True)`),
      equal aspect for orbits (`phase_aspect = "equal"`) and the relative drift of its
      `invariants` follow its declarations (see `docs/models.md`).
    - Fields on a 2-D/3-D grid: snapshot panels (see [`plot_snapshots`][]).
    - A sweep (from [`sweep`][]): by spec kind, lines, heat maps or a scatter plot of the
      kept quantities (see `difsim._plot._sweep.plot_sweep`); for statistics
      over Monte Carlo paths, a fan chart (mean inside quantile bands; `_fan.plot_fan`).
    - A fit (from [`fit`][]): data, fitted curve and 95 % prediction band, residuals,
      estimates ± standard errors, loss history.

    With `path`, the figure is saved there (PNG at 120 dpi) and closed.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    sol = ds.simulate(ds.models.ExponentialDecay(k=0.5), t0=0.0, t1=2.0, save=21)
    fig = ds.plot(sol)  # a matplotlib Figure; ds.plot(sol, "decay.png") saves it instead
    (line,) = fig.axes[0].lines
    np.testing.assert_allclose(line.get_ydata(), np.exp(-0.5 * line.get_xdata()), rtol=1e-5)
    ```
    """
    if not isinstance(output, xr.Dataset):
        to_xarray = getattr(output, "to_xarray", None)
        if to_xarray is None:
            raise TypeError(
                "plot: expected an xarray.Dataset or a difsim result with to_xarray() (a "
                f"Solution, a FitResult), got {type(output).__name__}"
            )
        output = to_xarray()
    return PLOTS[output_kind(output)](output, path, phase)
