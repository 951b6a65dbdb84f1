"""Experiment configs, `[sweep]`: every form of entry and setting parses into the sweep
spec, and round-trips (no solving)."""

import tomllib

import numpy as np
import pytest

from difsim._config._load import load_config

from .config_helpers import BASE, base_with, config_error


def test_sweep_section_parses_every_form():
    raw = base_with(
        "sweep",
        {
            "rho": {"linspace": [0.0, 21.0, 4]},
            "sigma": {"logspace": [1.0, 100.0, 3]},
            "state": {"x": [1.0, 2.0]},  # as written by `state.x = [1.0, 2.0]`
            "keep": ["x_max", "z_final"],
            "memory_budget": "256MiB",
        },
    )
    exp = load_config(raw)
    assert exp.sweep.kind == "grid" and exp.sweep.keep == ("x_max", "z_final")
    # The dotted spelling before 0.1 still runs: respelled, with a warning naming the key.
    raw["sweep"]["keep"] = ["x.max", "z_final"]
    with pytest.warns(DeprecationWarning, match=r"^sweep\.keep: 'x\.max' is spelled 'x_max'"):
        assert load_config(raw) == exp
    assert list(exp.sweep.entries) == ["rho", "sigma", "state.x"]
    spec = exp.sweep.build()
    assert spec.dims == ("rho", "sigma", "state.x") and spec.shape == (4, 3, 2)
    np.testing.assert_allclose(spec.values["sigma"], [1.0, 10.0, 100.0], rtol=1e-12)
    assert load_config(exp.to_dict()) == exp
    assert load_config(tomllib.loads(exp.to_toml())) == exp
    # A quoted "state.x" key is the same as the dotted one.
    quoted = load_config(base_with("sweep", {"rho": [1.0], "state.x": [1.0, 2.0]}))
    assert list(quoted.sweep.entries) == ["rho", "state.x"]
    lhs = load_config(
        base_with("sweep", {"kind": "lhs", "samples": 50, "rho": {"uniform": [0, 21]}})
    ).sweep
    assert (lhs.seed, lhs.dim, lhs.keep) == (0, "sample", "final")  # defaults stored
    draws = lhs.build().draws()["rho"]
    assert sorted(np.floor(draws / 21 * 50).astype(int)) == list(range(50))
    # Without [sweep], no sweep; `keep = "trajectory"` needs saved times.
    assert load_config(BASE).sweep is None
    bad = base_with("sweep", {"rho": [1.0], "keep": "trajectory"})
    bad["time"]["save"] = "final"
    error = config_error(bad)
    assert error.key == "sweep.keep" and "save = n" in str(error)
