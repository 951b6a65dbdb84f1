"""Configs written as TOML (tomli-w): every value difsim stores reads back unchanged."""

import math
import tomllib

import pytest
import tomli_w

from difsim._config import ConfigError, load_config

from .helpers import with_key

BASE = {
    "model": {"name": "lorenz", "parameters": {"rho": 28.0}, "state": {"x": 1.0}},
    "time": {"t0": 0.0, "t1": 1.0, "save": [0.0, 0.25, 1.0]},
    "solver": {"name": "tsit5", "rtol": 1e-8, "atol": 1e-300, "dtype": "float64"},
}


def test_the_writer_round_trips_awkward_values():
    # What `Experiment.to_toml` hands to tomli-w: escapes, control characters, non-ASCII,
    # signed zero, extreme and non-finite floats, mixed lists, keys that need quotes.
    data = {
        "a": {
            "text": 'quote " back \\ tab\t nl\n del\x7f bell\x07 ünï 🙂',
            "t": True,
            "f": False,
            "i": -3,
            "x": 1e-300,
            "y": 0.1,
            "z": -0.0,
            "big": 1e16,
            "inf": math.inf,
            "list": [1.0, 2, "s"],
            "odd key": 1,
        },
        "b": {"c": {"d": 1}},
    }
    back = tomllib.loads(tomli_w.dumps(data))
    assert back == data
    assert math.copysign(1.0, back["a"]["z"]) == -1.0
    assert math.isnan(tomllib.loads(tomli_w.dumps({"s": {"v": math.nan}}))["s"]["v"])


def test_experiment_to_toml_loads_back_equal():
    raw = with_key(BASE, "output", {"path": 'runs/ünï "q" \\ x.nc'})
    raw = with_key(raw, "sweep", {"rho": [0.5, 1e-12, 28.0], "state.x": [1.0, -0.0]})
    exp = load_config(raw)
    text = exp.to_toml()
    assert text == tomli_w.dumps(exp.to_dict())
    assert tomllib.loads(text) == exp.to_dict()
    assert load_config(tomllib.loads(text)) == exp
    assert exp.output.path == 'runs/ünï "q" \\ x.nc'


def test_error_messages_show_values_on_one_line():
    with pytest.raises(ConfigError) as info:
        load_config(with_key(BASE, "solver.rtol", [1e-6, "tight"]))
    assert '[1e-06, "tight"] (a list)' in str(info.value) and "\n" not in str(info.value)
