"""Quick-look plots of simulation outputs over time (PNG), from the labelled Dataset alone."""

from pathlib import Path

import xarray as xr

from difsim._plot._figure import finish_figure, label
from difsim._status import Status


def plot_series(
    dataset: xr.Dataset, path: str | Path | None = None, phase: tuple[str, str] | None = None
):
    """Plot every state variable of an unbatched simulation Dataset against time.

    Scalar variables get one panel each (sharing the time axis); a variable on a 1-D axis is
    drawn as a space–time image. `phase=("x", "z")` adds a phase portrait. With `path`, the
    figure is saved there (PNG at 120 dpi). Events of a hybrid model (`event_time`) are
    marked on the scalar panels by dotted vertical lines.

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
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
            ax.set_ylabel(label(da))
        elif da.ndim == 2:
            other = [d for d in da.dims if d != "time"][0]
            da.transpose(other, "time").plot(ax=ax, add_colorbar=True)
            ax.set_title(label(da), fontsize=9)
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
    axes[len(names) - 1].set_xlabel(label(time) if time.attrs else "time")
    if phase is not None:
        ax = axes[-1]
        ax.plot(dataset[phase[0]], dataset[phase[1]], lw=0.6)
        ax.set_xlabel(label(dataset[phase[0]]))
        ax.set_ylabel(label(dataset[phase[1]]))
    _mark_events(dataset, [ax for ax, n in zip(axes, names) if dataset[n].ndim == 1])
    title = dataset.attrs.get("model", "")
    status = dataset.get("status")
    if status is not None and status.ndim == 0 and int(status) != 0:
        title += f"  [{Status(int(status)).name}]"
    return finish_figure(fig, title, path)


MAX_MARKED_EVENTS = 500  # beyond this, lines would only grey out the panel


def _mark_events(dataset: xr.Dataset, axes) -> None:
    """Dotted vertical lines at the event times of an unbatched run, one colour per event
    type, with a legend naming them on the first panel."""
    times = dataset.get("event_time")
    if times is None or times.ndim != 1 or not axes:
        return
    kinds = dataset.get("event_type")
    names = (kinds.attrs.get("flag_meanings", "") if kinds is not None else "").split()
    t = times.values
    which = kinds.values if kinds is not None else [0] * len(t)
    shown = set()
    for i, (ti, k) in enumerate(zip(t, which)):
        if i >= MAX_MARKED_EVENTS or ti != ti:  # NaN: padding
            break
        colour = f"C{1 + int(k) % 9}"
        for j, ax in enumerate(axes):
            label = None
            if j == 0 and k not in shown and 0 <= k < len(names):
                label, _ = f"event: {names[int(k)]}", shown.add(k)
            ax.axvline(ti, color=colour, lw=0.6, ls=":", alpha=0.8, label=label)
    if shown:
        axes[0].legend(loc="best", fontsize=7, frameon=False)
