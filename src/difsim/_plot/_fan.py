"""Fan charts of Monte Carlo statistics: the mean over the paths against time, inside bands
between pairs of quantiles (`x_q05`–`x_q95`, `x_q25`–`x_q75`, …), one panel per state
variable and one colour per point of the parameter spec."""

import re
from pathlib import Path

import numpy as np
import xarray as xr

from difsim._io import kept_name, split_kept
from difsim._plot._figure import finish_figure

MAX_LINES = 6  # points of the parameter spec drawn per panel (evenly picked beyond that)
# `x_q05`; files written before 0.1 spelled it `x.q05`
_QUANTILE = re.compile(r"(?P<var>.+)[._]q(?P<digits>\d+)$")


def is_fan(dataset: xr.Dataset) -> bool:
    """Whether `dataset` holds statistics over Monte Carlo paths (a mean or quantiles over
    `time`), as a statistics-keeping sweep writes."""
    return "sweep_statistics" in dataset.attrs and "time" in dataset.dims


def _quantiles(dataset: xr.Dataset, var: str) -> dict[float, str]:
    out = {}
    for name in dataset.data_vars:
        match = _QUANTILE.fullmatch(str(name))
        if match and match["var"] == var:
            out[float("0." + match["digits"])] = str(name)
    if median := _named(dataset, var, "median"):
        out[0.5] = median
    return out


def _named(dataset: xr.Dataset, var: str, stat: str) -> str | None:
    """The name of statistic `stat` of `var` in `dataset` (either spelling), if there."""
    for name in (kept_name(var, stat), f"{var}.{stat}"):
        if name in dataset.data_vars:
            return name
    return None


def _bands(quantiles: dict[float, str]) -> list[tuple[str, str, float]]:
    """Symmetric pairs `(low, high, p)` of quantile variables, widest first."""
    probs = sorted(quantiles)
    pairs = [(p, q) for p in probs for q in probs if p < 0.5 < q and abs(p + q - 1) < 1e-9]
    return [(quantiles[p], quantiles[q], q - p) for p, q in sorted(pairs)]


def _variables(dataset: xr.Dataset) -> list[str]:
    names = []
    for name in dataset.data_vars:
        var, stat = split_kept(str(name))
        if var and (stat == "mean" or _QUANTILE.fullmatch(str(name))) and var not in names:
            names.append(var)
    return names


def _points(da: xr.DataArray) -> list[tuple[str, dict[str, int]]]:
    """`(label, index)` of the points of the spec (dims other than `time`) to draw: all,
    or `MAX_LINES` evenly picked."""
    other = [d for d in da.dims if d != "time"]
    if not other:
        return [("", {})]
    shape = [da.sizes[d] for d in other]
    n = int(np.prod(shape))
    picks = np.unique(np.linspace(0, n - 1, min(n, MAX_LINES)).round().astype(int))
    out = []
    for flat in picks:
        index = dict(zip(other, (int(i) for i in np.unravel_index(int(flat), shape))))
        labels = [f"{d} = {float(da[d][i]):.3g}" for d, i in index.items() if d in da.coords]
        out.append((", ".join(labels), index))
    return out


def plot_fan(dataset: xr.Dataset, path: str | Path | None = None):
    """Fan chart of a statistics sweep's Dataset (see the module docstring): one panel per
    state variable and point of the parameter spec (at most `MAX_LINES` points), the mean
    (or median) inside its quantile bands. With `path`, saved as a PNG and closed.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    from matplotlib.figure import Figure

    variables = _variables(dataset) or [str(next(iter(dataset.data_vars)))]
    centres = {v: _named(dataset, v, "mean") or _named(dataset, v, "median") for v in variables}
    panels = [(v, label, index) for v in variables for label, index in _points(dataset[centres[v]])]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig = Figure(figsize=(3.6 * ncols + 0.6, 2.6 * nrows + 0.8))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    time = dataset["time"]
    for k, (ax, (var, label, index)) in enumerate(zip(axes.flat, panels)):
        bands = _bands(_quantiles(dataset, var))
        color = f"C{variables.index(var)}"
        for low, high, width in bands:
            lo, hi = dataset[low].isel(index), dataset[high].isel(index)
            name = f"{split_kept(low)[1]}–{split_kept(high)[1]}"
            alpha = 0.15 + 0.15 * (1 - width)
            ax.fill_between(time, lo, hi, color=color, lw=0, alpha=alpha, label=name)
        ax.plot(time, dataset[centres[var]].isel(index), color=color, lw=1.5,
                label=split_kept(centres[var])[1])  # fmt: skip
        units = dataset[centres[var]].attrs.get("units")
        ax.set_ylabel(f"{var} [{units}]" if units else var)
        ax.set_title(label, fontsize=9)
        if k == 0:
            ax.legend(fontsize=8, loc="best")
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    time_units = time.attrs.get("units")
    for k, ax in enumerate(axes.flat[: len(panels)]):
        if k + ncols >= len(panels):  # the lowest panel of its column
            ax.set_xlabel(f"time [{time_units}]" if time_units else "time")
            ax.xaxis.set_tick_params(labelbottom=True)
    paths = dataset.attrs.get("samples", "")
    title = f"{dataset.attrs.get('model', '')}: {paths} paths per point".strip(": ")
    return finish_figure(fig, title, path)
