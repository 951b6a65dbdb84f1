"""Time series of one simulation (PNG), drawn by the conventions the model declares in its
output: the time axis's scale, wrapped angles, a phase portrait (equal aspect for orbits)
and the relative drift of conserved quantities."""

from pathlib import Path

import numpy as np
import xarray as xr

from difsim._io import PLOT_PHASE, PLOT_PHASE_ASPECT, PLOT_TIME_SCALE, ROLE, WRAP_PERIOD
from difsim._plot._figure import finish_figure, label, set_log_scale
from difsim._status import Status


def wrapped(da: xr.DataArray) -> np.ndarray:
    """The values of `da`, an angle (attribute `wrap_period`) wrapped into one turn around
    zero, with NaN where the wrapped curve jumps (so lines do not cross the plot); other
    variables unchanged."""
    values = np.asarray(da, dtype=float)
    period = da.attrs.get(WRAP_PERIOD)
    if period is None:
        return values
    out = (values + period / 2) % period - period / 2
    jumps = np.abs(np.diff(out, axis=-1)) > period / 2
    out = out.copy()
    out[..., 1:][jumps] = np.nan
    return out


def angle_ticks(ax, axis: str, period: float) -> None:
    """Ticks of a wrapped angle at each quarter turn (−π … π for radians), axis limits
    one turn wide."""
    half = period / 2
    ticks = np.linspace(-half, half, 5)
    if np.isclose(period, 2 * np.pi):
        labels = ["−π", "−π/2", "0", "π/2", "π"]
    else:
        labels = [f"{t:g}" for t in ticks]
    getattr(ax, f"set_{axis}ticks")(ticks, labels)
    getattr(ax, f"set_{axis}lim")(-half * 1.04, half * 1.04)


def phase_of(dataset: xr.Dataset, phase: tuple[str, str] | None) -> tuple[str, str] | None:
    """The phase portrait to draw: `phase`, else the model's declared one (`plot_phase`)."""
    if phase is not None:
        return tuple(phase)
    declared = str(dataset.attrs.get(PLOT_PHASE, "")).split()
    return (declared[0], declared[1]) if len(declared) == 2 else None


def plot_series(
    dataset: xr.Dataset, path: str | Path | None = None, phase: tuple[str, str] | None = None
):
    """Plot every state variable of an unbatched simulation Dataset against time.

    Scalar variables get one panel each (sharing the time axis); a variable on a 1-D axis is
    drawn as a space–time image. The model's declarations, stored in the Dataset, decide
    the rest: a log time axis (`plot_time_scale`), angles wrapped into one turn
    (`wrap_period`), a phase portrait (`phase=("x", "z")`, default the model's `phase`;
    equal aspect where declared), and a panel of the relative drift of each invariant.
    Events of a hybrid model (`event_time`) are marked on the scalar panels by dotted
    vertical lines. With `path`, the figure is saved there (PNG at 120 dpi).

    **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
    """
    invariants = [n for n, da in dataset.data_vars.items() if da.attrs.get(ROLE) == "invariant"]
    names = [n for n, da in dataset.data_vars.items() if "time" in da.dims and n not in invariants]
    if not names:
        raise ValueError("the dataset has no variable over 'time' to plot")
    phase = phase_of(dataset, phase)
    for name in phase or ():
        if name not in dataset.data_vars:
            raise ValueError(f"phase: no variable {name!r}; variables are {names}")
    # A bare Figure, not pyplot: works headless on clusters and in CI without touching the
    # user's backend, and matplotlib is imported only when a plot is asked for.
    from matplotlib.figure import Figure

    side = phase is not None or bool(invariants)
    height = max(2.0 * len(names) + 0.8, 6.5 if side else 0)
    fig = Figure(figsize=(11.0 if side else 7.5, height), layout="constrained")
    grid = fig.add_gridspec(len(names), 2 if side else 1, width_ratios=[1.25, 1] if side else None)
    axes = [fig.add_subplot(grid[i, 0]) for i in range(len(names))]
    for ax in axes[1:]:
        ax.sharex(axes[0])
    _draw_series(dataset, names, axes)
    _mark_events(dataset, [ax for ax, n in zip(axes, names) if dataset[n].ndim == 1])
    if side:
        right = grid[:, 1].subgridspec(int(phase is not None) + int(bool(invariants)), 1)
        row = 0
        if phase is not None:
            _draw_phase(dataset, phase, fig.add_subplot(right[row, 0]))
            row += 1
        if invariants:
            _draw_drift(dataset, invariants, fig.add_subplot(right[row, 0]))
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
    log = dataset.attrs.get(PLOT_TIME_SCALE) == "log"
    which = kinds.values if kinds is not None else [0] * len(t)
    shown = set()
    for i, (ti, k) in enumerate(zip(t, which)):
        if i >= MAX_MARKED_EVENTS or ti != ti:  # NaN: padding
            break
        if log and ti <= 0:  # not on a log time axis
            continue
        colour = f"C{1 + int(k) % 9}"
        for j, ax in enumerate(axes):
            legend = None
            if j == 0 and k not in shown and 0 <= k < len(names):
                legend, _ = f"event: {names[int(k)]}", shown.add(k)
            ax.axvline(ti, color=colour, lw=0.6, ls=":", alpha=0.8, label=legend)
    if shown:
        axes[0].legend(loc="best", fontsize=7, frameon=False)


def _time_axis(dataset: xr.Dataset) -> tuple[np.ndarray, np.ndarray, bool]:
    """`(times, mask, log)`: the time values, which of them to draw, and whether on a log
    axis (where t ≤ 0 cannot be drawn)."""
    time = np.asarray(dataset["time"], dtype=float)
    log = dataset.attrs.get(PLOT_TIME_SCALE) == "log"
    return time, (time > 0) if log else np.ones(time.shape, bool), log


def _draw_series(dataset: xr.Dataset, names: list[str], axes) -> None:
    time, keep, log = _time_axis(dataset)
    for ax, name in zip(axes, names):
        da = dataset[name]
        if da.ndim == 1:
            ax.plot(time[keep], wrapped(da)[keep], lw=1.0)
            ax.set_ylabel(label(da))
            if WRAP_PERIOD in da.attrs:
                angle_ticks(ax, "y", da.attrs[WRAP_PERIOD])
        elif da.ndim == 2:
            other = [d for d in da.dims if d != "time"][0]
            da.isel(time=keep).transpose(other, "time").plot(ax=ax, add_colorbar=True)
            ax.set_ylabel(label(dataset[other]))
            ax.set_title(label(da), fontsize=9)
        else:
            ax.text(0.5, 0.5, f"{name}: {da.ndim - 1}-D field (see snapshots)",
                    ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_xlabel("")
        if log:
            set_log_scale(ax, "x")
        if ax is not axes[-1]:
            ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel(label(dataset["time"]))


def _draw_phase(dataset: xr.Dataset, phase: tuple[str, str], ax) -> None:
    x, y = dataset[phase[0]], dataset[phase[1]]
    ax.plot(wrapped(x), wrapped(y), lw=0.6)
    ax.plot([wrapped(x)[0]], [wrapped(y)[0]], "o", ms=4, color="C3", label="start")
    ax.set_xlabel(label(x))
    ax.set_ylabel(label(y))
    for axis, da in (("x", x), ("y", y)):
        if WRAP_PERIOD in da.attrs:
            angle_ticks(ax, axis, da.attrs[WRAP_PERIOD])
    ax.legend(fontsize=8, loc="best")
    if dataset.attrs.get(PLOT_PHASE_ASPECT) == "equal":
        ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("phase portrait", fontsize=9)


def _draw_drift(dataset: xr.Dataset, names: list[str], ax) -> None:
    """max over [t0, t] of |I(s) - I(0)| / |I(0)| for each invariant, on a log axis: the
    envelope of the drift, readable where the drift itself oscillates at round-off."""
    time, keep, log = _time_axis(dataset)
    for name in names:
        values = np.asarray(dataset[name], dtype=float)
        drift = np.abs(values - values[0]) / max(abs(values[0]), np.finfo(float).tiny)
        drift = np.fmax.accumulate(np.nan_to_num(drift, nan=np.inf))
        shown = keep & (drift > 0)
        long_name = dataset[name].attrs.get("long_name", name)
        ax.semilogy(time[shown], drift[shown], lw=0.8, label=long_name)
    ax.set_xlabel(label(dataset["time"]))
    ax.set_ylabel("relative drift [1]")
    ax.set_title("invariants: max relative drift |I − I(t₀)| / |I(t₀)| up to t", fontsize=9)
    ax.legend(fontsize=8, loc="best")
    if log:
        set_log_scale(ax, "x")
