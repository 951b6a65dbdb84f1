"""`ds.sweep(engine=...)` and `[sweep] engine`: which engine integrates a sweep, what the
output records, and that both engines give the same numbers."""

import tomllib

import jax
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._config import ConfigError, load_config
from difsim._sweep import _runner
from difsim._sweep._sweep import _mesh

MODEL = ds.models.Lorenz()
SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 24)})
KW = dict(t0=0.0, t1=1.0, save=11, keep=["x_max", "z_mean", "y_final"], rtol=1e-9, atol=1e-9)


def test_auto_takes_the_ensemble_engine_and_agrees_with_diffrax():
    ens = ds.sweep(MODEL, SPEC, **KW)
    ref = ds.sweep(MODEL, SPEC, engine="diffrax", **KW)
    assert ens.attrs["engine"] == "ensemble" and "engine_fallback" not in ens.attrs
    assert ref.attrs["engine"] == "diffrax"
    # The engine is part of the sweep's identity (resumes never mix the two).
    assert ens.attrs["sweep_hash"] != ref.attrs["sweep_hash"]
    for name in ("x_max", "z_mean", "y_final"):
        np.testing.assert_allclose(ens[name], ref[name], rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(ens.num_steps, ref.num_steps)
    # And both against one trajectory solved alone.
    alone = ds.simulate(
        MODEL.replace(rho=float(SPEC.values["rho"][7])),
        t0=0.0,
        t1=1.0,
        save=11,
        rtol=1e-9,
        atol=1e-9,
    )
    np.testing.assert_allclose(ens["y_final"][7], alone.ys["y"][-1], rtol=1e-11)


def test_default_controller_spelt_out_is_the_same_sweep_and_program():
    # A config names its controller; a Python call may leave it out: the same sweep, and
    # the same compiled chunk (it was compiled twice).
    compiled = _runner._compiled(_mesh(tuple(jax.devices())), "ensemble")
    implicit = ds.sweep(MODEL, SPEC, **KW)
    programs = compiled._cache_size()
    named = ds.sweep(MODEL, SPEC, controller="pid", **KW)
    assert compiled._cache_size() == programs
    assert named.attrs["sweep_hash"] == implicit.attrs["sweep_hash"]
    np.testing.assert_array_equal(named["x_max"], implicit["x_max"])


def test_auto_falls_back_and_says_why(caplog):
    with caplog.at_level("INFO", logger="difsim"):
        out = ds.sweep(MODEL, SPEC, t0=0.0, t1=0.5, solver="kvaerno5")
    assert out.attrs["engine"] == "diffrax"
    assert "Kvaerno5 has no ensemble kernel" in out.attrs["engine_fallback"]
    assert "Kvaerno5 has no ensemble kernel" in caplog.text


def test_bad_engine_choices():
    with pytest.raises(
        ValueError, match="engine='ensemble' cannot run this sweep: solver Kvaerno5"
    ):
        ds.sweep(MODEL, SPEC, t0=0.0, t1=1.0, solver="kvaerno5", engine="ensemble")
    with pytest.raises(
        ValueError, match="engine must be one of auto, ensemble, diffrax, got 'fast'"
    ):
        ds.sweep(MODEL, SPEC, t0=0.0, t1=1.0, engine="fast")


CONFIG = """
[model]
name = "lorenz"
[time]
t0 = 0.0
t1 = 1.0
[sweep]
rho = { linspace = [0.0, 21.0, 5] }
"""


def test_config_engine_key():
    assert load_config(tomllib.loads(CONFIG)).sweep.engine == "auto"
    exp = load_config(tomllib.loads(CONFIG + 'engine = "diffrax"\n'))
    assert exp.sweep.engine == "diffrax" and exp.sweep.to_dict()["engine"] == "diffrax"
    with pytest.raises(ConfigError, match=r"\[sweep\] engine: .*'auto', 'ensemble', 'diffrax'"):
        load_config(tomllib.loads(CONFIG + 'engine = "fast"\n'))


def test_float32_sweep_runs_in_float32():
    # The library default precision: lanes stay float32 through the engine.
    with jax.enable_x64(False):
        out = ds.sweep(MODEL, SPEC, t0=0.0, t1=1.0, rtol=1e-6, atol=1e-6)
    assert out.x.dtype == np.float32 and out.attrs["engine"] == "ensemble"
    assert int((out.status != 0).sum()) == 0


def test_a_repeated_one_chunk_sweep_places_its_points_once():
    from difsim._sweep import _setup

    kw = dict(t0=0.0, t1=0.5, rtol=1e-6, atol=1e-6, progress=False)
    values = np.linspace(1.0, 20.0, 6, dtype=np.float32)
    _setup._PARTS.clear()
    first = ds.sweep(MODEL, ds.GridSweep({"rho": values}), **kw)
    (setup,) = (s for part in _setup._PARTS.values() for _, _, s in part.setups)
    (key,) = (k for k in setup.memo if k[0] == "points")
    placed = setup.memo[key]["rho"]
    assert isinstance(placed, jax.Array)
    # The chunk's points, padded by repeating the last.
    np.testing.assert_array_equal(np.asarray(placed)[: values.size], values.astype(setup.dtype))
    assert (np.asarray(placed)[values.size :] == values[-1]).all()
    again = ds.sweep(MODEL, ds.GridSweep({"rho": values.copy()}), **kw)
    assert setup.memo[key]["rho"] is placed  # compared, not converted or placed again
    xr.testing.assert_identical(again, first)
    # Each result owns its arrays: writable, shared with no other result.
    for name in ("x", "status", "num_steps"):
        own = again[name].values
        assert own.flags.writeable and not np.shares_memory(own, first[name].values)
    # Other values are another setup, with their own points.
    values[3] = 7.5
    other = ds.sweep(MODEL, ds.GridSweep({"rho": values}), **kw)
    assert float(other.rho[3]) == 7.5 and float(other.x[3]) != float(first.x[3])
    alone = ds.simulate(MODEL.replace(rho=7.5), save="final", **kw)
    np.testing.assert_allclose(other.x[3], alone.ys["x"][-1], rtol=1e-5)
    # The same sweep on another device: the same numbers, but the devices are part of its
    # identity (docs/sweeps.md), so another setup, which places its points there.
    devices = jax.devices()[1:2]
    moved = ds.sweep(MODEL, ds.GridSweep({"rho": values}), devices=devices, **kw)
    xr.testing.assert_equal(moved, other)
    differ = {k for k in moved.attrs if moved.attrs[k] != other.attrs.get(k)}
    assert differ == {"devices", "sweep_hash", "sweep_settings"}
    assert (moved.attrs["devices"], other.attrs["devices"]) == ("1 x cpu", "8 x cpu")
    placed = [v["rho"] for s in setups_of(values) for k, v in s.memo.items() if k[0] == "points"]
    assert len(placed) == 2 and {devices[0]} in [p.devices() for p in placed]


def setups_of(values):
    from difsim._sweep import _setup

    return [
        s for part in _setup._PARTS.values() for _, seen, s in part.setups
        if seen["rho"] == np.asarray(values, np.float64).tobytes()
    ]  # fmt: skip


def _n_setups(setup_module) -> int:
    return sum(len(part.setups) for part in setup_module._PARTS.values())


def test_repeated_sweep_reuses_its_setup_and_stays_exact(caplog, monkeypatch):
    # The second call hits the setup cache (nothing prepared again), yet gives the same
    # Dataset; a changed value (model, points, settings) is a new sweep.
    from difsim._sweep import _setup

    kw = dict(t0=0.0, t1=0.5, rtol=1e-8, atol=1e-8)
    spec = ds.ZipSweep({"rho": [5.0, 10.0, 15.0], "beta": [1.0, 2.0, 3.0]})
    _setup._PARTS.clear()
    first = ds.sweep(MODEL, spec, **kw)
    # A caller writing into its result must not reach the cached template.
    first["rho"].values[:] = -1.0
    first.attrs["engine"] = "edited"
    again = ds.sweep(MODEL, ds.ZipSweep({"rho": [5.0, 10.0, 15.0], "beta": [1.0, 2.0, 3.0]}), **kw)
    assert _n_setups(_setup) == 1
    np.testing.assert_array_equal(again.rho, [5.0, 10.0, 15.0])
    assert again.attrs["engine"] == "ensemble"
    np.testing.assert_array_equal(again.x, ds.sweep(MODEL, spec, **kw).x)
    # Each change gives its own setup and its own numbers (hash included).
    changed = [
        ds.sweep(MODEL.replace(sigma=11.0), spec, **kw),
        ds.sweep(MODEL, ds.ZipSweep({"rho": [5.0, 10.0, 16.0], "beta": [1.0, 2.0, 3.0]}), **kw),
        ds.sweep(MODEL, spec, **{**kw, "rtol": 1e-7}),
    ]
    assert _n_setups(_setup) == 4
    # New points of the same model and settings share what was derived from those.
    assert len(_setup._PARTS) == 3
    hashes = {out.attrs["sweep_hash"] for out in [again, *changed]}
    assert len(hashes) == 4
    alone = ds.simulate(MODEL.replace(sigma=11.0, rho=15.0, beta=3.0), t0=0.0, t1=0.5,
                        save="final", rtol=1e-8, atol=1e-8)  # fmt: skip
    np.testing.assert_allclose(changed[0].x[2], alone.ys["x"][-1], rtol=1e-10)
    # What the machine has room for is asked again on a repeat: a cached setup does not
    # skip the memory check (here: results of 3 points under a 16-byte limit).
    monkeypatch.setenv("DIFSIM_MEMORY_LIMIT", "16B")
    with pytest.raises(ds.ResourceError, match="spec: "):
        ds.sweep(MODEL, spec, **kw)
    monkeypatch.delenv("DIFSIM_MEMORY_LIMIT")
    # A cached fallback still says why, every time.
    with caplog.at_level("INFO", logger="difsim"):
        for _ in range(2):
            ds.sweep(MODEL, spec, t0=0.0, t1=0.5, solver="kvaerno5")
    assert caplog.text.count("Kvaerno5 has no ensemble kernel") == 2


def test_in_memory_ensemble_chunks_follow_the_memory_budget():
    from difsim._sweep import choose_chunk_size

    # Stored or shown chunk by chunk: at most 65,536 lanes per device, balanced.
    assert choose_chunk_size(10**5, 1, 900, 2**30, ensemble=True) == 50_000
    # Held in memory without a bar: as large as the budget allows (here all of it) ...
    assert choose_chunk_size(10**5, 1, 900, 2**30, ensemble=True, in_memory=True) == 10**5
    # ... and balanced when the budget splits it (3 chunks of 33,334 under 40,000).
    assert choose_chunk_size(10**5, 1, 1000, 40_000_000, ensemble=True, in_memory=True) == 33_334
    assert choose_chunk_size(10**5, 8, 900, 2**30, ensemble=True, in_memory=True) == 10**5
