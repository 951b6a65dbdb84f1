"""Experiment configs: parsing with defaults, required sections, files, the shipped
experiments and their documentation (no solving). Error messages per key, overrides and
round trips, `[model]` and `[sweep]` have their own files (tests/test_config_*.py)."""

from pathlib import Path

import pytest

from difsim._config._load import SECTIONS, Experiment, load_config
from difsim._core._solver_defaults import GLOBAL_DEFAULTS
from difsim.models import MODELS

from .config_helpers import BASE, ROOT, base_with, config_error


def test_valid_config_parses_with_defaults():
    exp = load_config(BASE)
    assert exp.model.cls is MODELS["lorenz"]
    assert exp.model.parameters == {"rho": 28.0}
    assert (exp.time.t0, exp.time.t1, exp.time.save) == (0.0, 1.0, 11)
    assert exp.solver.rtol == 1e-8 and exp.solver.dtype == "float64"
    # Defaults are filled in and resolved, so the stored config says exactly what ran.
    assert exp.solver.controller == "pid"
    assert exp.solver.max_steps == GLOBAL_DEFAULTS["max_steps"] == 16384
    assert exp.solver.adjoint == "checkpoint"
    assert exp.output.plot is True
    assert exp.output.paths() == (Path("runs/lorenz.nc"), Path("runs/lorenz.png"))
    assert exp.output.paths("a/b.nc") == (Path("a/b.nc"), Path("a/b.png"))


def test_stiff_model_defaults_to_kvaerno5():
    exp = load_config({"model": {"name": "robertson"}, "time": {"t1": 1.0}})
    assert exp.solver.name == "kvaerno5"
    assert exp.time.save == 101 and exp.output.path is None


def test_missing_sections_and_stray_keys():
    assert config_error({"time": {"t1": 1.0}}).key == "model"
    assert "missing required section" in str(config_error({"model": {"name": "lorenz"}}))
    raw = {**BASE, "name": "lorenz"}
    assert "top-level key 'name' belongs in a section" in str(config_error(raw))


def test_euler_with_pid_is_rejected_and_constant_step_accepted():
    raw = base_with("solver.name", "euler")
    raw["solver"]["controller"] = "pid"
    raw["solver"]["dt0"] = 0.01
    error = config_error(raw)
    assert error.key == "solver.controller" and "'euler'" in str(error)
    del raw["solver"]["controller"]
    assert load_config(raw).solver.controller == "constant"


def test_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.toml"
    assert str(missing) in str(config_error(missing)) and "not found" in str(config_error(missing))
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nname = lorenz\n")
    error = config_error(bad)
    assert str(bad) in str(error) and "invalid TOML" in str(error) and "line 2" in str(error)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nrtol = "1e-6"\n')
    assert str(config_error(wrong)).startswith(
        f"{wrong}: [solver] rtol: expected a positive number"
    )


@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments").glob("*.toml")), ids=lambda p: p.name
)
def test_shipped_experiments_validate(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # data paths ([fit] data) are relative to the current directory
    exp = load_config(path)
    assert isinstance(exp, Experiment) and exp.output.path is not None
    assert load_config(exp.to_dict()) == exp


def test_shipped_experiments_exist():
    names = {p.stem for p in (ROOT / "experiments").glob("*.toml")}
    assert {"lorenz", "robertson", "kepler"} <= names and len(names) >= 4


def test_docs_describe_every_key():
    text = (ROOT / "docs" / "configs.md").read_text()
    for section, spec in SECTIONS.items():
        assert f"[{section}]" in text, section
        for key in spec.keys:
            assert f"`{key}`" in text, f"docs/configs.md does not describe [{section}] {key}"
