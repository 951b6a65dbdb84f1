"""What every plot shares: axis labels, the one place a Dataset's kind is read, and the
finishing of a figure (title, layout, atomic PNG write)."""

from pathlib import Path

import xarray as xr

from difsim._io import atomic_write

# The attribute `difsim._sweep` writes on a sweep's Dataset: its layout ("grid", "zip",
# "random"). Read only through `sweep_kind`, so the name lives here alone.
_SWEEP_KIND = "sweep_kind"


def sweep_kind(dataset: xr.Dataset) -> str | None:
    """The layout of a sweep's Dataset (`"grid"`, `"zip"`, `"random"`), or `None` when
    `dataset` is not a sweep's."""
    kind = dataset.attrs.get(_SWEEP_KIND)
    return None if kind is None else str(kind)


def label(da: xr.DataArray) -> str:
    """`"name [units]"` (`"1"`: dimensionless), or the bare name when `da` has no `units`
    attribute."""
    units = da.attrs.get("units")
    return f"{da.name} [{units}]" if units else str(da.name)


def set_log_scale(ax, axis: str) -> None:
    """A log scale on `axis` ("x" or "y") of `ax`: within three decades plain numbers at
    1, 2, 5 × 10^k (the default 10^k labels would be few and crowded), else powers of ten."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    getattr(ax, f"set_{axis}scale")("log")
    low, high = sorted(getattr(ax, f"get_{axis}lim")())
    if low > 0 and high / low < 1e3:
        target = getattr(ax, f"{axis}axis")
        target.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        target.set_minor_formatter(NullFormatter())


def _crowded(axis) -> bool:
    """Whether two neighbouring major tick labels of `axis` (inside its view) overlap."""
    low, high = sorted(axis.get_view_interval())
    labels = [t for t, v in zip(axis.get_majorticklabels(), axis.get_majorticklocs())
              if low <= v <= high and t.get_text()]  # fmt: skip
    boxes = [t.get_window_extent() for t in labels]
    return any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def _thin_crowded_log_ticks(fig) -> None:
    """Where the 1, 2, 5 × 10^k labels of [`set_log_scale`][] overlap (long labels such as
    `0.0002` on a narrow panel), label powers of ten only, as matplotlib does by default
    (its locator also thins them to the axis's length)."""
    from matplotlib.ticker import LogFormatterSciNotation, LogLocator

    fig.draw_without_rendering()  # places the labels where the saved figure has them
    for ax in fig.axes:
        for name in ("x", "y"):
            axis = getattr(ax, f"{name}axis")
            if getattr(ax, f"get_{name}scale")() == "log" and _crowded(axis):
                axis.set_major_locator(LogLocator())
                axis.set_major_formatter(LogFormatterSciNotation())


def finish_figure(fig, title: str, path: str | Path | None):
    """Title and lay out `fig`; save it to `path` (PNG, 120 dpi) and return `None`, or return
    the figure when no path is given."""
    fig.suptitle(title)
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    _thin_crowded_log_ticks(fig)
    if path is not None:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120))
        return None
    return fig
