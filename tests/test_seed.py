"""Seeds are checked by one helper (`difsim._core.check_seed`) wherever they enter: a seed of
2**63 or more used to reach `jax.random.key` and fail there as a raw `OverflowError` or JAX
`TypeError` (issue 14, point 10)."""

from pathlib import Path

import jax
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._config import ConfigError, load_config
from difsim._core import check_seed
from difsim._fit._multistart import multistart_spec

ROOT = Path(__file__).resolve().parents[1]
BAD = [2**63, 2**64, -1, True, 1.5, "7", None]


@pytest.mark.parametrize("bad", BAD)
def test_check_seed_refuses_what_jax_random_key_cannot_take(bad):
    with pytest.raises(ValueError, match=r"^seed must be an integer from 0 to 2\*\*63 - 1"):
        check_seed(bad)


def test_the_largest_seed_is_usable():
    largest = check_seed(np.int64(2**63 - 1))
    assert largest == 2**63 - 1 and isinstance(largest, int)
    jax.random.key(largest)  # what the bound is for: this takes it


@pytest.mark.parametrize("bad", [2**63, -1, True])
def test_simulated_moments_checks_its_seed(bad):
    with pytest.raises(ValueError, match=r"^SimulatedMoments: seed must be an integer from 0"):
        ds.SimulatedMoments(seed=bad)


def test_multistart_takes_a_checked_seed_or_a_key():
    with pytest.raises(ValueError, match=r"^multistart's seed must be an integer from 0"):
        multistart_spec((4, 2**63))
    with pytest.raises(TypeError, match=r"key must be a jax.random.key\(\.\.\.\) or an integer"):
        multistart_spec((4, 1.5))
    with pytest.raises(ValueError, match=r"scale must be finite and > 0, got -1.0"):
        multistart_spec((4, 0, -1.0))
    # An integer seed is the key jax.random.key(seed) makes: the same starts.
    n, key, scale = multistart_spec((4, 5))
    assert (n, scale) == (4, 0.3)
    same = jax.random.key_data(jax.random.key(5))
    np.testing.assert_array_equal(jax.random.key_data(key), same)


def test_fit_checks_the_multistart_seed_before_any_work():
    # (Refused before anything is simulated, so the data need not be a solution.)
    data = xr.Dataset({"prey": ("time", np.linspace(30.0, 20.0, 5))}, {"time": np.arange(5.0)})
    with pytest.raises(ValueError, match=r"^multistart's seed must be an integer from 0"):
        ds.fit(ds.models.LotkaVolterra(), data, {"alpha": ds.Positive()}, multistart=(2, 2**63))


@pytest.mark.parametrize("bad", [2**63, -1])
def test_a_config_fit_seed_is_checked(bad):
    config = {
        "model": {"name": "sir"},
        "fit": {
            "data": str(ROOT / "data" / "influenza.nc"),
            "t0": 0.0,
            "free": {"beta": "positive"},
            "observe": {"confined_to_bed": "I"},
            "multistart": 2,
            "seed": bad,
        },
    }
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert info.value.key == "fit.seed"
    assert "an integer from 0 to 2**63 - 1" in str(info.value)
