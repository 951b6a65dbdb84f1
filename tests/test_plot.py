"""`plot`'s dispatch: which output kind a Dataset is, and that each kind is drawn by its entry."""

import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._plot._plot import PLOTS, output_kind
from difsim._plot._sweep import _layout


def _series() -> xr.Dataset:
    t = np.linspace(0.0, 1.0, 5)
    return xr.Dataset(
        {"x": ("time", np.cos(t)), "y": ("time", np.sin(t))},
        coords={"time": t},
        attrs={"model": "Circle"},
    )


def _fields() -> xr.Dataset:
    t, x, y = np.linspace(0.0, 1.0, 3), np.arange(4.0), np.arange(5.0)
    u = np.add.outer(t, np.add.outer(x, y))
    return xr.Dataset({"u": (("time", "x", "y"), u)}, coords={"time": t, "x": x, "y": y})


def _sweep(kind: str) -> xr.Dataset:
    rho = np.array([1.0, 2.0, 3.0])
    data = xr.Dataset(
        {"status": ("rho", np.zeros(3, np.int32)), "final": ("rho", rho**2)},
        coords={"rho": rho},
        attrs={"sweep_kind": kind, "sweep_keys": "rho", "model": "M"},
    )
    return data


def test_output_kind_names_one_entry_per_kind():
    assert set(PLOTS) == {"fit", "fan", "sweep", "fields", "series"}
    assert output_kind(_series().assign_attrs(difsim_output="fit")) == "fit"
    assert output_kind(_series()) == "series"
    assert output_kind(_fields()) == "fields"
    for kind in ("grid", "zip", "random"):
        assert output_kind(_sweep(kind)) == "sweep"
    # The attribute decides, not the contents: a sweep holding fields is still a sweep.
    assert output_kind(_fields().assign_attrs(sweep_kind="grid")) == "sweep"


def test_each_kind_is_drawn_by_its_entry():
    series = ds.plot(_series(), phase=("x", "y"))
    assert len(series.axes) == 3  # one panel per variable, plus the phase portrait
    assert series.axes[-1].get_xlabel() == "x" and series.axes[-1].get_ylabel() == "y"
    fields = ds.plot(_fields(), phase=("x", "y"))  # a phase portrait is for series only
    panels = [ax for ax in fields.axes if ax.get_title()]  # colour bars have no title
    assert len(panels) == 3 and all(ax.images for ax in panels)  # a snapshot per saved time
    sweep = ds.plot(_sweep("grid"))
    (line,) = sweep.axes[0].lines
    np.testing.assert_array_equal(line.get_ydata(), [1.0, 4.0, 9.0])
    assert sweep._suptitle.get_text() == "M: grid sweep of rho (3 trajectories)"


@pytest.mark.parametrize(
    "kind, dims, keys, layout",
    [
        ("grid", ("a",), ["a"], "lines"),
        ("grid", ("a", "b"), ["a", "b"], "heatmap"),
        ("zip", ("sample",), ["a"], "points"),
        ("random", ("sample",), ["a", "b"], "scatter"),
    ],
)
def test_sweep_layout_by_kind_and_keys(kind, dims, keys, layout):
    assert _layout(kind, dims, keys) == layout
