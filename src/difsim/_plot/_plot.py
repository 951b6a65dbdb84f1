"""Quick-look plots of simulation outputs (PNG), from the labelled Dataset alone."""

from pathlib import Path

import xarray as xr

from difsim._io import atomic_write
from difsim._status import Status


def _label(da: xr.DataArray) -> str:
    units = da.attrs.get("units")
    return f"{da.name} [{units}]" if units else str(da.name)


def plot(dataset: xr.Dataset, path: str | Path | None = None, phase: tuple[str, str] | None = None):
    """Plot every state variable of an unbatched simulation Dataset against time.

    Scalar variables get one panel each (sharing the time axis); a variable on a 1-D axis is
    drawn as a space–time image. A dataset with fields on a 2-D/3-D grid is drawn as
    snapshot panels instead (see [`plot_snapshots`][]). `phase=("x", "z")` adds a phase
    portrait. With `path`, the figure is saved there (PNG at 120 dpi) and closed.

    A sweep's Dataset (from [`sweep`][]) is drawn by spec kind instead: lines, heat maps
    or a scatter plot of the kept quantities (see `difsim._plot._sweep.plot_sweep`).

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    if "sweep_kind" in dataset.attrs:
        from difsim._plot._sweep import plot_sweep

        return plot_sweep(dataset, path=path)
    from difsim._plot._field import field_variables, plot_snapshots

    if field_variables(dataset):
        return plot_snapshots(dataset, path=path)
    names = [n for n, da in dataset.data_vars.items() if "time" in da.dims]
    if not names:
        raise ValueError("the dataset has no variable over 'time' to plot")
    # A bare Figure, not pyplot: works headless on clusters and in CI without touching the
    # user's backend, and matplotlib is imported only when a plot is asked for.
    from matplotlib.figure import Figure

    npanel = len(names) + (phase is not None)
    fig = Figure(figsize=(8, 2.2 * npanel + 0.6))
    axes = fig.subplots(npanel, 1, squeeze=False)[:, 0]
    time = dataset["time"]
    for ax, name in zip(axes, names):
        da = dataset[name]
        if da.ndim == 1:
            ax.plot(time, da, lw=1.0)
            ax.set_ylabel(_label(da))
        elif da.ndim == 2:
            other = [d for d in da.dims if d != "time"][0]
            da.transpose(other, "time").plot(ax=ax, add_colorbar=True)
            ax.set_title(_label(da), fontsize=9)
        else:
            ax.text(
                0.5,
                0.5,
                f"{name}: {da.ndim - 1}-D field (see snapshots)",
                ha="center",
                va="center",
                transform=ax.transAxes,
            )
        ax.set_xlabel("")
    axes[len(names) - 1].set_xlabel(_label(time) if time.attrs else "time")
    if phase is not None:
        ax = axes[-1]
        ax.plot(dataset[phase[0]], dataset[phase[1]], lw=0.6)
        ax.set_xlabel(_label(dataset[phase[0]]))
        ax.set_ylabel(_label(dataset[phase[1]]))
    title = dataset.attrs.get("model", "")
    status = dataset.get("status")
    if status is not None and status.ndim == 0 and int(status) != 0:
        title += f"  [{Status(int(status)).name}]"
    return finish_figure(fig, title, path)


def finish_figure(fig, title: str, path: str | Path | None):
    """Title and lay out `fig`; save it to `path` (PNG, 120 dpi) and return `None`, or return
    the figure when no path is given."""
    fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120))
        return None
    return fig
