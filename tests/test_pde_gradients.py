"""End-to-end gradients of PDE solves: w.r.t. a parameter and w.r.t. the initial field, vs
central finite differences; and an inverse problem through ds.fit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim.models import Heat

from .helpers import central_difference

GRID = ds.Grid.dirichlet(32, 0.1)
T1 = 2.0


def _final(model, **kw):
    return ds.simulate(model, t0=0.0, t1=T1, save="final", **kw).ys["u"][-1]


@pytest.mark.parametrize("adjoint", ["checkpoint", "forward"])
def test_gradient_wrt_diffusivity(adjoint):
    target = jnp.sin(jnp.pi * GRID.x / 0.1) * 0.5

    def loss(D):
        u = _final(Heat(D=D, grid=GRID), adjoint=adjoint)
        return jnp.sum((u - target) ** 2)

    # One compiled program gives the loss and its derivative (forward mode: a jvp, reverse
    # mode: value_and_grad); the finite differences read the loss off the same program.
    if adjoint == "forward":
        value_and_derivative = jax.jit(lambda D: jax.jvp(loss, (D,), (jnp.ones_like(D),)))
    else:
        value_and_derivative = jax.jit(jax.value_and_grad(loss))
    grad = value_and_derivative(jnp.asarray(1.11e-4))[1]
    fd = central_difference(lambda D: value_and_derivative(jnp.asarray(D))[0], 1.11e-4, h=1e-9)
    np.testing.assert_allclose(grad, fd, rtol=1e-6)


def test_gradient_wrt_initial_field():
    x = np.asarray(GRID.x)
    u0 = np.exp(-((x - 0.04) ** 2) / 2e-4)
    weight = jnp.asarray(np.linspace(0.0, 1.0, x.size))

    def loss(u0):
        return jnp.sum(weight * _final(Heat(grid=GRID).replace(**{"state.u": u0})) ** 2)

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one program for both
    grad = value_and_grad(jnp.asarray(u0))[1]
    # Directional derivative along a random direction vs central finite differences.
    direction = np.random.default_rng(1).standard_normal(x.size)
    fd = central_difference(
        lambda e: value_and_grad(jnp.asarray(u0 + e * direction))[0], 0.0, h=1e-5
    )
    np.testing.assert_allclose(np.dot(grad, direction), fd, rtol=1e-7)


def test_inverse_problem_recovers_diffusivity_from_noisy_sensors():
    """Three thermometers on a rod, noisy readings every 0.5 s: fit D (the issue's example)."""
    true = Heat(grid=GRID)
    times = np.linspace(0.0, 10.0, 21)
    sensors = {"T_a": 6, "T_b": 16, "T_c": 25}  # cell indices: x = 2.1, 5.2, 8.0 cm
    truth = ds.simulate(true, t=times).ys["u"]
    rng = np.random.default_rng(0)
    sigma = 0.01
    data = xr.Dataset(
        {name: ("time", np.asarray(truth[:, i]) + sigma * rng.standard_normal(times.size))
         for name, i in sensors.items()},
        coords={"time": times},
    )  # fmt: skip
    observe = {name: (lambda s, i=i: s.u[i]) for name, i in sensors.items()}
    start = Heat(D=0.6e-4, grid=GRID)
    result = ds.fit(start, data, free={"D": ds.Positive()}, observe=observe)
    D, se = float(result.parameters["D"]), float(result.stderr["D"])
    assert abs(D - 1.11e-4) < 3 * se and se < 0.02 * 1.11e-4
    # The noise level is recovered from the residuals (Gaussian, σ = 0.01).
    assert 0.7 * sigma < float(np.sqrt(result.sigma2)) < 1.3 * sigma
