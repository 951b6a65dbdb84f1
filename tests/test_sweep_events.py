"""Sweeps of a model with events keep every trajectory's event record (docs/events.md,
"Events in sweeps"): against the bouncing ball's closed form, labelled as a vmapped
solution's Dataset labels it, the same in memory and on disk, for any chunk size, after a
resume, and from a config. Float64, 9 trajectories; one compiled chunk function of 8 lanes
serves every sweep here but the one-chunk run."""

import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._app._cli import main
from difsim._config._load import load_config
from difsim._config._schema import ConfigError
from difsim._sweep import run_sweep
from tests.test_cf import cf_problems

ROOT = Path(__file__).resolve().parents[1]
G, V_REST, T_MAX = 9.81, 0.01, 5.0
E, H0 = [0.3, 0.5, 0.8], [2.0, 5.0, 10.0]
SPEC = ds.GridSweep({"e": E, "state.h": H0})  # 9 points
# 2 chunks; the controller named as a config names it, so the config's sweep reuses the
# compiled chunk function.
KW = dict(t0=0.0, t1=T_MAX, rtol=1e-10, atol=1e-10, controller="pid", chunk_size=8, progress=False)
KW_SIMULATE = {k: KW[k] for k in ("t0", "t1", "rtol", "atol", "controller")}
RECORD = ["event_count", "event_time", "event_type", "h_before_event", "h_after_event",
          "v_before_event", "v_after_event", "t_end"]  # fmt: skip


def bounces(e: float, h0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The landings of a ball dropped from rest at `h0` before `T_MAX`, up to the one that
    leaves it slower than `V_REST` (the zoo model's terminal condition): their times
    `t_k = t_1 (1 + 2e (1 - e^k) / (1 - e))`, `t_1 = sqrt(2 h0 / g)`, and the velocity just
    before (`-g t_1 e^k`) and just after (`g t_1 e^(k+1)`) each."""
    t1 = np.sqrt(2 * h0 / G)
    k = np.arange(200)
    times = t1 * (1 + 2 * e * (1 - e**k) / (1 - e))
    before, after = -G * t1 * e**k, G * t1 * e ** (k + 1)
    n = min(int(np.sum(times <= T_MAX)), int(np.argmax(after < V_REST)) + 1)
    return times[:n], before[:n], after[:n]


def _load(path) -> xr.Dataset:
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return f.load()


def _as_netcdf_reads(dataset: xr.Dataset) -> xr.Dataset:
    """`dataset` with one-element list attributes as scalars: netCDF attributes are arrays,
    and one of length 1 reads back as a scalar (the model's one event: `flag_values`)."""
    out = dataset.copy()
    for var in out.variables.values():
        var.attrs = {k: v[0] if isinstance(v, list | np.ndarray) and len(v) == 1 else v
                     for k, v in var.attrs.items()}  # fmt: skip
    return out


@pytest.fixture(scope="module")
def memory():
    return ds.sweep(ds.models.BouncingBall(), SPEC, **KW)


@pytest.fixture(scope="module")
def on_disk(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "ball.nc"
    _, report = run_sweep(ds.models.BouncingBall(), SPEC, output=path, **KW)
    assert report.computed == (0, 1)
    return path


def test_event_times_and_states_per_trajectory_match_the_closed_form(memory):
    assert memory.event_time.dims == ("e", "state.h", "event")
    counts = np.zeros((3, 3), int)
    for i, e in enumerate(E):
        for j, h0 in enumerate(H0):
            times, before, after = bounces(e, h0)
            lane = memory.isel(e=i, **{"state.h": j})
            n = counts[i, j] = len(times)
            assert int(lane.event_count) == n, (e, h0)
            np.testing.assert_allclose(lane.event_time[:n], times, rtol=1e-9)
            np.testing.assert_allclose(lane.v_before_event[:n], before, rtol=1e-8)
            np.testing.assert_allclose(lane.v_after_event[:n], after, rtol=1e-8)
            np.testing.assert_allclose(lane.h_before_event[:n], 0.0, atol=1e-9)
            assert (lane.event_type[:n] == 0).all() and (lane.event_type[n:] == -1).all()
            assert np.isnan(lane.event_time[n:]).all() and np.isnan(lane.v_after_event[n:]).all()
            # At rest after its last bounce (status EVENT), or still bouncing at T_MAX.
            rests = after[-1] < V_REST
            assert ds.Status(int(lane.status)).name == ("EVENT" if rests else "SUCCESS")
            np.testing.assert_allclose(float(lane.t_end), times[-1] if rests else T_MAX)
    assert len(np.unique(counts)) == 7  # the lanes' counts differ (2 to 11)
    assert memory.sizes["event"] == counts.max()  # as long as the most events of a lane
    assert memory.event_type.attrs["flag_meanings"] == "bounce"
    assert memory.event_time.attrs["units"] == "s" and memory.v_after_event.attrs["units"] == "m/s"
    assert memory.attrs["events"] == "bounce" and memory.attrs["max_events"] == 100


def test_the_record_is_labelled_as_a_vmapped_solutions(memory):
    ball = ds.models.BouncingBall()
    es = jnp.asarray(E)
    solve = lambda e: ds.simulate(ball.replace(e=e), save="final", throw=False, **KW_SIMULATE)  # noqa: E731
    vmapped = jax.jit(jax.vmap(solve))(es).to_xarray(batch_dims=["e"], batch_coords={"e": es})
    swept = memory.sel({"state.h": 10.0}, drop=True)  # whose lane e = 0.5 has the most events
    for name in RECORD:
        assert swept[name].dims == vmapped[name].dims and swept[name].dtype == vmapped[name].dtype
        assert swept[name].attrs == vmapped[name].attrs, name
        np.testing.assert_allclose(swept[name], vmapped[name], rtol=1e-12, atol=1e-13, err_msg=name)
    assert {k: memory.attrs[k] for k in ("events", "max_events")} == {
        k: vmapped.attrs[k] for k in ("events", "max_events")
    }


def test_the_record_does_not_depend_on_the_chunk_size(memory):
    one_chunk = ds.sweep(ds.models.BouncingBall(), SPEC, **{**KW, "chunk_size": 16})
    for name in ("event_count", "event_type", "status", "num_steps"):
        np.testing.assert_array_equal(one_chunk[name], memory[name], err_msg=name)
    for name in RECORD:
        np.testing.assert_allclose(one_chunk[name], memory[name], rtol=1e-12, atol=1e-14)


def test_the_file_holds_the_in_memory_record(memory, on_disk):
    back = _load(on_disk)
    xr.testing.assert_identical(back, _as_netcdf_reads(memory))
    # CF: flag_values of the flag variable's own type, in memory and in the file.
    assert cf_problems(back) == [] and cf_problems(memory) == []
    for name in ("status", "event_type"):
        assert np.asarray(back[name].flag_values).dtype == back[name].dtype == np.int32, name


def test_a_resumed_sweep_writes_the_same_file(tmp_path, on_disk):
    path = tmp_path / "ball.nc"

    def stop(i):
        if i == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(ds.models.BouncingBall(), SPEC, output=path, on_chunk=stop, **KW)
    # The store holds the record at full width (room for max_events) while the sweep runs.
    partial = xr.open_zarr(f"{path}.zarr").load()
    assert partial.sizes["event"] == 100 and (partial.status.values[8:] == -1).all()
    assert (partial.event_count.values[:8] >= 3).all()
    _, report = run_sweep(ds.models.BouncingBall(), SPEC, output=path, **KW)
    assert report.reused == 1 and report.computed == (1,)
    assert path.read_bytes() == on_disk.read_bytes()


def test_a_config_sweep_of_the_bouncing_ball_writes_the_record(tmp_path, memory, capsys):
    config = tmp_path / "ball_sweep.toml"
    config.write_text(
        textwrap.dedent(
            """
            [model]
            name = "bouncing_ball"
            [time]
            t0 = 0.0
            t1 = 5.0
            save = "final"
            [solver]
            name = "tsit5"
            rtol = 1e-10
            atol = 1e-10
            dtype = "float64"
            [sweep]
            e = [0.3, 0.5, 0.8]
            "state.h" = [2.0, 5.0, 10.0]
            chunk_size = 8
            [output]
            path = "runs/ball_sweep.nc"
            """
        )
    )
    assert main(["run", str(config)]) == 0
    resting = sum(bounces(e, h0)[2][-1] < V_REST for e in E for h0 in H0)
    assert f"EVENT {resting}" in capsys.readouterr().out  # balls at rest before t1
    data = _load(tmp_path / "runs" / "ball_sweep.nc")
    assert (tmp_path / "runs" / "ball_sweep.png").read_bytes()[:4] == b"\x89PNG"
    for name in RECORD:
        xr.testing.assert_identical(data[name], _as_netcdf_reads(memory)[name])


def test_resource_checks_count_the_record(monkeypatch):
    # Per trajectory: h, v (float64), status, num_steps, and room for 100 events: time,
    # type (int32), h and v before and after; the count (int32) and t_end.
    per_point = 2 * 8 + 12 + 100 * (8 + 4 + 4 * 8) + 4 + 8
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "1MiB")  # the final states alone would fit
    spec = ds.GridSweep({"e": np.linspace(0.1, 0.9, 1000)})
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ds.models.BouncingBall(), spec, t0=0.0, t1=1.0)
    assert info.value.key == "spec" and info.value.needed == 1000 * per_point
    # A chunk's device memory (`bytes_per_trajectory`: the solve's 2 state values x (16
    # stages + 8 copies + 2 saved times), 3 copies of the kept values, h and v and the
    # record's 602 counted at 8 bytes, plus 16, and 512 bytes of scalars): 1.4 MiB for 96
    # lanes (without the record, 0.1 MiB).
    per_lane = 8 * 2 * (16 + 8 + 2) + 3 * ((2 + 602) * 8 + 16) + 512
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ds.models.BouncingBall(), ds.GridSweep({"e": [0.5]}), t0=0, t1=1, chunk_size=96)
    assert info.value.key == "chunk_size" and info.value.needed == 96 * per_lane
    monkeypatch.setenv("DIFSIM_DISK_LIMIT", "1MiB")  # the config writes a file
    overrides = {"time.save": "final", "sweep.e": {"linspace": [0.1, 0.9, 1000]}}
    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "experiments" / "bouncing_ball.toml", overrides=overrides)
    assert info.value.key == "sweep" and f"at least {per_point:,} bytes each" in str(info.value)


class Counted(ds.models.BouncingBall):
    @ds.observable
    def event_count(self, ts, ys):
        return ys["h"][-1]


def test_an_observable_named_like_the_record_is_refused():
    with pytest.raises(ValueError, match="two kept variables are called 'event_count'"):
        ds.sweep(Counted(), SPEC, keep=["event_count"], **KW)


# ------------------------------------------------------------------ max_events
CAP = 4  # below most lanes' landings (2 to 11): those end at their 5th, EVENT_LIMIT


@pytest.fixture(scope="module")
def capped():
    return ds.sweep(ds.models.BouncingBall(), SPEC, max_events=CAP, **KW)


def test_max_events_caps_each_record_as_simulate_does(memory, capped):
    over = 0
    for i, e in enumerate(E):
        for j, h0 in enumerate(H0):
            times, before, _ = bounces(e, h0)
            lane, free = (d.isel(e=i, **{"state.h": j}) for d in (capped, memory))
            n = min(len(times), CAP)
            assert int(lane.event_count) == n, (e, h0)
            np.testing.assert_allclose(lane.event_time[:n], times[:n], rtol=1e-9)
            np.testing.assert_allclose(lane.v_before_event[:n], before[:n], rtol=1e-8)
            if len(times) > CAP:  # stopped at the first landing over the cap, just before it
                over += 1
                assert ds.Status(int(lane.status)) == ds.Status.EVENT_LIMIT, (e, h0)
                np.testing.assert_allclose(float(lane.t_end), times[CAP], rtol=1e-9)
            else:  # as without the cap
                assert int(lane.status) == int(free.status) and float(lane.t_end) == free.t_end
    assert over == 7 and capped.sizes["event"] == CAP and capped.attrs["max_events"] == CAP
    # Part of the result's identity: the settings (and their hash) hold the cap.
    assert f"bounce, max_events={CAP}" in capped.attrs["sweep_settings"]
    assert "bounce, max_events=100" in memory.attrs["sweep_settings"]
    assert capped.attrs["sweep_hash"] != memory.attrs["sweep_hash"]


@pytest.mark.parametrize(
    "value, error, match",
    [(0, ValueError, "max_events must be at least 1, got 0"),
     (2.0, TypeError, "max_events must be a positive integer, got 2.0"),
     (True, TypeError, "max_events must be a positive integer, got True")],
)  # fmt: skip
def test_max_events_is_checked(value, error, match):
    with pytest.raises(error, match=match):
        ds.sweep(ds.models.BouncingBall(), SPEC, max_events=value, **KW)


def test_max_events_of_a_model_without_events_is_refused():
    with pytest.raises(ValueError, match="max_events=5: Lorenz declares no events"):
        ds.sweep(ds.models.Lorenz(), ds.GridSweep({"rho": [1.0]}), t0=0.0, t1=0.1, max_events=5)
    with pytest.raises(ConfigError, match="Lorenz declares no events") as info:
        load_config(ROOT / "experiments" / "lorenz_rho_sweep.toml",
                    overrides={"sweep.max_events": 5})  # fmt: skip
    assert info.value.key == "sweep.max_events"
    with pytest.raises(ConfigError) as info:
        overrides = {"time.save": "final", "sweep.e": [0.5], "sweep.max_events": 0}
        load_config(ROOT / "experiments" / "bouncing_ball.toml", overrides=overrides)
    assert info.value.key == "sweep.max_events"


def test_a_config_sweeps_max_events(tmp_path, capped):
    config = tmp_path / "capped.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [model]
            name = "bouncing_ball"
            [time]
            t0 = 0.0
            t1 = {T_MAX}
            save = "final"
            [solver]
            name = "tsit5"
            rtol = 1e-10
            atol = 1e-10
            dtype = "float64"
            [sweep]
            e = {E}
            "state.h" = {H0}
            chunk_size = 8
            max_events = {CAP}
            [output]
            path = "capped.nc"
            plot = false
            """
        )
    )
    assert load_config(config).sweep.max_events == CAP
    assert f"max_events = {CAP}" in load_config(config).to_toml()
    assert main(["run", "-q", str(config)]) == 0
    data = _load(tmp_path / "capped.nc")
    for name in (*RECORD, "status"):
        xr.testing.assert_identical(data[name], _as_netcdf_reads(capped)[name])


def test_resource_checks_count_the_capped_record(monkeypatch):
    per_point = 2 * 8 + 12 + 5 * (8 + 4 + 4 * 8) + 4 + 8  # room for 5 events
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "1MiB")
    monkeypatch.setenv("DIFSIM_DISK_LIMIT", "1MiB")
    spec = ds.GridSweep({"e": np.linspace(0.1, 0.9, 10_000)})
    with pytest.raises(ds.ResourceError) as info:
        ds.sweep(ds.models.BouncingBall(), spec, t0=0.0, t1=1.0, max_events=5)
    assert info.value.key == "spec" and info.value.needed == 10_000 * per_point
    overrides = {"time.save": "final", "sweep.e": {"linspace": [0.1, 0.9, 10_000]},
                 "sweep.max_events": 5}  # fmt: skip
    with pytest.raises(ConfigError) as info:
        load_config(ROOT / "experiments" / "bouncing_ball.toml", overrides=overrides)
    assert info.value.key == "sweep" and f"at least {per_point:,} bytes each" in str(info.value)
