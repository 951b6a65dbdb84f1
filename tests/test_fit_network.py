"""Networks declared in configs (`difsim._fit._network`, `[fit.network.<field>]`): the
shipped example `experiments/learned_friction.toml` trains a friction network and its
outputs hold the learned force, checked against the data's true friction -0.3 v; bad
network tables get errors naming their key."""

import tomllib
from pathlib import Path

import jax
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._fit._network import ACTIVATIONS, make_network

from .config_helpers import config_error
from .helpers import with_key

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "experiments" / "learned_friction.toml"


def example_config() -> dict:
    raw = tomllib.loads(EXAMPLE.read_text())
    raw["model"]["name"] = str(ROOT / "experiments" / "learned_friction.py") + ":LearnedFriction"
    raw["fit"]["data"] = str(ROOT / "data" / "damped_oscillator.csv")
    return raw


def test_shipped_example_learns_the_friction(tmp_path):
    raw = example_config()
    raw["output"]["path"] = str(tmp_path / "friction.nc")
    returned = ds.run_config(raw)
    assert returned.attrs["status"] == "completed"
    assert (tmp_path / "friction.png").is_file()
    out = xr.open_dataset(tmp_path / "friction.nc")
    weights = {k: out[k].values for k in out.data_vars if k.startswith("fitted_friction_")}
    assert sorted(weights) == sorted(
        f"fitted_friction_layers_{i}_{w}" for i in (0, 1) for w in ("weight", "bias")
    )
    assert out["fitted_friction_layers_0_weight"].shape == (4, 1)  # width 4, from the config
    v = np.linspace(-1.5, 1.5, 13)[:, None]
    hidden = np.tanh(v @ weights["fitted_friction_layers_0_weight"].T
                     + weights["fitted_friction_layers_0_bias"])  # fmt: skip
    force = hidden @ weights["fitted_friction_layers_1_weight"].T
    force = force[:, 0] + weights["fitted_friction_layers_1_bias"][0]
    # Adam, 1500 steps on 1 % noise: the force within 0.03 of -0.3 v (up to 0.45) for |v| <= 1.5.
    assert np.max(np.abs(force + 0.3 * v[:, 0])) < 0.03
    assert out["loss_history"].shape == (1500,)
    assert out["loss_history"].values[-1] < 0.05 * out["loss_history"].values[0]


def test_network_is_built_from_its_table():
    net = make_network(2, 3, {"width": 5, "depth": 3, "activation": "rbf", "seed": 7})
    assert (net.in_size, net.out_size, net.width_size, net.depth) == (2, 3, 5, 3)
    assert net.activation is ACTIVATIONS["rbf"]
    x = jax.numpy.array([0.5, -2.0])
    np.testing.assert_allclose(ACTIVATIONS["rbf"](x), np.exp(-np.array([0.25, 4.0])))
    again = make_network(2, 3, {"width": 5, "depth": 3, "activation": "rbf", "seed": 7})
    np.testing.assert_array_equal(net.layers[0].weight, again.layers[0].weight)  # the seed


@pytest.mark.parametrize(
    "path, value, key, fragment",
    [
        ("fit.network.friction.activation", "tanhh", "fit.network.friction.activation",
         "'tanh'?"),
        ("fit.network.friction.widht", 4, "fit.network.friction.widht", "'width'?"),
        ("fit.network.friction.depth", -1, "fit.network.friction.depth", "integer >= 0"),
        ("fit.network.friction.width", 0, "fit.network.friction.width", "integer >= 1"),
        ("fit.network.omega", {"width": 4}, "fit.network.omega", "give in_size"),
        ("fit.network.drag", {"width": 4}, "fit.network.drag", "no parameter 'drag'"),
        ("fit.network.friction", 4, "fit.network.friction", "expected a table"),
    ],
)  # fmt: skip
def test_bad_network_tables(path, value, key, fragment):
    error = config_error(with_key(example_config(), path, value))
    assert error.key == key
    assert fragment in str(error), str(error)
