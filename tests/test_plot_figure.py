"""What every figure shares (`difsim._plot._figure`): readable log axes (issue 32.5)."""

import matplotlib
import numpy as np
import pytest
import xarray as xr
from matplotlib.backends.backend_agg import FigureCanvasAgg

from difsim._plot._sweep import plot_sweep

matplotlib.use("Agg")


def _labels(fig) -> dict:
    """`{(panel, axis): [(text, box)]}` of the major tick labels inside each axis's view, as
    the Agg renderer draws them."""
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = {}
    for i, ax in enumerate(fig.axes):
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            out[i, axis.axis_name] = [
                (t.get_text(), t.get_window_extent(renderer))
                for t, v in zip(axis.get_majorticklabels(), axis.get_majorticklocs())
                if low <= v <= high and t.get_text()
            ]
    return out


def _heatmaps(low: float, high: float, panels: int) -> xr.Dataset:
    n = 8
    values = np.random.default_rng(0).random((panels, n, n))
    grid = np.geomspace(low, high, n)  # a log-spaced grid: plotted on log axes
    data = {f"v{i}": (("a", "b"), values[i]) for i in range(panels)}
    dataset = xr.Dataset({"status": (("a", "b"), np.zeros((n, n), int)), **data},
                         coords={"a": grid, "b": grid})  # fmt: skip
    dataset.attrs["sweep_keys"] = "a b"
    return dataset


@pytest.mark.parametrize("low, high", [(1e-5, 1e-3), (1.1e-4, 0.09), (0.1, 50.0), (2e3, 1.9e6)])
def test_log_tick_labels_of_sweep_heat_maps_never_overlap(low, high):
    fig = plot_sweep(_heatmaps(low, high, panels=4))
    labels = _labels(fig)
    for where, ticks in labels.items():
        boxes = [box for _, box in ticks]
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:])), (where, ticks)
    x_ticks = [text for text, _ in labels[0, "x"]]
    assert len(x_ticks) >= 2, x_ticks  # thinned, not emptied


def test_a_wide_panel_keeps_the_1_2_5_labels():
    # One panel over two decades has room for more labels than its powers of ten.
    x_ticks = [text for text, _ in _labels(plot_sweep(_heatmaps(0.5, 60.0, panels=1)))[0, "x"]]
    assert {"0.5", "1", "2", "5", "10", "20", "50"} <= set(x_ticks), x_ticks
