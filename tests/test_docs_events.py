"""The code of docs/events.md runs, and its numbers hold against closed forms.

The runner and its conventions are in test_docs.py; this file runs in its own process.
"""

import numpy as np
import pytest
import xarray as xr

from .test_docs import run_doc as run_doc, workdir as workdir  # noqa: F401 (fixtures)

HERE = ["docs/events.md"]
G, H0 = 9.81, 10.0


def landings(n, e=0.8, h0=H0):
    t1 = np.sqrt(2 * h0 / G)
    k = np.arange(n)
    return t1 * (1 + 2 * e * (1 - e**k) / (1 - e))


@pytest.mark.parametrize("name", HERE)
def test_every_python_block_runs(run_doc, name):
    assert "ds" in run_doc(name)


def test_events_doc_numbers(run_doc):
    doc = run_doc("docs/events.md")
    np.testing.assert_allclose(doc["data"]["event_time"].values, landings(4), rtol=1e-9)
    # Zeno: the 21st landing is over the cap of 20 and ends the solve, just before it.
    zeno = doc["zeno"]
    assert doc["ds"].Status(int(zeno.status)).name == "EVENT_LIMIT"
    np.testing.assert_allclose(float(zeno.t_end), landings(21)[-1], rtol=1e-9)
    # Without the cap: Status.ZENO where the landings accumulate, t_1 (1 + e) / (1 - e).
    rests, t_inf = doc["rests"], np.sqrt(2 * H0 / G) * 1.8 / 0.2
    assert doc["ds"].Status(int(rests.status)).name == "ZENO" and int(rests.events.count) == 86
    np.testing.assert_allclose(float(rests.t_end), t_inf, atol=1e-7)
    # Landing-time derivatives: dt_n/dh0 = t_n / (2 h0), dt_n/de = 2 t_1 sum_{k<n} k e^(k-1).
    t1 = np.sqrt(2 * H0 / G)
    np.testing.assert_allclose(np.asarray(doc["d_h0"]), landings(3) / (2 * H0), rtol=1e-7)
    d_e = [2 * t1 * sum(k * 0.8 ** (k - 1) for k in range(1, n)) for n in (1, 2, 3)]
    np.testing.assert_allclose(np.asarray(doc["d_e"]), d_e, rtol=1e-7)
    # The thermostat: the period of its closed form.
    k, t_out, p = 0.1, 5.0, 3.0
    t_inf = t_out + p / k
    period = (np.log((21 - t_out) / (19 - t_out)) + np.log((t_inf - 19) / (t_inf - 21))) / k
    heating = doc["heating"]
    n = int(heating.events.count)
    times = np.asarray(heating.events.times[:n])
    assert doc["switches"] == ["off", "on"] * (n // 2) + ["off"] * (n % 2)
    first = np.log((t_inf - 20.0) / (t_inf - 21.0)) / k  # heating from 20 to 21 degC
    np.testing.assert_allclose(times[0], first, rtol=1e-9)
    np.testing.assert_allclose(times[2:] - times[:-2], period, rtol=1e-8)
    np.testing.assert_allclose(float(doc["room"].period()), period)
    np.testing.assert_allclose(np.asarray(heating.events.before["T"][:n:2]), 21.0, atol=1e-9)
    # The peak concentrations: the maxima of the Bateman sums on the saved grid.
    pk, runs = doc["pk"], doc["runs"]
    ka, ke, V, D = (float(getattr(pk, n)) for n in ("ka", "ke", "V", "dose"))
    grid = np.linspace(0.0, 96.0, 961)
    for i, tau in enumerate([6.0, 8.0, 12.0, 24.0]):
        doses = np.arange(0.0, 96.0 + 1e-9, tau)
        assert int(runs.events.count[i]) == len(doses)
        dt = grid[:, None] - doses[None, :]
        c = D * ka / (V * (ka - ke)) * (np.exp(-ke * dt) - np.exp(-ka * dt))
        exact = np.where(dt >= 0, c, 0).sum(axis=1)
        np.testing.assert_allclose(np.asarray(runs.central[i]) / V, exact, atol=1e-6)


def test_events_doc_sweep_keeps_each_balls_landings(run_doc):
    balls = run_doc("docs/events.md")["balls"]
    t1 = np.sqrt(2 * H0 / G)
    for e in (0.5, 0.7, 0.9):
        times = landings(200, e)
        # Landings before t = 8 s, up to the one leaving the ball slower than v_rest.
        rest = int(np.argmax(G * t1 * e ** np.arange(1, 201) < 0.01)) + 1
        n = min(int(np.sum(times <= 8.0)), rest)
        lane = balls.sel(e=e)
        assert int(lane.event_count) == n
        np.testing.assert_allclose(lane.event_time[:n], times[:n], rtol=1e-9)
        assert np.isnan(lane.event_time[n:]).all() and (lane.event_type[n:] == -1).all()
        np.testing.assert_allclose(float(lane.t_end), times[n - 1] if n == rest else 8.0)
    assert balls.sizes["event"] == int(balls.event_count.max())


def ball_height(t, e=0.8):
    """The exact height: free flight from the floor after the n-th landing."""
    lands = landings(60, e)
    n = np.searchsorted(lands, t, side="right")
    start = np.where(n > 0, lands[np.maximum(n - 1, 0)], 0.0)
    u = np.where(n > 0, e**n * np.sqrt(2 * G * H0), 0.0)
    return np.where(n > 0, 0.0, H0) + u * (t - start) - 0.5 * G * (t - start) ** 2


def test_events_doc_dense_output_across_bounces(run_doc):
    doc = run_doc("docs/events.md")
    dense, fine = doc["sol"], doc["fine"]
    t1 = np.sqrt(2 * H0 / G)
    np.testing.assert_allclose(float(dense.evaluate(1.0)["h"]), H0 - G / 2, atol=1e-9)
    # At a landing, the state just after the bounce; at the end, the final state.
    np.testing.assert_allclose(float(dense.evaluate(t1)["v"]), 0.8 * G * t1, rtol=1e-8)
    assert float(dense.evaluate(5.0)["v"]) == float(dense.y_end["v"]) == float(dense.final["v"])
    # Between the restarts, the interpolant is the exact parabolas (5001 samples).
    assert fine.sizes["time"] == 5001 and int(fine["event_count"]) == 2
    np.testing.assert_allclose(fine.h.values, ball_height(fine.time.values), atol=1e-9)
    default = dense.to_xarray()  # 1001 evenly spaced samples without `times`
    assert default.sizes["time"] == 1001 and default.time.values[-1] == 5.0


def test_events_doc_records_in_datasets_and_netcdf(run_doc, tmp_path):
    doc = run_doc("docs/events.md")
    # The thermostat's record: flag meanings, units, a netCDF round trip.
    data = doc["heating"].to_xarray()
    n = int(doc["heating"].events.count)
    assert data.sizes["event"] == n and data.attrs["events"] == "off on"
    assert data["event_type"].attrs["flag_meanings"] == "off on"
    assert data["event_time"].attrs["units"] == "h" and data["T_before_event"].dims == ("event",)
    np.testing.assert_allclose(data["q_after_event"], [0.0, 1.0] * (n // 2) + [0.0] * (n % 2))
    data.to_netcdf(tmp_path / "thermostat.nc")
    with xr.open_dataset(tmp_path / "thermostat.nc") as back:
        xr.testing.assert_identical(back.load(), data)
    # Under vmap each trajectory has its own events; the Dataset pads to the most of them.
    taus = [6.0, 8.0, 12.0, 24.0]
    runs = doc["runs"].to_xarray(batch_dims=["tau"], batch_coords={"tau": taus})
    assert runs.sizes["event"] == 17 and list(runs["event_count"].values) == [17, 13, 9, 5]
    assert runs["event_time"].dims == ("tau", "event")
    np.testing.assert_allclose(runs["event_time"].values[2, :9], np.arange(9) * 12.0)
    assert np.all(np.isnan(runs["event_time"].values[2, 9:]))
    assert np.all(runs["event_type"].values[2, 9:] == -1)
    assert runs["gut_after_event"].attrs["units"] == "mg"
