"""The learned terms of a fit's outputs (`difsim._fit._learned`, `[fit.network.<field>]
reference`): the stored `learned_<field>` equals the fitted network evaluated directly on an
input grid spanning what the fitted trajectory gives it, `reference_<field>` equals the
declared function there, the netCDF keeps both and the PNG draws them; a bad reference is
an error naming its key, raised before any training."""

import sys
import tomllib
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from scipy.integrate import solve_ivp

import difsim as ds
from difsim._app._run import execute
from difsim._config._load import ConfigError, load_config
from difsim._plot._fit import estimates_text

from .config_helpers import config_error
from .helpers import with_key

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "experiments" / "learned_friction.toml"
DATA = ROOT / "data" / "damped_oscillator.csv"
sys.path.insert(0, str(ROOT / "experiments"))
from learned_friction import true_friction  # noqa: E402


def example_config(steps: int = 3) -> dict:
    raw = tomllib.loads(EXAMPLE.read_text())
    raw["model"]["name"] = str(ROOT / "experiments" / "learned_friction.py") + ":LearnedFriction"
    raw["fit"]["data"] = str(DATA)
    raw["fit"]["steps"] = steps
    return raw


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The shipped config, 3 Adam steps: its run (with the FitResult) and netCDF."""
    raw = example_config()
    path = tmp_path_factory.mktemp("learned") / "friction.nc"
    raw["output"]["path"] = str(path)
    return execute(load_config(raw)), xr.open_dataset(path)


def numpy_network(out: xr.Dataset):
    """The fitted 1-4-1 tanh network, from the weights in the netCDF file (NumPy)."""
    w = {k.removeprefix("fitted_friction_layers_"): out[k].values
         for k in out.data_vars if k.startswith("fitted_friction_")}  # fmt: skip
    return lambda v: (
        np.tanh(np.outer(v, w["0_weight"][:, 0]) + w["0_bias"]) @ w["1_weight"][0] + w["1_bias"][0]
    )


def test_learned_term_is_the_network_on_the_visited_range(run):
    out = run[1]
    grid = out["friction_input"].values
    assert grid.shape == (101,)
    f = numpy_network(out)
    # The range of v along the fitted trajectory: SciPy, the network in NumPy.
    sol = solve_ivp(lambda t, y: [y[1], -4.0 * y[0] + f([y[1]])[0]], (0.0, 10.0), [1.0, 0.0],
                    rtol=1e-11, atol=1e-12, dense_output=True)  # fmt: skip
    v = sol.sol(out["time_curve"].values)[1]  # at the fitted curve's times
    np.testing.assert_allclose([grid[0], grid[-1]], [v.min(), v.max()], atol=1e-7)
    assert out["friction_input"].attrs["units"] == "m/s"  # the input is the state's v
    assert out["friction_input"].attrs["state_variable"] == "v"
    np.testing.assert_allclose(out["learned_friction"].values[:, 0], f(grid), rtol=1e-12)
    np.testing.assert_allclose(out["reference_friction"].values[:, 0], -0.3 * grid, rtol=1e-15)
    assert out["reference_friction"].attrs["long_name"] == "reference friction (true_friction)"
    assert out["learned_friction"].attrs["units"] == "m/s^2"  # the table's `units`
    assert out["reference_friction"].attrs["units"] == "m/s^2"
    rms = np.sqrt(np.mean((f(grid) + 0.3 * grid) ** 2))
    assert out["learned_friction"].attrs["rms_error_vs_reference"] == pytest.approx(rms)
    # Only the network's weights count as its free values in the estimates' text.
    assert "friction: 13 values" in "\n".join(estimates_text(out))


def test_png_draws_the_learned_term_from_the_file(run):
    assert run[0].plot.is_file()
    figure = ds.plot(run[1])  # reproducible from the file alone
    axes = {ax.get_title(): ax for ax in figure.axes}
    ax = next(a for t, a in axes.items() if t.startswith("learned friction (rms error vs"))
    learned, reference = ax.get_lines()
    np.testing.assert_array_equal(learned.get_ydata(), run[1]["learned_friction"].values[:, 0])
    np.testing.assert_allclose(reference.get_ydata(), -0.3 * learned.get_xdata(), rtol=1e-15)
    assert ax.get_xlabel() == "v [m/s]"
    assert ax.get_ylabel() == "friction [m/s^2]"


def test_bad_references_in_python(run):
    result = run[0].fit
    with pytest.raises(ValueError, match="reference of network 'friction': returns 2 values"):
        result.to_xarray(references={"friction": lambda v: jnp.concatenate([v, v])})
    with pytest.raises(ValueError, match="'omega' is not a free network of the fit"):
        result.to_xarray(references={"omega": true_friction})
    with pytest.raises(ValueError, match="reference of 'friction': evaluating it"):
        result.to_xarray(references={"friction": lambda v: v @ jnp.ones((3, 3))})


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("no_such_function", "has no function 'no_such_function'"),
        (3, 'expected "function"'),
        ("LearnedFriction", "is a class, not a function"),
        (str(ROOT / "experiments" / "missing.py") + ":f", "does not exist"),
        (("units", 3), 'expected a string ("m/s^2")'),
    ],
)
def test_bad_reference_names_are_config_errors(value, fragment):
    key, value = value if isinstance(value, tuple) else ("reference", value)
    raw = with_key(example_config(), f"fit.network.friction.{key}", value)
    error = config_error(raw)
    assert error.key == f"fit.network.friction.{key}"
    assert fragment in str(error), str(error)


def test_reference_of_the_wrong_size_fails_before_training(tmp_path):
    file = tmp_path / "refs.py"
    file.write_text("def two(v):\n    return [v[0], v[0]]\n")
    raw = with_key(example_config(), "fit.network.friction.reference", f"{file}:two")
    raw["output"]["path"] = str(tmp_path / "friction.nc")
    with pytest.raises(ConfigError, match="returns 2 value") as info:
        ds.run_config(raw)
    assert info.value.key == "fit.network.friction.reference"
    assert not (tmp_path / "friction.nc").exists()


def test_reference_file_is_relative_to_the_config(tmp_path):
    (tmp_path / "truth.py").write_text("def friction(v):\n    return -0.3 * v\n")
    text = EXAMPLE.read_text().replace('"true_friction"', '"truth.py:friction"')
    text = text.replace('"learned_friction.py:', f'"{ROOT / "experiments"}/learned_friction.py:')
    text = text.replace('"../data/damped_oscillator.csv"', f'"{DATA}"')
    (tmp_path / "sub").mkdir()
    config = tmp_path / "sub" / "friction.toml"
    config.write_text(text.replace('"truth.py:', '"../truth.py:'))
    spec = load_config(config).fit.network["friction"]
    assert spec["reference"] == f"{tmp_path / 'truth.py'}:friction"


def test_network_of_two_inputs_is_evaluated_where_the_trajectory_goes():
    from .helpers import UDE

    model = UDE()
    w = [(np.asarray(layer.weight), np.asarray(layer.bias)) for layer in model.net.layers]

    def net(x):  # the 2-5-5-2 tanh network in NumPy, one row per input
        for i, (a, b) in enumerate(w):
            x = x @ a.T + b
            x = np.tanh(x) if i < len(w) - 1 else x
        return x

    def rhs(t, y):
        nn = net(y[None])[0]
        return [1.3 * y[0] + nn[0], -1.8 * y[1] + nn[1]]

    times = np.linspace(0.0, 2.0, 9)
    y0 = [0.44249296, 4.6280594]
    sol = solve_ivp(rhs, (0.0, 2.0), y0, rtol=1e-12, atol=1e-12, dense_output=True)
    data = xr.Dataset({n: ("time", sol.sol(times)[i]) for i, n in enumerate("uv")},
                      coords={"time": times})  # fmt: skip
    result = ds.fit(model, data, {"net": "identity"}, optimizer="adam", steps=0,
                    rtol=1e-10, atol=1e-10, progress=False)  # fmt: skip
    out = result.to_xarray(points=21, references={"net": lambda x: -x})
    inputs = out["net_inputs"].values  # (samples, 2): (u, v) at the curve's times
    np.testing.assert_allclose(out["net_time"].values, out["time_curve"].values)
    np.testing.assert_allclose(inputs, sol.sol(out["time_curve"].values).T, rtol=1e-8)
    np.testing.assert_allclose(out["learned_net"].values, net(inputs), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(out["reference_net"].values, -inputs)
