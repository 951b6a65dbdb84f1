"""Model.solver_defaults: the caller's settings win, then the model's, then difsim's."""

import numpy as np
import pytest

import difsim as ds
from difsim._core._solver_defaults import resolve_solver_settings

from .pde_helpers import Heat1D, ReactionDiffusion


def test_resolution_order():
    got = resolve_solver_settings(Heat1D)
    assert got == dict(
        solver="heun", dt0=1e-4, controller="constant", rtol=1e-9, atol=1e-6, max_steps=16384
    )
    # Another solver drops the model's step settings (tied to its own solver) but keeps rtol.
    got = resolve_solver_settings(Heat1D, solver="tsit5")
    assert (got["dt0"], got["controller"], got["rtol"]) == (None, None, 1e-9)
    got = resolve_solver_settings(Heat1D, solver="heun", dt0=5e-5, rtol=1e-3)
    assert (got["dt0"], got["controller"], got["rtol"]) == (5e-5, "constant", 1e-3)
    assert resolve_solver_settings(ReactionDiffusion)["solver"] == "tsit5"


def test_simulate_uses_model_defaults():
    sol = ds.simulate(Heat1D(), t0=0.0, t1=0.01, save="final")
    assert sol.solver == "Heun"
    assert int(sol.num_steps) == 100  # t1 / dt0 fixed steps
    lam = 4 * np.sin(np.pi / 32) ** 2 * 32**2
    np.testing.assert_allclose(sol.ys["u"][-1].max(), np.exp(-lam * 0.01), rtol=1e-4)
    adaptive = ds.simulate(Heat1D(), t0=0.0, t1=0.01, save="final", solver="tsit5")
    assert adaptive.solver == "Tsit5" and int(adaptive.num_steps) != 100


def test_bad_solver_defaults_name_the_key():
    class Bad(Heat1D):
        solver_defaults = {"solver": "heun", "step": 0.1}

    with pytest.raises(ValueError, match="Bad.solver_defaults has unknown key 'step'"):
        ds.simulate(Bad(), t0=0.0, t1=0.01)
