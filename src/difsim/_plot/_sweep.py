"""Quick-look plots of sweep outputs (PNG): lines, heat maps or scatter plots by spec kind.

The layout is chosen once (`_layout`) and drawn by the matching entry of `_DRAW`, one panel
per kept quantity.
"""

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from difsim._plot._figure import finish_figure, label, set_log_scale, sweep_kind
from difsim._status import Status

MAX_PANELS = 6
_OK = [int(s) for s in Status if s.ok]


def _label(da: xr.DataArray) -> str:
    return label(da)


def _quantities(dataset: xr.Dataset, dims: tuple[str, ...]) -> list[xr.DataArray]:
    """Scalars per trajectory to plot: kept variables over exactly the sweep dims, and the
    final time of kept series. A state kept at the end (`save = "final"`) or the last
    point of a series is named by its time: `x at t = 1`. The event record (a model with
    events) is left out: counts, types and `t_end` are bookkeeping, the rest has an
    `event` axis."""
    final = str(dataset.attrs.get("keep", "")) == "final"
    t1 = dataset.attrs.get("t1")
    units = str(dataset.attrs.get("time_units", "1"))
    after = "" if units == "1" else f" {units}"
    out = []
    for name, da in dataset.data_vars.items():
        if name in ("status", "num_steps", "t_end") or not np.issubdtype(da.dtype, np.floating):
            continue
        if da.dims == dims:
            if final and t1 is not None:
                da = da.copy()
                da.name = f"{name} at t = {float(t1):g}{after}"
            out.append(da)
        elif da.dims == (*dims, "time"):
            last = da.isel(time=-1)
            last.name = f"{name} at t = {float(dataset['time'][-1]):g}{after}"
            out.append(last)
    return out[:MAX_PANELS]


def _log_axis(coord: xr.DataArray) -> bool:
    if str(coord.attrs.get("distribution", "")).startswith("loguniform"):
        return True
    values = np.asarray(coord, dtype=float)
    if values.size < 3 or np.any(values <= 0) or values.max() / values.min() < 100:
        return False
    steps = np.diff(np.log(np.sort(values)))
    return bool(np.allclose(steps, steps[0], rtol=1e-3))


def _set_scale(ax, axis: str, coord: xr.DataArray) -> None:
    if _log_axis(coord):
        set_log_scale(ax, axis)


def _colours(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    if finite.size and finite.min() < 0 < finite.max():
        # A quantity of both signs (a mean velocity, a drift): centre a diverging map on 0.
        bound = float(np.abs(finite).max())
        return dict(cmap="RdBu_r", vmin=-bound, vmax=bound)
    return dict(cmap="viridis")


@dataclasses.dataclass(frozen=True)
class _Panel:
    # What every panel of one sweep figure shares.
    fig: Any
    dataset: xr.Dataset
    dims: tuple[str, ...]
    keys: list[str]
    failed: np.ndarray


def _draw_lines(panel: _Panel, ax, da: xr.DataArray, *, connect: bool) -> None:
    from matplotlib.transforms import blended_transform_factory

    values = np.asarray(da, dtype=float)
    failed = panel.failed
    x = panel.dataset[panel.keys[0]]
    order = np.argsort(np.asarray(x))
    style = dict(lw=1.0) if connect else dict(ls="none", marker=".", ms=3)
    ax.plot(np.asarray(x)[order], values[order], **style)
    if failed.any():
        mark = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot(np.asarray(x)[failed], np.full(failed.sum(), 0.03), "rx", ms=4,
                transform=mark, label=f"failed ({failed.sum()})")  # fmt: skip
        ax.legend(loc="best", fontsize=8)
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(da))
    _set_scale(ax, "x", x)


def _draw_heatmap(panel: _Panel, ax, da: xr.DataArray) -> None:
    values = np.asarray(da, dtype=float)
    x, y = panel.dataset[panel.dims[1]], panel.dataset[panel.dims[0]]
    mesh = ax.pcolormesh(np.asarray(x), np.asarray(y), values, shading="nearest",
                         **_colours(values))  # fmt: skip
    panel.fig.colorbar(mesh, ax=ax, label=_label(da))
    _label_axes(ax, x, y)
    if panel.failed.any():
        ax.set_title(f"{panel.failed.sum()} failed (blank)", fontsize=8)


def _draw_scatter(panel: _Panel, ax, da: xr.DataArray) -> None:
    values = np.asarray(da, dtype=float)
    failed = panel.failed
    x, y = panel.dataset[panel.keys[0]], panel.dataset[panel.keys[1]]
    ok = ~failed
    points = ax.scatter(np.asarray(x)[ok], np.asarray(y)[ok], c=values[ok], s=6,
                        **_colours(values[ok]))  # fmt: skip
    panel.fig.colorbar(points, ax=ax, label=_label(da))
    if failed.any():
        ax.plot(np.asarray(x)[failed], np.asarray(y)[failed], "rx", ms=4,
                label=f"failed ({failed.sum()})")  # fmt: skip
        ax.legend(loc="best", fontsize=8)
    _label_axes(ax, x, y)


def _label_axes(ax, x: xr.DataArray, y: xr.DataArray) -> None:
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y))
    _set_scale(ax, "x", x)
    _set_scale(ax, "y", y)


# Layout → how one panel is drawn.
_DRAW: dict[str, Callable[[_Panel, Any, xr.DataArray], None]] = {
    "lines": lambda panel, ax, da: _draw_lines(panel, ax, da, connect=True),
    "points": lambda panel, ax, da: _draw_lines(panel, ax, da, connect=False),
    "heatmap": _draw_heatmap,
    "scatter": _draw_scatter,
}


def _layout(kind: str, dims: tuple[str, ...], keys: list[str]) -> str:
    """Lines for a 1-D grid, a heat map for a ≥2-D grid, points against the key for a zip
    or random sweep of one key, a scatter of the first two keys otherwise."""
    if kind == "grid":
        return "lines" if len(dims) == 1 else "heatmap"
    return "points" if len(keys) == 1 else "scatter"


def plot_sweep(dataset: xr.Dataset, path: str | Path | None = None):
    """Plot a sweep Dataset (from [`sweep`][]): a 1-D grid as lines of each kept scalar
    against the swept value, a 2-D grid as heat maps (further grid dims at their first
    value), a zip or random sweep as a scatter of its first two keys coloured by each kept
    scalar (or against its key, with one key). Failed trajectories are marked with red `x`
    (lines, scatter) or left blank (heat maps). With `path`, saved as PNG and closed.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    from matplotlib.figure import Figure

    status = dataset["status"]
    dims = tuple(status.dims)
    kind = sweep_kind(dataset) or "grid"
    keys = str(dataset.attrs.get("sweep_keys", " ".join(dims))).split()
    selection = {}
    if kind == "grid" and len(dims) > 2:
        selection = {d: 0 for d in dims[2:]}
        dataset, dims = dataset.isel(selection), dims[:2]
        status = dataset["status"]
    quantities = _quantities(dataset, dims)
    if not quantities:
        raise ValueError("the sweep kept no scalar per trajectory to plot")
    failed = ~np.isin(np.asarray(status), _OK)
    ncol = min(3, len(quantities))
    nrow = -(-len(quantities) // ncol)
    fig = Figure(figsize=(max(7.0, 4.8 * ncol), 3.8 * nrow + 0.8))
    axes = fig.subplots(nrow, ncol, squeeze=False).ravel()
    for ax in axes[len(quantities) :]:
        ax.set_visible(False)
    panel = _Panel(fig, dataset, dims, keys, failed)
    draw = _DRAW[_layout(kind, dims, keys)]
    for ax, da in zip(axes, quantities):
        draw(panel, ax, da)

    title = f"{dataset.attrs.get('model', '')}: {kind} sweep of {', '.join(keys)}"
    title += f" ({int(status.size)} trajectories"
    title += f", {int(failed.sum())} failed)" if failed.any() else ")"
    if str(dataset.attrs.get("keep", "")) == "final" and "t1" in dataset.attrs:
        units = str(dataset.attrs.get("time_units", "1"))
        title += f"; state at t = {float(dataset.attrs['t1']):g}"
        title += "" if units == "1" else f" {units}"
    if selection:
        title += "  at " + ", ".join(f"{d} = {float(dataset[d]):g}" for d in selection)
    return finish_figure(fig, title, path)
