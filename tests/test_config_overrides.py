"""Experiment configs: command-line overrides, and round trips through dicts and TOML
(no solving)."""

import dataclasses
import tomllib

import numpy as np
import pytest

from difsim._config._load import ConfigError, apply_overrides, load_config, parse_override

from .config_helpers import BASE, base_with, config_error


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("solver.rtol=1e-8", "solver.rtol", 1e-8),
        ("model.parameters.rho=20", "model.parameters.rho", 20),
        ("output.plot=false", "output.plot", False),
        ("time.save=[0.0, 0.5]", "time.save", [0.0, 0.5]),
        ('model.name="lorenz"', "model.name", "lorenz"),
        ("model.name=lorenz", "model.name", "lorenz"),  # not TOML: a bare string
        ("time.save=final", "time.save", "final"),
        ("output.path=runs/a b.nc", "output.path", "runs/a b.nc"),
        ("solver.rtol = 1e-9 ", "solver.rtol", 1e-9),
        ("output.path=1\nx = 2", "output.path", "1\nx = 2"),  # one value, never two keys
    ],
)
def test_parse_override(text, key, value):
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["solver.rtol", "=1", "solver..rtol=1", ".rtol=1"])
def test_parse_override_rejects_malformed(text):
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override(text)


def test_overrides_apply_and_are_checked_like_the_file():
    exp = load_config(
        BASE,
        overrides={
            "solver.rtol": 1e-10,
            "model.parameters.rho": 20,
            "model.parameters.beta": 2.0,
            "time.save": "final",
        },
    )
    assert exp.solver.rtol == 1e-10 and exp.time.save == "final"
    assert exp.model.parameters == {"rho": 20, "beta": 2.0}
    assert BASE["solver"]["rtol"] == 1e-8  # the source is not mutated
    error = config_error(BASE, overrides={"solver.rtoll": 1.0})
    assert error.key == "solver.rtoll" and "'rtol'?" in str(error)
    assert "set by override solver.rtoll" in str(error)
    error = config_error(BASE, overrides={"model.parameters.rho": "high"})
    assert "[model.parameters] rho" in str(error) and '"high" (a string)' in str(error)
    error = config_error(BASE, overrides={"solver.rtol.x": 1.0})
    assert "solver.rtol is 1e-08 (a number), not a table" in str(error)
    # Overrides may create a section the file leaves out.
    raw = {k: v for k, v in BASE.items() if k != "solver"}
    assert load_config(raw, overrides={"solver.name": "dopri5"}).solver.name == "dopri5"


def test_apply_overrides_creates_tables():
    assert apply_overrides({}, {"a.b.c": 1}) == {"a": {"b": {"c": 1}}}


def test_round_trip_dict_and_toml(tmp_path):
    exp = load_config(base_with("time.save", [0.0, 0.25, 1.0]))
    again = load_config(exp.to_dict())
    assert again == exp
    text = exp.to_toml()
    assert tomllib.loads(text) == exp.to_dict()
    path = tmp_path / "again.toml"
    path.write_text(text)
    from_file = load_config(path)
    # A file's relative paths are relative to its folder (a dict's, to the current one).
    assert from_file.output.path == str(tmp_path / exp.output.path)
    same = dataclasses.replace(from_file, output=exp.output)
    assert same == exp and from_file.source == str(path)
    assert load_config(exp, overrides={"solver.atol": 1e-3}).solver.atol == 1e-3
    # numpy values and tuples from Python are accepted and normalised.
    raw = base_with("time.save", np.array([0.0, 0.5]))
    raw["solver"]["rtol"] = np.float64(1e-7)
    assert load_config(raw).time.save == (0.0, 0.5)
