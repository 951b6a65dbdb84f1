"""`ds.sweep(engine=...)` and `[sweep] engine`: which engine integrates a sweep, what the
output records, and that both engines give the same numbers."""

import tomllib

import jax
import numpy as np
import pytest

import difsim as ds
from difsim._config import ConfigError, load_config

MODEL = ds.models.Lorenz()
SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 24)})
KW = dict(t0=0.0, t1=1.0, save=11, keep=["x.max", "z.mean", "y.final"], rtol=1e-9, atol=1e-9)


def test_auto_takes_the_ensemble_engine_and_agrees_with_diffrax():
    ens = ds.sweep(MODEL, SPEC, **KW)
    ref = ds.sweep(MODEL, SPEC, engine="diffrax", **KW)
    assert ens.attrs["engine"] == "ensemble" and "engine_fallback" not in ens.attrs
    assert ref.attrs["engine"] == "diffrax"
    # The engine is part of the sweep's identity (resumes never mix the two).
    assert ens.attrs["sweep_hash"] != ref.attrs["sweep_hash"]
    for name in ("x.max", "z.mean", "y.final"):
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
    np.testing.assert_allclose(ens["y.final"][7], alone.ys["y"][-1], rtol=1e-11)


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
