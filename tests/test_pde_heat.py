"""`Heat` (models/_heat.py) against exact solutions: Fourier and sine modes, orders in space and
time, 1-D and 2-D.

Spatial orders compare the *exact-in-time* solution of the model's semi-discrete system
(`expm` of its Jacobian, built from `model.rhs`) with the PDE's exact solution, so no time
stepper enters and each resolution compiles only the right-hand side. Temporal orders run
`simulate` on one grid against the exact solution of the semi-discrete system.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import difsim as ds
from difsim.models import Heat


def _semi_discrete(model, t):
    """Exact solution at time `t` of the model's affine semi-discrete system u' = A u + b."""
    u0 = np.asarray(model.initial_state().u)
    shape = u0.shape

    def f(u):
        du = model.rhs(0.0, ds.State(u=u.reshape(shape)))["u"].ravel()
        return du, du

    # One compile: the Jacobian A and, as the auxiliary output, b = f(0).
    a, b = map(np.asarray, jax.jit(jax.jacfwd(f, has_aux=True))(jnp.zeros(u0.size)))
    # u(t) = exp(tM) [u0; 1] with M = [[A, b], [0, 0]] (the affine part rides along).
    m = np.zeros((u0.size + 1, u0.size + 1))
    m[:-1, :-1], m[:-1, -1] = a, b
    y = scipy.linalg.expm(t * m) @ np.append(u0.ravel(), 1.0)
    return y[:-1].reshape(shape)


def _order(ns, errors):
    return -np.polyfit(np.log(ns), np.log(errors), 1)[0]


@pytest.mark.parametrize("order", [2, 4])
def test_periodic_fourier_mode_spatial_order(order):
    # u = sin(kx) decays as exp(-D k² t) exactly; D k² t = 1 at the end.
    D, k = 0.7, 2 * np.pi
    t = 1.0 / (D * k**2)
    ns = [16, 32, 64]
    errors = []
    for n in ns:
        model = Heat(D=D, grid=ds.Grid.periodic(n, 1.0), order=order)
        x = model.grid.axis(0)
        np.testing.assert_allclose(model.initial_state().u, np.sin(k * x), atol=1e-15)
        exact = np.exp(-D * k**2 * t) * np.sin(k * x)
        errors.append(np.max(np.abs(_semi_discrete(model, t) - exact)))
    assert errors[-1] < (4e-4 if order == 2 else 5e-7)
    assert abs(_order(ns, errors) - order) < 0.2, errors


@pytest.mark.parametrize("ends", [(0.0, 0.0), (1.0, -0.5)])
def test_dirichlet_sine_mode_cell_centred(ends):
    # u = a + (b - a)x + exp(-D π² t) sin(πx) with u(0) = a, u(1) = b on the cell faces.
    a, b = ends
    D = 1.3
    t = 0.5 / (D * np.pi**2)
    ns = [16, 32, 64]
    errors = []
    for n in ns:
        bc = ((ds.Dirichlet(jnp.asarray(a)), ds.Dirichlet(jnp.asarray(b))),)
        grid = ds.Grid(n, 1.0, bc)
        x = grid.axis(0)
        assert np.isclose(x[0], 0.5 / n)  # cell-centred: the boundary is half a cell out
        u0 = a + (b - a) * x + np.sin(np.pi * x)
        model = Heat(D=D, grid=grid).replace(**{"state.u": u0})
        exact = a + (b - a) * x + np.exp(-D * np.pi**2 * t) * np.sin(np.pi * x)
        errors.append(np.max(np.abs(_semi_discrete(model, t) - exact)))
    assert errors[-1] < 8e-5
    assert abs(_order(ns, errors) - 2) < 0.2, errors


def test_two_dimensional_mixed_boundaries():
    # x periodic, y Dirichlet: u = exp(-D (4π² + π²) t) sin(2πx) sin(πy), the default mode.
    D = 0.5
    rate = D * 5 * np.pi**2
    t = 1.0 / rate
    ns = [8, 12, 16]
    errors = []
    for n in ns:
        grid = ds.Grid((n, n), 1.0, bc={"x": ds.Periodic(), "y": ds.Dirichlet(0.0)})
        model = Heat(D=D, grid=grid)
        x, y = np.meshgrid(grid.axis("x"), grid.axis("y"), indexing="ij")
        mode = np.sin(2 * np.pi * x) * np.sin(np.pi * y)
        np.testing.assert_allclose(model.initial_state().u, mode, atol=1e-15)
        errors.append(np.max(np.abs(_semi_discrete(model, t) - np.exp(-rate * t) * mode)))
    assert errors[-1] < 5e-3
    assert abs(_order(ns, errors) - 2) < 0.2, errors


@pytest.mark.parametrize(("solver", "expected"), [("crank_nicolson", 2), ("imex_euler", 1)])
def test_temporal_order(solver, expected):
    # Fixed periodic 2-D grid, the mode sin(2πx) sin(2πy) plus a constant source s: the
    # semi-discrete solution is exp(-D λ t) sin(2πx) sin(2πy) + s t with
    # λ = Σ_axes (4/h²) sin²(2πh/2), the 3-point symbol.
    shape, D, k, s = (8, 6), 1.0, 2 * np.pi, 0.3
    lam = sum(4 * n**2 * np.sin(k / (2 * n)) ** 2 for n in shape)
    t1 = 2.0 / (D * lam)
    model = Heat(D=D, source=s, grid=ds.Grid.periodic(shape, 1.0))
    x, y = np.meshgrid(model.grid.axis("x"), model.grid.axis("y"), indexing="ij")
    exact = np.exp(-D * lam * t1) * np.sin(k * x) * np.sin(k * y) + s * t1
    steps = np.array([8, 16, 32, 64])

    # One compile for all steps: the step size is traced (vmapped), not a trace-time constant.
    @jax.jit
    @jax.vmap
    def solve(dt):
        return ds.simulate(
            model, t0=0.0, t1=t1, save="final", solver=solver, dt0=dt, controller="constant"
        )

    sol = solve(jnp.asarray(t1 / steps))
    errors = np.max(np.abs(np.asarray(sol.ys["u"][:, -1]) - exact), axis=(1, 2))
    assert abs(_order(steps, errors) - expected) < 0.2, errors
    # The output is labelled with the grid's axes and coordinates.
    data = sol.to_xarray(batch_dims=["steps"])
    assert data["u"].dims == ("steps", "time", "x", "y")
    np.testing.assert_array_equal(data["x"], model.grid.coords["x"])
    np.testing.assert_array_equal(data["y"], model.grid.coords["y"])


def test_defaults_initial_state_and_checks():
    model = Heat()
    assert model.grid.shape == (64,) and not model.grid.is_periodic
    x = model.grid.axis(0)
    np.testing.assert_allclose(model.initial_state().u, np.sin(np.pi * x / 0.1), atol=1e-15)
    assert Heat.solver_defaults["solver"] == "crank_nicolson"
    # A user-set value is kept (and broadcast to the grid), not replaced by the mode.
    np.testing.assert_array_equal(model.replace(**{"state.u": 2.0}).initial_state().u, 2.0)
    assert model.replace(**{"state.u": 2.0}).initial_state().u.shape == (64,)
    # Mixed sides get a quarter wave: Neumann at x = 0, Dirichlet at x = L -> cos(πx/2L).
    grid = ds.Grid(32, 2.0, bc=((ds.Neumann(0.0), ds.Dirichlet(0.0)),))
    xg = grid.axis(0)
    np.testing.assert_allclose(
        Heat(grid=grid).initial_state().u, np.cos(np.pi * xg / 4), atol=1e-15
    )
    with pytest.raises(ValueError, match="order must be 2 or 4"):
        Heat(order=3)
