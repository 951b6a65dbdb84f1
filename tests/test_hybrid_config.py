"""Hybrid models from configs and the command line: the shipped bouncing-ball config runs
and writes netCDF (with the event record) and a PNG; `save = "dense"` in `[time]`; the new
zoo models are listed by `difsim models`."""

import shutil
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from difsim._app._cli import main
from difsim._config._load import load_config
from difsim._config._schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def ball_config(tmp_path, monkeypatch):
    # The config's output path is relative to the config: ../runs/ lands in tmp_path.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments").mkdir()
    return Path(shutil.copy(ROOT / "experiments" / "bouncing_ball.toml", tmp_path / "experiments"))


def test_bouncing_ball_config_writes_events_to_netcdf_and_png(ball_config, capsys):
    assert main(["run", str(ball_config)]) == 0
    out = capsys.readouterr().out
    nc, png = Path("runs/bouncing_ball.nc"), Path("runs/bouncing_ball.png")
    assert png.read_bytes()[:4] == b"\x89PNG" and "EVENT" in out
    with xr.open_dataset(nc) as data:
        data = data.load()
    g, h0, e = 9.81, 10.0, 0.8
    t1 = np.sqrt(2 * h0 / g)
    # The ball rests after the first bounce leaving it slower than v_rest = 0.01 m/s.
    n = int(np.ceil(np.log(0.01 / (g * t1)) / np.log(e)))
    assert int(data["event_count"]) == n == data.sizes["event"]
    k = np.arange(n)
    np.testing.assert_allclose(
        data["event_time"], t1 * (1 + 2 * e * (1 - e**k) / (1 - e)), rtol=1e-6
    )
    assert data["event_type"].attrs["flag_meanings"] == "bounce"
    assert data.sizes["time"] == 1001  # save = "dense": the interpolant, sampled
    before = data.time < t1
    np.testing.assert_allclose(data.h[before], h0 - 0.5 * g * data.time[before] ** 2, atol=1e-7)
    assert np.isnan(data.h.values[-1])  # at rest (the solve ended) before t1 = 15


def test_dense_save_in_a_config_and_not_in_a_sweep(ball_config):
    assert load_config(ball_config).time.save == "dense"
    raw = tomllib.loads(ball_config.read_text())
    raw["sweep"] = {"e": {"linspace": [0.5, 0.9, 3]}}
    with pytest.raises(ConfigError, match=r"\[time\] save: \"dense\" keeps the interpolant"):
        load_config(raw)


def test_models_lists_the_hybrid_models(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("bouncing_ball", "oral_dosing", "thermostat"):
        assert name in out
