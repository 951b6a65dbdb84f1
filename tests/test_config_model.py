"""Experiment configs, `[model]`: parameters and initial state applied to the built model,
user models from modules, and their constructor's errors (no solving)."""

import jax.numpy as jnp
import numpy as np
import pytest

from difsim._config._load import ConfigError, load_config

from .config_helpers import BASE, config_error


def test_model_build_applies_parameters_and_state():
    exp = load_config(BASE, overrides={"model.parameters.rho": 20, "model.state.y": 2.0})
    model = exp.model.build()
    assert float(model.rho) == 20.0 and float(model.sigma) == 10.0
    state = model.initial_state()
    assert (state.x, state.y, state.z) == (1.0, 2.0, 0.0)


USER_MODULE = '''
import jax.numpy as jnp
import difsim as ds

class Chain(ds.Model):
    """A chain of four decaying cells (a user model outside difsim)."""
    w: jnp.ndarray
    k: float = 1.0
    state = ds.State(u=ds.Var(jnp.zeros(4)), c=0.0)

    def rhs(self, t, s):
        return dict(u=-self.k * s.u, c=0.0 * s.c)

class Picky(ds.Model):
    rho: float = 1.0
    state = ds.State(x=0.0)

    def __check_init__(self):
        if self.rho < 0:
            raise ValueError("rho must be non-negative")

    def rhs(self, t, s):
        return dict(x=-self.rho * s.x)
'''


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    (tmp_path / "difsim_test_user_models.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "difsim_test_user_models"


def test_user_model_reference_and_array_state(user_models):
    raw = {
        "model": {
            "name": f"{user_models}:Chain",
            "parameters": {"w": [1.0, 2.0]},
            "state": {"u": 1.5},
        },
        "time": {"t1": 1.0},
    }
    exp = load_config(raw)
    assert exp.model.cls.__name__ == "Chain"
    model = exp.model.build()
    np.testing.assert_array_equal(model.initial_state().u, jnp.full(4, 1.5))
    np.testing.assert_array_equal(model.w, [1.0, 2.0])
    raw["model"]["state"]["u"] = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(
        load_config(raw).model.build().initial_state().u, [1.0, 2.0, 3.0, 4.0]
    )
    raw["model"]["state"]["u"] = [1.0, 2.0]
    error = config_error(raw)
    assert error.key == "model.state.u" and "(4,)" in str(error) and "(2,)" in str(error)
    raw["model"]["state"]["u"] = [[1.0, 2.0], [3.0]]
    assert "[model.state] u: expected a number or a list of shape (4,)" in str(config_error(raw))
    del raw["model"]["parameters"]
    raw["model"]["state"] = {}
    error = config_error(raw)
    assert error.key == "model.parameters.w" and "Chain has no default for 'w'" in str(error)


def test_model_constructor_errors_become_config_errors(user_models):
    exp = load_config(
        {"model": {"name": f"{user_models}:Picky", "parameters": {"rho": -1}}, "time": {"t1": 1.0}}
    )
    with pytest.raises(ConfigError, match=r"^\[model\]: Picky rejected .*non-negative"):
        exp.model.build()
