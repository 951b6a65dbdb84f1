"""Configs build their objects once, at the boundary (issue 10): an `Experiment` is not
checked again, solver settings are resolved once, the sweep spec, memory budget and fit
defaults are made when the config is parsed, and the run hands those objects on."""

import numpy as np
import pytest

from difsim._app import _run as run_module
from difsim._config import _solver as solver_module
from difsim._config._load import load_config
from difsim.models import MODELS

from .config_helpers import BASE, ROOT, base_with as _with
from .helpers import with_key


def test_a_checked_experiment_is_not_checked_again(monkeypatch):
    exp = load_config(BASE)
    calls = []
    monkeypatch.setattr(
        "difsim._config._load.check_section", lambda *a: calls.append(a) or {}, raising=True
    )
    assert load_config(exp) is exp and calls == []
    monkeypatch.undo()
    again = load_config(exp, overrides={"solver.rtol": 1e-9})
    assert again is not exp and again.solver.rtol == 1e-9 and exp.solver.rtol == 1e-8


def test_solver_settings_are_resolved_once_per_config(monkeypatch):
    calls = []
    real = solver_module.resolve_solver_settings

    def counting(cls, **given):
        calls.append(cls)
        return real(cls, **given)

    monkeypatch.setattr(solver_module, "resolve_solver_settings", counting)
    sweep = _with("sweep", {"rho": [1.0, 2.0]})
    load_config(sweep)
    assert calls == [MODELS["lorenz"]]


def test_sweep_spec_and_memory_budget_are_built_when_parsed():
    exp = load_config(
        _with("sweep", {"kind": "zip", "rho": [1.0, 2.0], "sigma": {"linspace": [0, 1, 2]},
                        "memory_budget": "256MiB"})
    )  # fmt: skip
    spec = exp.sweep.spec
    assert exp.sweep.build() is spec and exp.sweep.build() is spec
    assert type(spec).__name__ == "ZipSweep" and spec.dim == "sample"
    np.testing.assert_array_equal(spec.values["sigma"], [0.0, 1.0])
    assert exp.sweep.budget == 256 * 1024 * 1024
    assert exp.sweep.memory_budget == "256MiB"  # as written, for to_dict
    assert load_config(_with("sweep", {"rho": [1.0], "memory_budget": 4096})).sweep.budget == 4096
    assert load_config(_with("sweep", {"rho": [1.0]})).sweep.budget is None


def test_run_hands_the_parsed_sweep_to_run_sweep(monkeypatch, tmp_path):
    exp = load_config(_with("sweep", {"rho": [1.0, 2.0], "memory_budget": "1KiB"}))
    seen = {}

    class Stop(Exception):
        pass

    def fake_run_sweep(model, spec, **kwargs):
        seen.update(kwargs, spec=spec)
        raise Stop

    monkeypatch.setattr(run_module, "run_sweep", fake_run_sweep)
    with pytest.raises(Stop):
        # An output of its own: the config's default path may hold another run's output.
        run_module.execute(exp, output=tmp_path / "sweep.nc", plot=False)
    assert seen["spec"] is exp.sweep.spec and seen["memory_budget"] == 1024
    assert (seen["rtol"], seen["atol"], seen["solver"]) == (1e-8, 1e-8, "tsit5")
    assert (seen["t0"], seen["t1"], seen["save"]) == (0.0, 1.0, 11)


def test_fit_defaults_are_filled_in_when_parsed():
    fit = {
        "model": {"name": "sir", "parameters": {"beta": 1.0, "gamma": 0.5}},
        "fit": {
            "data": str(ROOT / "data" / "influenza.nc"),
            "free": {"beta": "positive"},
            "observe": {"confined_to_bed": "I"},
            "multistart": 3,
            "multiple_shooting": 4,
            "shooting_penalty": 2.5,
        },
    }
    exp = load_config(fit)
    assert (exp.fit.seed, exp.fit.multistart_scale) == (0, 0.3)
    assert exp.to_dict()["fit"]["seed"] == 0 and exp.to_dict()["fit"]["multistart_scale"] == 0.3
    shooting = exp.fit.shooting
    assert (shooting.segments, shooting.penalty) == (4, 2.5)
    assert exp.fit.kwargs()["multiple_shooting"] is shooting
    assert load_config(exp.to_dict()) == exp
    plain = load_config(with_key(fit, "fit.multistart", ...))
    assert plain.fit.seed is None and plain.fit.multistart_scale is None
