"""Fan charts of Monte Carlo statistics: the mean over the paths against time, inside bands
between pairs of quantiles (`x.q05`–`x.q95`, `x.q25`–`x.q75`, …), one panel per state
variable and one colour per point of the parameter spec."""

import re
from pathlib import Path

import numpy as np
import xarray as xr

from difsim._plot._figure import finish_figure

MAX_LINES = 6  # points of the parameter spec drawn per panel (evenly picked beyond that)
_QUANTILE = re.compile(r"(?P<var>.+)\.q(?P<digits>\d+)$")


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
    if f"{var}.median" in dataset.data_vars:
        out[0.5] = f"{var}.median"
    return out


def _bands(quantiles: dict[float, str]) -> list[tuple[str, str, float]]:
    """Symmetric pairs `(low, high, p)` of quantile variables, widest first."""
    probs = sorted(quantiles)
    pairs = [(p, q) for p in probs for q in probs if p < 0.5 < q and abs(p + q - 1) < 1e-9]
    return [(quantiles[p], quantiles[q], q - p) for p, q in sorted(pairs)]


def _variables(dataset: xr.Dataset) -> list[str]:
    names = []
    for name in dataset.data_vars:
        var, _, stat = str(name).rpartition(".")
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
    """Fan chart of a statistics sweep's Dataset (see the module docstring). With `path`,
    saved as a PNG and closed.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    from matplotlib.figure import Figure

    variables = _variables(dataset) or [str(next(iter(dataset.data_vars)))]
    fig = Figure(figsize=(7.5, 2.8 * len(variables) + 0.6))
    axes = fig.subplots(len(variables), 1, squeeze=False)[:, 0]
    colors = [f"C{i}" for i in range(10)]
    for ax, var in zip(axes, variables):
        bands = _bands(_quantiles(dataset, var))
        centre = f"{var}.mean" if f"{var}.mean" in dataset else f"{var}.median"
        points = _points(dataset[centre])
        for k, (label, index) in enumerate(points):
            color = colors[k % len(colors)]
            for low, high, width in bands:
                lo, hi = dataset[low].isel(index), dataset[high].isel(index)
                ax.fill_between(dataset["time"], lo, hi, color=color, lw=0,
                                alpha=0.12 + 0.1 * (1 - width))  # fmt: skip
            ax.plot(dataset["time"], dataset[centre].isel(index), color=color, lw=1.5,
                    label=label or None)  # fmt: skip
        units = dataset[centre].attrs.get("units")
        ax.set_ylabel(f"{var} [{units}]" if units else var)
        shown = ", ".join(f"{lo.rpartition('.')[2]}–{hi.rpartition('.')[2]}" for lo, hi, _ in bands)
        ax.set_title(f"{centre}" + (f" with bands {shown}" if shown else ""), fontsize=9)
        if any(label for label, _ in points):
            ax.legend(fontsize=8, loc="best")
    time_units = dataset["time"].attrs.get("units")
    axes[-1].set_xlabel(f"time [{time_units}]" if time_units else "time")
    paths = dataset.attrs.get("samples", "")
    title = f"{dataset.attrs.get('model', '')}: {paths} paths per point".strip(": ")
    return finish_figure(fig, title, path)
