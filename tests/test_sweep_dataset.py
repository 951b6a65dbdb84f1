"""A sweep's Dataset from its template (`difsim._sweep._dataset`): the same Dataset the
layout builds, sharing the result arrays and nothing else."""

import numpy as np
import xarray as xr

from difsim._sweep import _dataset
from difsim._sweep._dataset import DatasetTemplate
from difsim._sweep._layout import OutputLayout

# Two keys zipped along `sample` (coordinates that are not indexes) and a saved time axis
# (an index coordinate).
LAYOUT = OutputLayout(
    dims=("sample",),
    shape=(4,),
    coords={
        "a": (("sample",), np.linspace(0.0, 1.0, 4), {"units": "m"}),
        "b": (("sample",), np.arange(4.0), {}),
        "time": (("time",), np.array([0.0, 0.5, 1.0]), {"units": "s"}),
    },
    variables={
        "u": (("time",), (3,), np.dtype(np.float32), {"long_name": "u", "units": "K"}),
        "status": ((), (), np.dtype(np.int32), {"flag_values": [0, 1, 2]}),
    },
    attrs={"model": "M", "n": 3},
)


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "u": rng.normal(size=(4, 3)).astype(np.float32),
        "status": rng.integers(0, 3, size=4).astype(np.int32),
    }


def test_filled_template_is_the_layouts_dataset_and_shares_only_the_results():
    template = DatasetTemplate(LAYOUT)
    first_arrays, second_arrays = _arrays(0), _arrays(1)
    first = template.fill(first_arrays, {"n_success": 2})
    second = template.fill(second_arrays)
    expected = LAYOUT.to_dataset(first_arrays)
    expected.attrs["n_success"] = 2
    xr.testing.assert_identical(first, expected)
    xr.testing.assert_identical(second, LAYOUT.to_dataset(second_arrays))
    assert "n_success" not in second.attrs
    # The results are not copied: filling arrays later shows in the Dataset.
    assert np.shares_memory(first["u"].values, first_arrays["u"])
    first_arrays["status"][0] = 7
    assert first["status"].values[0] == 7
    # Everything else is each Dataset's own: attributes, variable attributes, and the
    # values of coordinates that are not indexes.
    first.attrs["model"] = "changed"
    first["u"].attrs["units"] = "changed"
    first["a"].values[0] = 99.0
    third = template.fill(_arrays(2))
    for other in (second, third):
        assert other.attrs["model"] == "M" and other["u"].attrs["units"] == "K"
        assert other["a"].values[0] == 0.0
    np.testing.assert_array_equal(third["time"].values, [0.0, 0.5, 1.0])


def test_variables_are_assembled_as_xarrays_constructor_builds_them(monkeypatch):
    # On this xarray the slots are as probed: the fast assembly is taken, and builds what
    # the constructor builds, with attributes of its own.
    _dataset._new_variable.cache_clear()
    assert _dataset._new_variable() is _dataset._assembled
    attrs, data = {"units": "K"}, np.arange(3.0)
    var = _dataset._assembled(("d",), data, attrs)
    xr.testing.assert_identical(var, xr.Variable(("d",), data, attrs))
    assert var.values is data and var.encoding == {}
    var.attrs["units"] = "changed"
    assert attrs == {"units": "K"}
    # Where the probe finds another layout, the public constructor is used instead.
    monkeypatch.setattr(_dataset, "_assembled", lambda d, x, a: xr.Variable(d, 2 * x, a))
    _dataset._new_variable.cache_clear()
    try:
        assert _dataset._new_variable() is _dataset._constructed
        first = DatasetTemplate(LAYOUT).fill(_arrays(0))
        xr.testing.assert_identical(first, LAYOUT.to_dataset(_arrays(0)))
    finally:
        _dataset._new_variable.cache_clear()
