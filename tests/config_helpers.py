"""Shared by the config tests (tests/test_config*.py): a valid base config and ways to
change it and to catch the error it gives."""

from pathlib import Path

import pytest

from difsim._config._load import ConfigError, load_config

from .helpers import with_key

ROOT = Path(__file__).resolve().parents[1]
BASE = {
    "model": {"name": "lorenz", "parameters": {"rho": 28.0}, "state": {"x": 1.0}},
    "time": {"t0": 0.0, "t1": 1.0, "save": 11},
    "solver": {"name": "tsit5", "rtol": 1e-8, "atol": 1e-8, "dtype": "float64"},
    "output": {"path": "runs/lorenz.nc"},
}


def base_with(path: str, value):
    """BASE with the dotted key `path` set to `value` (or removed, for `...`)."""
    return with_key(BASE, path, value)


def config_error(raw, **kw) -> ConfigError:
    """The `ConfigError` that loading `raw` (with keywords `kw`) raises."""
    with pytest.raises(ConfigError) as info:
        load_config(raw, **kw)
    return info.value
