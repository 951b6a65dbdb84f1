"""Progress of long work (`difsim._io._progress`): log lines where stderr is not a terminal,
bars that close where the work ended, and the texts they show.

The display's own arithmetic runs on a fake clock, so every number in a line is checked
against one worked out by hand. The sweep, fit and PDE tests run real (small) solves.
"""

import logging

import jax
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._core import _progress_meter
from difsim._io import _progress as pr
from difsim.models import ExponentialDecay, GrayScott, OrnsteinUhlenbeck


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(pr.time, "perf_counter", fake)
    monkeypatch.setenv(pr.INTERVAL_ENV, "0")  # a line at every update
    monkeypatch.setattr(pr, "interactive", lambda: False)
    return fake


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "difsim.progress"]


def test_log_lines_give_done_rate_and_time_left(clock, caplog):
    caplog.set_level(logging.INFO, logger="difsim.progress")
    task = pr.progress(4096, what="sweep", one="trajectory", many="trajectories")
    assert isinstance(task, pr.LogProgress)
    clock.now += 5.0  # the first chunk, compilation included: no rate from it
    task.advance(1024)
    clock.now += 2.0  # the second: 1024 in 2 s, so 512/s and 2048 left = 4 s
    task.advance(1024)
    clock.now += 4.0
    task.advance(2048)  # complete: the last line says so, no periodic one
    task.finish()
    assert _lines(caplog) == [
        "sweep: 1,024 of 4,096 trajectories (25%), 5.0 s elapsed",
        "sweep: 2,048 of 4,096 trajectories (50%), 7.0 s elapsed, 512 trajectories/s, "
        "about 4.0 s left",
        "sweep: done, 4,096 of 4,096 trajectories in 11.0 s",
    ]


def test_slow_work_has_a_time_per_unit_and_a_fit_ends_early(clock, caplog):
    caplog.set_level(logging.INFO, logger="difsim.progress")
    # 64 trajectories at 40 s each (the Gray–Scott atlas), never "0 trajectories/s".
    atlas = pr.progress(64, what="sweep", one="trajectory", many="trajectories")
    atlas.advance(1)
    clock.now += 80.0
    atlas.advance(2)
    assert _lines(caplog)[-1] == (
        "sweep: 3 of 64 trajectories (5%), 1:20 elapsed, 40.0 s per trajectory, about 40:40 left"
    )
    atlas.close()  # interrupted: says where it stopped
    assert _lines(caplog)[-1] == "sweep: stopped at 3 of 64 trajectories after 1:20"
    # A fit may converge before its step budget: its time left is an upper bound, and it
    # ends where it converged.
    fit = pr.progress(256, what="fit (lm)", one="step", many="steps", upper_bound=True)
    clock.now += 1.0
    fit.update(2)
    fit.note("loss 3.5")
    clock.now += 1.0
    fit.update(12)  # 10 steps/s, 244 steps to go
    assert _lines(caplog)[-1] == (
        "fit (lm): 12 of 256 steps (5%), loss 3.5, 2.0 s elapsed, 10 steps/s, at most 24.4 s left"
    )
    fit.finish(12, message="converged")
    assert _lines(caplog)[-1] == "fit (lm): converged after 12 steps in 2.0 s"


def test_model_time_position_and_pieces(clock, caplog):
    caplog.set_level(logging.INFO, logger="difsim.progress")
    task = pr.progress(2000.0, what="simulate(GrayScott)", one="time unit", many="s",
                       label="t = ", position=lambda done: f"{500 + done:.6g}")  # fmt: skip
    task.running(2000.0)
    clock.now += 3.0
    task.fraction(0.25)
    clock.now += 3.0
    task.fraction(0.5)  # 500 model seconds in 3 s: 6 s left
    assert _lines(caplog)[-1] == (
        "simulate(GrayScott): t = 1500 of 2500 s (50%), 6.0 s elapsed, about 6.0 s left"
    )
    task.fraction(0.4)  # never backwards
    assert task.done == 1000.0
    # A chunk of 8 trajectories reporting fractions moves a count by parts of 8.
    sweep = pr.progress(16, what="sweep", one="trajectory", many="trajectories")
    sweep.running(8)
    sweep.fraction(0.5)
    assert sweep.done == 4.0
    sweep.advance(8)  # the chunk is stored: the count, no longer a fraction
    assert sweep.done == 8.0
    sweep.fraction(0.9)  # no piece announced since: ignored
    assert sweep.done == 8.0


def test_lines_reach_stderr_without_logging_setup_and_obey_its_level(clock, capsys, monkeypatch):
    monkeypatch.setattr(logging.getLogger(), "handlers", [])  # pytest's own, for this test
    pr.emit("sweep: a line")
    assert capsys.readouterr().err == "difsim: sweep: a line\n"
    monkeypatch.setattr(logging.getLogger("difsim.progress"), "level", logging.WARNING)
    pr.emit("sweep: dropped")
    assert capsys.readouterr().err == ""


def test_interval_setting_and_display_choice(monkeypatch):
    monkeypatch.setenv(pr.INTERVAL_ENV, "2.5")
    assert pr.log_interval() == 2.5
    monkeypatch.delenv(pr.INTERVAL_ENV)
    assert pr.log_interval() == 10.0
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(pr.INTERVAL_ENV, bad)
        with pytest.raises(ValueError, match="DIFSIM_PROGRESS_INTERVAL must be a number"):
            pr.log_interval()
    monkeypatch.setenv(pr.INTERVAL_ENV, "1")
    kw = dict(what="x", one="step", many="steps")
    assert isinstance(pr.progress(5, show=False, **kw), pr.NoProgress)
    monkeypatch.setattr(pr, "interactive", lambda: False)
    assert isinstance(pr.progress(5, show=None, **kw), pr.LogProgress)
    monkeypatch.setattr(pr, "interactive", lambda: True)
    bar = pr.progress(5, show=True, **kw)
    assert isinstance(bar, pr.BarProgress)
    bar.close()


def test_refresh_steps_keep_callbacks_rare():
    # ~20 ms of steps between callbacks: thousands of steps for a 3-variable ODE, a few for
    # a 256 x 256 two-field PDE (each step costs ~3.5 ms there).
    assert _progress_meter.refresh_steps(3) == 12651  # ceil(0.02 / (1.5e-6 + 3 * 27e-9))
    assert _progress_meter.refresh_steps(2 * 256 * 256) == 6
    assert _progress_meter.refresh_steps(10**9) == 1


# ------------------------------------------------------------------ with real solves
def _decay_data():
    t = np.linspace(0.0, 3.0, 13)
    return xr.Dataset({"y": ("time", 2.0 * np.exp(-0.7 * t))}, coords={"time": t})


def test_fit_bar_closes_at_convergence(monkeypatch, capsys):
    monkeypatch.setattr(pr, "interactive", lambda: True)
    model = ExponentialDecay(k=0.2).replace(**{"state.y": 2.0})
    res = ds.fit(model, _decay_data(), ["k"], progress=None)
    assert res.status is ds.Status.CONVERGED and res.parameters["k"] == pytest.approx(0.7)
    n = res.num_steps
    assert 1 < n < 256  # converged well within the default budget
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in final and f"| {n}/{n} [" in final and "converged, loss " in final


def test_sweep_logs_lines_when_stderr_is_not_a_terminal(monkeypatch, caplog):
    monkeypatch.setenv(pr.INTERVAL_ENV, "0")
    monkeypatch.setattr(pr, "interactive", lambda: False)
    caplog.set_level(logging.INFO, logger="difsim.progress")
    spec = ds.GridSweep({"k": np.linspace(0.5, 2.0, 32)})
    out = ds.sweep(ExponentialDecay(), spec, t0=0.0, t1=1.0, save="final", chunk_size=8)
    np.testing.assert_allclose(out["y"], np.exp(-np.linspace(0.5, 2.0, 32)), rtol=1e-5)
    lines = _lines(caplog)
    assert [line.split(" (")[0] for line in lines[:3]] == [
        f"sweep: {n} of 32 trajectories" for n in (8, 16, 24)
    ]
    assert "trajectories/s, about" in lines[1]
    assert lines[-1].startswith("sweep: done, 32 of 32 trajectories in ")


def test_pde_sweep_reports_progress_within_a_chunk(monkeypatch, caplog):
    # One chunk of two 16 x 16 Gray–Scott solves: the count stays 0 until the chunk is
    # done, but the model time of its slowest lane moves the percentage.
    monkeypatch.setenv(pr.INTERVAL_ENV, "0")
    monkeypatch.setattr(pr, "interactive", lambda: False)
    monkeypatch.setattr(_progress_meter, "_BUDGET", 1e-9)  # a callback every step
    caplog.set_level(logging.INFO, logger="difsim.progress")
    model = GrayScott(grid=ds.Grid(shape=(16, 16), extent=(0.16, 0.16)))
    spec = ds.GridSweep({"F": [0.03, 0.04]})
    kw = dict(t0=0.0, t1=20.0, save="final", dt0=1.0, controller="constant", keep=["v_contrast"])
    out = ds.sweep(model, spec, progress=None, **kw)
    quiet = ds.sweep(model, spec, progress=False, **kw)
    np.testing.assert_allclose(out["v_contrast"], quiet["v_contrast"], rtol=1e-12)
    lines = _lines(caplog)
    assert lines[-1].startswith("sweep: done, 2 of 2 trajectories in ")
    within = [line for line in lines[:-1] if line.startswith("sweep: 0 of 2 trajectories")]
    percents = [int(line.split("(")[1].split("%")[0]) for line in within]
    assert len(percents) >= 2 and percents == sorted(percents) and 0 < percents[-1] < 100


def test_simulate_reports_model_time_with_units(monkeypatch, caplog):
    monkeypatch.setenv(pr.INTERVAL_ENV, "0")
    monkeypatch.setattr(pr, "interactive", lambda: False)
    monkeypatch.setattr(_progress_meter, "_BUDGET", 1e-9)
    caplog.set_level(logging.INFO, logger="difsim.progress")
    sol = ds.simulate(ExponentialDecay(), t0=0.0, t1=2.0, save="final", dt0=0.25,
                      controller="constant", solver="euler", progress=True)  # fmt: skip
    assert float(sol.y[-1]) == pytest.approx(0.75**8, rel=1e-12)  # 8 Euler steps of 0.25
    lines = _lines(caplog)
    assert lines[0].startswith("simulate(ExponentialDecay): t = 0.25 of 2 s (12%)")
    assert lines[-1].startswith("simulate(ExponentialDecay): done, t = 2 of 2 s in ")


def test_monte_carlo_sweep_logs_paths_done(monkeypatch, caplog):
    # Three points of 32 Ornstein–Uhlenbeck paths, one chunk of 32 at a time: a line per
    # chunk in paths, then the closing line (the display of `_sweep/_monte_carlo.py`).
    monkeypatch.setenv(pr.INTERVAL_ENV, "0")
    monkeypatch.setattr(pr, "interactive", lambda: False)
    caplog.set_level(logging.INFO, logger="difsim.progress")
    model, sigmas = OrnsteinUhlenbeck(mu=0.5), [0.2, 0.4, 0.6]
    out = ds.sweep(
        model, ds.GridSweep({"sigma": sigmas}), samples=32, seed=0, keep=["x_mean"],
        t0=0.0, t1=1.0, save=2, solver="euler", dt0=0.05, brownian="steps",
        chunk_size=32, devices=jax.devices()[:1], progress=None,
    )  # fmt: skip
    # The exact OU mean at t = 1 (it does not depend on sigma), within 5 standard errors.
    se = np.sqrt(np.asarray([float(model.replace(sigma=s).variance(1.0)) for s in sigmas]) / 32)
    assert np.all(np.abs(out["x_mean"].values[:, -1] - float(model.mean(1.0))) < 5 * se)
    lines = _lines(caplog)
    assert [line.split(" (")[0] for line in lines[:-1]] == [
        f"Monte Carlo sweep: {n} of 96 paths" for n in (32, 64)
    ]
    assert "paths/s, about" in lines[1]
    assert lines[-1].startswith("Monte Carlo sweep: done, 96 of 96 paths in ")
