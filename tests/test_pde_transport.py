"""`LinearAdvection` and `Burgers` (models/_advection.py, models/_burgers.py) against exact
solutions: WENO5's order on a smooth periodic profile, the viscous travelling shock, and
conservation of mass on periodic grids.

Convergence studies step the model's right-hand side with a small fixed-step RK4 loop (time
error far below the spatial one, and a fraction of `simulate`'s compile time per grid); the
`simulate` path (tsit5, and the IMEX split with ETDRK4) is checked on one grid each.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import difsim as ds
from difsim.models import Burgers, LinearAdvection


def _rk4(model, u0, t1, steps):
    """`u(t1)` from classic RK4 with `steps` equal steps on `model.rhs` (a single field `u`)."""
    dt = t1 / steps

    def f(t, u):
        return model.rhs(t, ds.State(u=u))["u"]

    def step(i, u):
        t = i * dt
        k1 = f(t, u)
        k2 = f(t + dt / 2, u + dt / 2 * k1)
        k3 = f(t + dt / 2, u + dt / 2 * k2)
        k4 = f(t + dt, u + dt * k3)
        return u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

    return np.asarray(jax.jit(lambda u: lax.fori_loop(0, steps, step, u))(jnp.asarray(u0)))


def _order(ns, errors):
    return -np.polyfit(np.log(ns), np.log(errors), 1)[0]


def test_advection_weno5_order_and_mass():
    # One period of u = sin(2πx) + 1/2 at speed c: the exact solution is the initial profile.
    # RK4 at CFL 0.2: its error (~1e-10 at 128 points) stays well below WENO5's.
    c = 0.8
    ns = [32, 64, 128]
    errors = []
    for n in ns:
        model = LinearAdvection(c=c, grid=ds.Grid.periodic(n, 1.0))
        u0 = np.sin(2 * np.pi * model.grid.axis(0)) + 0.5
        errors.append(np.max(np.abs(_rk4(model, u0, 1.0 / c, 5 * n) - u0)))
    assert errors[-1] < 1e-6
    assert abs(_order(ns, errors) - 5) < 0.2, errors

    # A square wave through `simulate`: the total is conserved to rounding, although WENO5
    # smears the edges.
    model = LinearAdvection(c=c, grid=ds.Grid.periodic(64, 1.0))
    x = model.grid.axis(0)
    u0 = np.where(np.abs(x - 0.5) < 0.2, 1.0, 0.0)
    sol = ds.simulate(
        model.replace(**{"state.u": u0}), t0=0.0, t1=0.5 / c, save=3, rtol=1e-8, atol=1e-8
    )
    mass = np.asarray(model.grid.integrate(sol.ys["u"]))
    np.testing.assert_allclose(mass, np.sum(u0) / 64, rtol=0, atol=1e-13)
    shifted = np.where(np.abs(x - 0.5) > 0.3, 1.0, 0.0)  # moved by half the domain
    assert 0.05 < np.max(np.abs(sol.ys["u"][-1] - shifted)) < 0.8  # moved, smeared edges
    data = sol.to_xarray()
    assert data["u"].dims == ("time", "x")
    np.testing.assert_array_equal(data["x"], model.grid.coords["x"])


def test_advection_two_dimensional_velocity_per_axis():
    # c = (1, 1/2) on a 1 × 1/2 periodic box: after t = 1 the profile is back in place (with
    # the components swapped it would be shifted by half a period along x: sign flipped).
    grid = ds.Grid.periodic((24, 16), (1.0, 0.5))
    model = LinearAdvection(c=jnp.array([1.0, 0.5]), grid=grid)
    x, y = np.meshgrid(grid.axis("x"), grid.axis("y"), indexing="ij")
    u0 = np.sin(2 * np.pi * x) * np.cos(4 * np.pi * y)
    u1 = _rk4(model, u0, 1.0, 200)
    assert np.max(np.abs(u1 - u0)) < 1e-2
    with pytest.raises(ValueError, match="one value per grid axis"):
        LinearAdvection(c=jnp.ones(3), grid=grid)


def _travelling_shock(x, t, u_left, u_right, nu, x0):
    """Exact viscous Burgers front (Whitham §4.3): speed s = (uL + uR)/2."""
    s = 0.5 * (u_left + u_right)
    return s - 0.5 * (u_left - u_right) * jnp.tanh((u_left - u_right) * (x - x0 - s * t) / (4 * nu))


def test_burgers_travelling_shock_spatial_order():
    # Exact time-dependent Dirichlet data at the faces x = ±1. WENO5 advection is fifth order
    # but the viscous term is second order: the solution converges with order 2.
    u_left, u_right, nu, x0, t1 = 1.0, 0.0, 0.08, -0.2, 0.4

    def exact(x, t):
        return _travelling_shock(x, t, u_left, u_right, nu, x0)

    bc = ((ds.Dirichlet(lambda t: exact(-1.0, t)), ds.Dirichlet(lambda t: exact(1.0, t))),)
    ns = [32, 64, 128]
    errors = []
    for n in ns:
        grid = ds.Grid(n, 2.0, bc, origin=-1.0)
        x = grid.axis(0)
        h = 2.0 / n
        steps = int(np.ceil(t1 / min(0.2 * h, 0.3 * h**2 / nu)))  # RK4 well inside stability
        u1 = _rk4(Burgers(nu=nu, grid=grid), exact(x, 0.0), t1, steps)
        errors.append(np.max(np.abs(u1 - exact(x, t1))))
    assert errors[-1] < 1e-4
    assert abs(_order(ns, errors) - 2) < 0.2, errors


def test_burgers_periodic_mass_and_imex():
    # The sine steepens into a front by t = 1/(2π); the total stays zero. `simulate` with the
    # IMEX split (explicit WENO5 advection, ETDRK4's exact integration of the periodic
    # diffusion) agrees with RK4 on the full right-hand side.
    grid = ds.Grid.periodic(64, 1.0)
    model = Burgers(nu=0.01, grid=grid)
    u0 = model.initial_state().u
    np.testing.assert_allclose(u0, np.sin(2 * np.pi * grid.axis(0)), atol=1e-15)
    sol = ds.simulate(model, t0=0.0, t1=0.3, save=4, solver="etdrk4", dt0=1e-3)
    reference = _rk4(model, u0, 0.3, 600)
    np.testing.assert_allclose(sol.ys["u"][-1], reference, rtol=0, atol=1e-5)
    assert np.max(np.abs(np.diff(reference))) > 0.2  # a steep front formed
    for u in (sol.ys["u"], reference):
        np.testing.assert_allclose(grid.integrate(u), 0.0, rtol=0, atol=1e-13)
    data = sol.to_xarray()
    np.testing.assert_array_equal(data["x"], grid.coords["x"])


def test_burgers_defaults():
    model = Burgers()
    x = model.grid.axis(0)
    assert x[0] > -1.0 and x[-1] < 1.0 and model.grid.shape == (256,)
    np.testing.assert_allclose(model.initial_state().u, -np.sin(np.pi * x), atol=1e-15)
    assert Burgers.has_split()
