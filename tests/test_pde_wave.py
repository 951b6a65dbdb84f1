"""`Wave` (models/_wave.py) against exact solutions: standing waves (spatial order), d'Alembert's
travelling pulses and energy conservation through `simulate`.

Spatial orders compare the exact-in-time solution of the model's linear semi-discrete system
(`expm` of its Jacobian, built from `model.rhs`) with the exact standing wave, so no time
stepper enters.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import difsim as ds
from difsim.models import Wave


def _semi_discrete(model, t):
    """Exact solution `(u, v)` at time `t` of the model's linear semi-discrete system."""
    state = model.initial_state()
    y0 = np.stack([np.asarray(state.u), np.asarray(state.v)])

    @jax.jit
    def f(y):
        y = y.reshape(y0.shape)
        out = model.rhs(0.0, ds.State(u=y[0], v=y[1]))
        return jnp.concatenate([out["u"].ravel(), out["v"].ravel()])

    a = np.asarray(jax.jacfwd(f)(jnp.zeros(y0.size)))
    return (scipy.linalg.expm(t * a) @ y0.ravel()).reshape(y0.shape)


@pytest.mark.parametrize(
    ("bc", "order"), [("dirichlet", 2), ("periodic", 2), ("periodic", 4), ("dirichlet", 4)]
)
def test_standing_wave_spatial_order(bc, order):
    # u = sin(kx) cos(ckt), v = -ck sin(kx) sin(ckt): a fixed-end (k = π) or periodic
    # (k = 2π) mode; at ckt = 3π/4 both u and v carry the phase error to first order.
    c = 1.7
    k = np.pi if bc == "dirichlet" else 2 * np.pi
    t = 0.75 * np.pi / (c * k)
    ns = [16, 32, 64]
    errors = []
    for n in ns:
        grid = ds.Grid(n, 1.0, bc)
        x = grid.axis(0)
        model = Wave(c=c, grid=grid, order=order).replace(**{"state.u": np.sin(k * x)})
        exact = np.stack(
            [np.sin(k * x) * np.cos(c * k * t), -c * k * np.sin(k * x) * np.sin(c * k * t)]
        )
        errors.append(np.max(np.abs(_semi_discrete(model, t) - exact)))
    slope = -np.polyfit(np.log(ns), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.2, errors


def test_plucked_string_dalembert_and_energy():
    # The default model: a Gaussian pulse at rest splits into two halves moving at ±c
    # (d'Alembert); before they reach the fixed ends, u = [f(x - ct) + f(x + ct)] / 2.
    model = Wave()
    c, w = float(model.c), 0.05
    x = model.grid.axis(0)
    np.testing.assert_allclose(model.initial_state().u, np.exp(-(((x - 0.5) / w) ** 2)))
    ts = np.linspace(0.0, 0.3, 4)
    sol = ds.simulate(model, t=ts, solver="tsit5", rtol=1e-10, atol=1e-10)
    exact = 0.5 * (
        np.exp(-(((x - 0.5 - c * ts[-1]) / w) ** 2)) + np.exp(-(((x - 0.5 + c * ts[-1]) / w) ** 2))
    )
    error = np.max(np.abs(sol.ys["u"][-1] - exact))
    assert error < 2e-2
    # The discrete energy is conserved by the semi-discrete system (symmetric Laplacian):
    # only the time stepper's error remains. It approximates ∫(u_t² + c² u_x²)/2 dx.
    energy = np.asarray(model.energy(sol.ys))
    assert energy.shape == ts.shape
    np.testing.assert_allclose(energy, energy[0], rtol=1e-8)
    continuous = 0.5 * c**2 * np.sqrt(np.pi / 2) / w  # ∫ f'(x)² dx for the Gaussian
    assert abs(energy[0] / continuous - 1) < 1e-2
    data = sol.to_xarray()
    assert data["u"].dims == data["v"].dims == ("time", "x")
    np.testing.assert_array_equal(data["x"], model.grid.coords["x"])


def test_defaults_and_checks():
    model = Wave()
    assert model.grid.shape == (128,) and Wave.solver_defaults["solver"] == "tsit5"
    np.testing.assert_array_equal(model.initial_state().v, 0.0)
    set_v = model.replace(**{"state.v": 1.0}).initial_state()
    np.testing.assert_array_equal(set_v.v, np.ones(128))
    np.testing.assert_allclose(set_v.u, model.initial_state().u)  # the pulse stays
    with pytest.raises(ValueError, match="order must be 2 or 4"):
        Wave(order=6)
