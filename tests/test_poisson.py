"""`solve_poisson` against manufactured solutions, across methods, and its derivatives."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

from .helpers import central_difference

EXTENT = (1.0, 1.5)


# Manufactured solution on [0, 1] × [0, 1.5]: u = e^{x/2} sin(1.3y + 0.2) + x²y.
# (NumPy outside the solver: eager JAX ops on every new shape would each compile.)
def _u(x, y):
    return np.exp(0.5 * x) * np.sin(1.3 * y + 0.2) + x**2 * y


def _ux(x, y):
    return 0.5 * np.exp(0.5 * x) * np.sin(1.3 * y + 0.2) + 2 * x * y


def _uy(x, y):
    return 1.3 * np.exp(0.5 * x) * np.cos(1.3 * y + 0.2) + x**2


def _f(x, y):
    return (0.25 - 1.69) * np.exp(0.5 * x) * np.sin(1.3 * y + 0.2) + 2 * y


def _mesh(grid):
    return np.meshgrid(*(grid.axis(i) for i in range(grid.ndim)), indexing="ij")


def _sides(n, kinds):
    """Boundary conditions {side: Dirichlet/Neumann} with the data of the exact `u`.

    `kinds` maps "x-", "x+", "y-", "y+" to "D" or "N"; Neumann data is the OUTWARD
    normal derivative.
    """
    cells = ds.Grid((n, n), EXTENT, ds.Neumann(0.0))
    x, y = cells.axis("x"), cells.axis("y")
    lx, ly = EXTENT
    zero = 0.0
    data = {
        "x-": (_u(zero, y), -_ux(zero, y)),
        "x+": (_u(lx + zero, y), _ux(lx + zero, y)),
        "y-": (_u(x, zero), -_uy(x, zero)),
        "y+": (_u(x, ly + zero), _uy(x, ly + zero)),
    }
    return {
        side: ds.Dirichlet(data[side][0]) if kind == "D" else ds.Neumann(data[side][1])
        for side, kind in kinds.items()
    }


def _problem_2d(n, kinds):
    grid = ds.Grid((n, n), EXTENT, _sides(n, kinds))
    x, y = _mesh(grid)
    return grid, _f(x, y), _u(x, y)


def _order(ns, errors):
    h = 1.0 / np.asarray(ns, dtype=float)
    return np.polyfit(np.log(h), np.log(errors), 1)[0]


def _err(u, exact, zero_mean=False):
    u, exact = np.asarray(u), np.asarray(exact)
    if zero_mean:
        exact = exact - np.mean(exact)
    return float(np.max(np.abs(u - exact)))


DIRICHLET = {"x-": "D", "x+": "D", "y-": "D", "y+": "D"}
MIXED = {"x-": "D", "x+": "N", "y-": "N", "y+": "D"}
NEUMANN = {"x-": "N", "x+": "N", "y-": "N", "y+": "N"}
NS_2D = (16, 32, 64)


@pytest.mark.parametrize(
    "kinds", [DIRICHLET, MIXED, NEUMANN], ids=["dirichlet", "mixed", "pure-neumann"]
)
def test_order_2d(kinds):
    singular = kinds is NEUMANN
    errors = []
    for n in NS_2D:
        grid, f, exact = _problem_2d(n, kinds)
        u = ds.fd.solve_poisson(f, grid)  # "auto" is CG here (compiled once with "cg")
        errors.append(_err(u, exact, zero_mean=singular))
        if n == NS_2D[0]:
            # The discrete problem is that of ds.fd.laplacian, boundary data included; for
            # pure Neumann up to the constant that makes it compatible.
            residual = np.asarray(ds.fd.laplacian(u, grid)) - f
            if singular:
                assert abs(float(np.mean(u))) < 1e-12  # the gauge
                assert np.ptp(residual) < 1e-6 and abs(np.mean(residual)) < 1e-2
            else:
                assert np.max(np.abs(residual)) < 1e-6
    assert abs(_order(NS_2D, errors) - 2) < 0.2, errors
    assert errors[-1] < 1e-3


def test_order_1d():
    # u = cos(3x) + x on [0, 1]: Dirichlet / Neumann both ends / mixed, direct solver.
    def exact(x):
        return np.cos(3 * x) + x

    def slope(x):
        return -3 * np.sin(3 * x) + 1

    ns = (16, 32, 64)
    cases = {
        "dirichlet": (ds.Dirichlet(exact(0.0)), ds.Dirichlet(exact(1.0))),
        "neumann": (ds.Neumann(-slope(0.0)), ds.Neumann(slope(1.0))),
        "mixed": (ds.Neumann(-slope(0.0)), ds.Dirichlet(exact(1.0))),
    }
    for name, bc in cases.items():
        errors = []
        for n in ns:
            grid = ds.Grid(n, 1.0, [bc])
            (x,) = _mesh(grid)
            u = ds.fd.solve_poisson(-9 * np.cos(3 * x), grid)  # "auto": tridiagonal
            errors.append(_err(u, exact(x), zero_mean=name == "neumann"))
        assert abs(_order(ns, errors) - 2) < 0.2, (name, errors)


def test_periodic_fft():
    def exact(x, y):
        return np.exp(np.sin(x)) * np.cos(y)

    def source(x, y):
        e = np.exp(np.sin(x))
        return (np.cos(x) ** 2 - np.sin(x)) * e * np.cos(y) - e * np.cos(y)

    ns = (16, 32, 64)
    fd_errors, spectral_errors = [], []
    for n in ns:
        grid = ds.Grid.periodic((n, n), 2 * math.pi)
        x, y = _mesh(grid)
        f = source(x, y)
        u = ds.fd.solve_poisson(f, grid)  # "auto": FFT of the finite-difference symbol
        fd_errors.append(_err(u, exact(x, y), zero_mean=True))
        # Same discrete problem as ds.fd.laplacian.
        if n == ns[0]:
            assert np.max(np.abs(np.asarray(ds.fd.laplacian(u, grid)) - f)) < 1e-11
        spectral = ds.fd.solve_poisson(f, grid, method="spectral")
        assert _err(spectral, ds.spectral.inverse_laplacian(f, grid)) == 0
        spectral_errors.append(_err(spectral, exact(x, y), zero_mean=True))
    assert abs(_order(ns, fd_errors) - 2) < 0.2, fd_errors
    assert spectral_errors[-1] < 1e-12 and spectral_errors[0] < 1e-5

    # 1-D: u = exp(sin x) - mean, second order.
    errors = []
    for n in ns:
        grid = ds.Grid.periodic(n, 2 * math.pi)
        (x,) = _mesh(grid)
        f = (np.cos(x) ** 2 - np.sin(x)) * np.exp(np.sin(x))
        errors.append(_err(ds.fd.solve_poisson(f, grid, method="fft"), np.exp(np.sin(x)), True))
    assert abs(_order(ns, errors) - 2) < 0.2, errors


def test_methods_agree():
    grid, f, _ = _problem_2d(NS_2D[0], MIXED)
    reference = ds.fd.solve_poisson(f, grid, method="cg")
    scale = np.max(np.abs(reference))
    for method in ("gmres", "bicgstab"):
        u = ds.fd.solve_poisson(f, grid, method=method)
        assert _err(u, reference) < 1e-8 * scale, method

    # 1-D pure Neumann: the direct tridiagonal solve against CG.
    grid1 = ds.Grid(16, 2.0, [(ds.Neumann(0.5), ds.Neumann(-0.2))])
    (x,) = _mesh(grid1)
    direct = ds.fd.solve_poisson(np.exp(x), grid1, method="tridiagonal")
    cg = ds.fd.solve_poisson(np.exp(x), grid1, method="cg")
    assert _err(direct, cg) < 1e-8 * np.max(np.abs(direct))


def test_time_dependent_boundary_and_batch():
    grid = ds.Grid(16, 1.0, ds.Dirichlet(lambda t: 2.0 * t))
    (x,) = _mesh(grid)
    f = np.stack([np.zeros(16), np.cos(x)])
    u = ds.fd.solve_poisson(f, grid, t=0.5)  # boundary value 2t = 1
    assert u.shape == (2, 16)
    assert _err(u[0], 1.0) < 1e-12  # zero source: the constant boundary value
    fixed = ds.fd.solve_poisson(np.cos(x), ds.Grid.dirichlet(16, value=1.0))
    assert _err(u[1], fixed) < 1e-12
    assert _err(u[1], 2.0 - np.cos(x) + (math.cos(1.0) - 1) * x) < 1e-3


def test_jit_vmap():
    grid, f, _ = _problem_2d(12, DIRICHLET)
    solve = eqx.filter_jit(jax.vmap(lambda g: ds.fd.solve_poisson(g, grid)))
    batch = np.stack([f, 2 * f + 1])
    out = solve(batch)
    for i in range(2):
        assert _err(out[i], ds.fd.solve_poisson(batch[i], grid)) < 1e-8


def test_grad_against_finite_differences():
    # loss(a, b) = ∫ u² with ∇²u = a·f0 and u = b on x-, 0 elsewhere (pure mixed problem).
    x, y = _mesh(ds.Grid((12, 12), EXTENT))
    f0 = np.cos(2 * x) * y

    def loss(a, b):
        bc = {"x-": ds.Dirichlet(b), "x+": ds.Dirichlet(0.0), "y": ds.Neumann(0.0)}
        grid = ds.Grid((12, 12), EXTENT, bc)
        u = ds.fd.solve_poisson(a * f0, grid, method="cg", rtol=1e-11, atol=1e-11)
        return grid.integrate(u**2)

    # One compiled program: the gradient, and the loss the finite differences read off it.
    value_and_grad = eqx.filter_jit(jax.value_and_grad(loss, argnums=(0, 1)))
    a, b = jnp.asarray(1.3), jnp.asarray(0.7)  # arrays: filter_jit compiles once
    grad_a, grad_b = value_and_grad(a, b)[1]
    fd_a = central_difference(lambda s: value_and_grad(s, b)[0], a, 1e-3)
    fd_b = central_difference(lambda s: value_and_grad(a, s)[0], b, 1e-3)
    assert abs(grad_a - fd_a) < 1e-6 * abs(fd_a)
    assert abs(grad_b - fd_b) < 1e-6 * abs(fd_b)

    # Periodic (FFT) and 1-D (tridiagonal, pure Neumann) paths too.
    periodic = ds.Grid.periodic(16, 1.0)
    (xp,) = _mesh(periodic)
    neumann = ds.Grid(16, 1.0, [(ds.Neumann(0.3), ds.Neumann(-0.3))])
    for grid in (periodic, neumann):

        @jax.jit
        @jax.value_and_grad
        def loss1(a, grid=grid):
            u = ds.fd.solve_poisson(np.sin(2 * math.pi * xp) + a * xp**2, grid)
            return jnp.sum(u**3)

        g = loss1(0.4)[1]
        fd = central_difference(lambda a: loss1(a)[0], 0.4, 1e-3)
        assert abs(g - fd) < 1e-6 * abs(fd), grid.describe()


def test_errors():
    dirichlet = ds.Grid.dirichlet((8, 8))
    f = jnp.zeros((8, 8))
    with pytest.raises(ValueError, match="unknown method 'lu'"):
        ds.fd.solve_poisson(f, dirichlet, method="lu")
    with pytest.raises(ValueError, match=r"method='fft' needs a periodic grid.*axis 'x'"):
        ds.fd.solve_poisson(f, dirichlet, method="fft")
    with pytest.raises(ValueError, match="tridiagonal"):
        ds.fd.solve_poisson(f, dirichlet, method="tridiagonal")
    with pytest.raises(ValueError, match="tridiagonal"):
        ds.fd.solve_poisson(jnp.zeros(8), ds.Grid.periodic(8), method="tridiagonal")
    with pytest.raises(ValueError, match=r"f has shape \(8, 7\)"):
        ds.fd.solve_poisson(jnp.zeros((8, 7)), dirichlet)
    with pytest.raises(ValueError, match="rtol"):
        ds.fd.solve_poisson(f, dirichlet, rtol=-1.0)
    with pytest.raises(ValueError, match="max_steps"):
        ds.fd.solve_poisson(f, dirichlet, max_steps=0)
    with pytest.raises(ValueError, match="time-dependent"):
        ds.fd.solve_poisson(jnp.zeros(8), ds.Grid.dirichlet(8, value=lambda t: t))
    x, y = _mesh(dirichlet)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"method='cg'.*max_steps=3"):
        u = ds.fd.solve_poisson(np.exp(x) * y, dirichlet, method="cg", max_steps=3)
        u.block_until_ready()
