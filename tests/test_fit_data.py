"""Fit data: reading (xarray, netCDF, CSV), masks and weights, and errors naming the culprit.

Every error here is raised before anything is compiled, so this module is fast.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._fit._data import fit_data, observation_map, observe_states, read_data, residuals
from difsim._fit._fit import fit
from difsim._fit._transforms import Bounded, Positive

ROOT = Path(__file__).resolve().parents[1]
LV = ds.models.LotkaVolterra()
FREE = {"alpha": Positive()}


def _lv_data(n=5, **extra):
    t = np.arange(n, dtype=float)
    return xr.Dataset(
        {"prey": ("time", 30.0 + t), "predator": ("time", 4.0 + t), **extra},
        coords={"time": t},
    )


def test_csv_reads_time_column_and_values():
    raw = np.loadtxt(ROOT / "data/lynx_hare.csv", delimiter=",", skiprows=1)
    dataset, coord = read_data(ROOT / "data/lynx_hare.csv")
    assert coord == "year"
    np.testing.assert_array_equal(dataset["year"].values, raw[:, 0])
    np.testing.assert_array_equal(dataset["hare"].values, raw[:, 1])
    np.testing.assert_array_equal(dataset["lynx"].values, raw[:, 2])


def test_shipped_netcdf_equals_csv():
    for nc, csv, coord in [
        ("lynx_hare.nc", "lynx_hare.csv", "year"),
        ("influenza.nc", "boarding_school_influenza.csv", "day"),
    ]:
        a, ca = read_data(ROOT / "data" / nc)
        b, cb = read_data(ROOT / "data" / csv)
        assert ca == cb == coord
        for name in b.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values)
        np.testing.assert_array_equal(a[coord].values, b[coord].values)


def test_netcdf_and_mapping_inputs(tmp_path):
    data = _lv_data()
    data.to_netcdf(tmp_path / "obs.nc", engine="h5netcdf")
    back, coord = read_data(str(tmp_path / "obs.nc"))
    assert coord == "time"
    xr.testing.assert_equal(back, data)
    table, coord = read_data({"t": [0.0, 1.0], "prey": [1.0, 2.0]})
    assert coord == "t" and list(table.data_vars) == ["prey"]


def test_nan_is_masked_and_weights_apply():
    data = _lv_data()
    data["prey"][2] = np.nan
    coords = data["time"].values
    pairs = observation_map(data, "time", LV, None)
    fd = fit_data(
        data,
        "time",
        coords,
        pairs,
        noise="gaussian",
        weights={"prey": 2.0},
        sigma={"predator": 0.5},
        dtype=jnp.float64,
    )
    assert fd.num_observations == 9
    mask = np.asarray(fd.mask)
    assert not mask[2, 0] and mask.sum() == 9
    np.testing.assert_array_equal(np.asarray(fd.weights)[:, 1], 2.0)  # 1 / sigma
    np.testing.assert_array_equal(np.asarray(fd.weights)[:, 0], [2, 2, 0, 2, 2])
    # Residuals: weight * (prediction - data), zero where masked even if the prediction
    # is NaN there.
    pred = np.column_stack([30.0 + coords + 1.0, 4.0 + coords - 0.5])
    pred[2, 0] = np.nan
    r = np.asarray(residuals(jnp.asarray(pred), fd, "gaussian")).reshape(5, 2)
    np.testing.assert_allclose(r[:, 0], [2, 2, 0, 2, 2])
    np.testing.assert_allclose(r[:, 1], -1.0)
    rl = np.asarray(residuals(jnp.asarray(pred), fd, "lognormal")).reshape(5, 2)
    expected = 2.0 * (np.log(pred[:, 0]) - np.log(30.0 + coords))
    np.testing.assert_allclose(rl[[0, 1, 3, 4], 0], expected[[0, 1, 3, 4]], rtol=1e-14)
    assert rl[2, 0] == 0.0


def test_observation_function():
    sir = ds.models.SIR()
    data = xr.Dataset({"N": ("day", [763.0, 763.0])}, coords={"day": [0.0, 1.0]})

    def total(s):
        return s.S + s.I + s.R

    pairs = observation_map(data, "day", sir, {"N": total})
    ys = {"S": jnp.array([700.0, 600.0]), "I": jnp.array([60.0, 100.0]), "R": jnp.array([3.0, 9.0])}
    out = observe_states(ys, sir.initial_state().info, (pairs[0][1],))
    np.testing.assert_allclose(np.asarray(out)[:, 0], [763.0, 709.0])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            dict(data=_lv_data(extra_col=("time", np.ones(5)))),
            "'extra_col' is not a state variable",
        ),
        (dict(observe={"prey": "prey"}), "data variable 'predator' is not mapped to LotkaVolterra"),
        (dict(observe={"hare": "prey"}), "observe names data variable 'hare', which is not in"),
        (dict(observe={"prey": "rabbit", "predator": "predator"}), "'rabbit' is not a state var"),
        (dict(free={"alpha": Positive(), "mu": Positive()}), "unknown parameter 'mu'.*alpha, beta"),
        (dict(free={"state.rabbit": Positive()}), "unknown state variable 'state.rabbit'.*prey"),
        (dict(free={}), "free is empty"),
        (dict(free={"alpha": Bounded(0.6, 2.0)}), "initial value alpha = 0.55 lies outside"),
        (dict(free={"gamma": "bounded"}), "'gamma': unknown transform"),
        (dict(optimizer="adamm"), "unknown optimizer 'adamm'.*levenberg_marquardt.*adam"),
        (dict(adjoint="backsolve"), "fit does not take adjoint='backsolve'.*which simulate takes"),
        (dict(noise="poisson"), "unknown noise model 'poisson'"),
        (dict(weights={"hare": 1.0}), "weights names 'hare'"),
        (dict(weights={"prey": -1.0}), "weights\\['prey'\\] must be finite and non-negative"),
        (dict(sigma={"prey": 0.0}), "sigma\\['prey'\\] must be finite and positive"),
        (dict(weights={"prey": np.ones(3)}), "must be a number or an array of shape \\(5,\\)"),
        (dict(t0=1.5), "time 0 of the data lies before t0 = 1.5"),
        (dict(time="year"), "no dimension 'year'"),
        (dict(data=_lv_data(0)), "the data are empty"),
        (dict(data=_lv_data().isel(time=[0, 2, 1, 3])), "strictly increasing.*1 follows 2"),
        (dict(data=_lv_data(1)), "at least two time points"),
        (dict(data=_lv_data().assign(prey=lambda d: d.prey * np.nan)), "'prey' has no values"),
        (
            dict(data=_lv_data().assign(prey=lambda d: d.prey - 31), noise="lognormal"),
            "needs positive data, but 'prey' is -1 at time = 0",
        ),
        (dict(data=Path("missing.csv")), "does not exist"),
        (dict(multiple_shooting=5), "5 segments need at least 6 time points; there are 5"),
        (dict(multiple_shooting=1), "at least 2 segments"),
        (dict(multistart=0), "positive number of starts"),
    ],
)
def test_bad_input_names_the_culprit(kwargs, match):
    args = dict(data=_lv_data(), free=FREE)
    args.update(kwargs)
    data, free = args.pop("data"), args.pop("free")
    with pytest.raises((ValueError, TypeError, FileNotFoundError), match=match):
        fit(LV, data, free, steps=0, **args)


def test_bad_file_format(tmp_path):
    path = tmp_path / "obs.xlsx"
    path.write_text("x")
    with pytest.raises(ValueError, match="unknown format '.xlsx'"):
        read_data(path)


def test_steady_state_argument_checks():
    data = xr.Dataset({"prey": ("alpha", [1.0, 2.0])}, coords={"alpha": [0.5, 0.6]})
    with pytest.raises(ValueError, match="'alpha' is the control parameter"):
        fit(LV, data, {"alpha": Positive()}, control="alpha", steps=0)
    with pytest.raises(ValueError, match="initial state is only the root finder's guess"):
        fit(LV, data, {"state.prey": Positive()}, control="alpha", steps=0)
