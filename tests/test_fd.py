"""Finite-difference operators: observed orders against analytic derivatives.

Orders are fitted (`np.polyfit` of log error against log spacing) over 3-4 resolutions
and checked within ±0.2 of theory. Non-periodic axes are cell-centred, with boundary
values taken from the exact function. What we see at the boundary (and assert):

- `order=2`: Dirichlet rows next to a face are O(1) locally (the linear ghost is exact to
  O(h²) only), Neumann rows O(h); the solution of the discrete Poisson problem is still
  second order for both.
- `order=4`: quartic ghosts make the boundary rows O(h³); the Poisson solution is fourth
  order for Dirichlet and Neumann.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

K1, K2, PHASE = 2.3, 1.7, 0.4  # wavenumbers of the non-periodic test functions


def _order(hs, errors):
    return np.polyfit(np.log(hs), np.log(errors), 1)[0]


def _exact_1d(x):
    return np.sin(K1 * x + PHASE)


def _dexact_1d(x):
    return K1 * np.cos(K1 * x + PHASE)


def _d2exact_1d(x):
    return -(K1**2) * np.sin(K1 * x + PHASE)


def _grid_1d(n, kind):
    if kind == "dirichlet":
        bc = (ds.Dirichlet(_exact_1d(0.0)), ds.Dirichlet(_exact_1d(1.0)))
    else:  # outward derivative: -u'(0) on the low face, +u'(1) on the high face
        bc = (ds.Neumann(-_dexact_1d(0.0)), ds.Neumann(_dexact_1d(1.0)))
    return ds.Grid(n, 1.0, (bc,))


def _middle(x):
    """The points of the middle half of the domain: the same region at every resolution."""
    return (x > 0.25) & (x < 0.75)


def _affine_matrix(op, n):
    """`A`, `b` with `op(u) = A u + b` (the boundary data make the operator affine)."""
    b = np.asarray(op(jnp.zeros(n)))
    columns = np.asarray(jax.jit(jax.vmap(op))(jnp.eye(n)))
    return (columns - b).T, b


# ---------------------------------------------------------------------------- periodic


@pytest.mark.parametrize("order", [2, 4])
def test_laplacian_periodic_1d_order(order):
    ns = [16, 32, 64, 128]
    errors = []
    for n in ns:
        grid = ds.Grid.periodic(n, 2 * np.pi)
        x = grid.axis("x")
        u = jnp.asarray(np.sin(3 * x) + np.cos(x))
        exact = -9 * np.sin(3 * x) - np.cos(x)
        errors.append(np.abs(np.asarray(ds.fd.laplacian(u, grid, order=order)) - exact).max())
    assert abs(_order([1 / n for n in ns], errors) - order) < 0.2


@pytest.mark.parametrize("order", [2, 4])
def test_laplacian_periodic_2d_order(order):
    ns = [16, 32, 64]
    errors = []
    for n in ns:
        grid = ds.Grid.periodic((n, n), (2 * np.pi, 1.0))
        x, y = grid.mesh()
        u = jnp.sin(2 * x) * jnp.cos(2 * np.pi * y)
        exact = -(4 + (2 * np.pi) ** 2) * u
        errors.append(float(jnp.abs(ds.fd.laplacian(u, grid, order=order) - exact).max()))
    assert abs(_order([1 / n for n in ns], errors) - order) < 0.2


@pytest.mark.parametrize("order", [2, 4])
def test_gradient_divergence_periodic_order(order):
    ns = [16, 32, 64]
    grad_errors, div_errors, consistency = [], [], []
    for n in ns:
        grid = ds.Grid.periodic((n, n), 2 * np.pi)
        x, y = grid.mesh()
        u = jnp.sin(x) * jnp.cos(2 * y)
        gx, gy = ds.fd.gradient(u, grid, order=order)
        grad_errors.append(
            max(
                float(jnp.abs(gx - jnp.cos(x) * jnp.cos(2 * y)).max()),
                float(jnp.abs(gy + 2 * jnp.sin(x) * jnp.sin(2 * y)).max()),
            )
        )
        v = (jnp.sin(x) * jnp.sin(y), jnp.cos(x + 2 * y))
        exact_div = jnp.cos(x) * jnp.sin(y) - 2 * jnp.sin(x + 2 * y)
        div_errors.append(float(jnp.abs(ds.fd.divergence(v, grid, order=order) - exact_div).max()))
        # div(grad u) is the wide-stencil Laplacian: same limit, same order, not equal.
        wide = ds.fd.divergence(ds.fd.gradient(u, grid, order=order), grid, order=order)
        consistency.append(float(jnp.abs(wide - ds.fd.laplacian(u, grid, order=order)).max()))
    hs = [1 / n for n in ns]
    assert abs(_order(hs, grad_errors) - order) < 0.2
    assert abs(_order(hs, div_errors) - order) < 0.2
    assert abs(_order(hs, consistency) - order) < 0.2
    assert consistency[0] > 1e-6  # they are different stencils


@pytest.mark.parametrize("order", [2, 4])
def test_biharmonic_periodic_order(order):
    ns = [16, 32, 64]
    errors = []
    for n in ns:
        grid = ds.Grid.periodic((n, n), 2 * np.pi)
        x, y = grid.mesh()
        u = jnp.sin(x) * jnp.cos(2 * y) + jnp.cos(3 * x)
        exact = 25 * jnp.sin(x) * jnp.cos(2 * y) + 81 * jnp.cos(3 * x)
        errors.append(float(jnp.abs(ds.fd.biharmonic(u, grid, order=order) - exact).max()))
    assert abs(_order([1 / n for n in ns], errors) - order) < 0.2


def test_derivative_axis_by_name_and_index():
    grid = ds.Grid.periodic((8, 64), (2 * np.pi, 2 * np.pi))
    x, y = grid.mesh()
    u = jnp.sin(x) * jnp.sin(2 * y)
    by_name = ds.fd.derivative(u, grid, "y", order=4)
    by_index = ds.fd.derivative(u, grid, -1, order=4)
    np.testing.assert_array_equal(by_name, by_index)
    # Truncation error (2h)⁴/30·|u⁽⁵⁾| ≈ 1.1e-4 with h = 2π/64.
    np.testing.assert_allclose(by_name, 2 * jnp.sin(x) * jnp.cos(2 * y), atol=1.5e-4)


# ---------------------------------------------------------------------------- boundaries


@pytest.mark.parametrize(
    "kind, order, row_order, solve_order",
    [
        ("dirichlet", 2, 0, 2),
        ("dirichlet", 4, 3, 4),
        ("neumann", 2, 1, 2),
        ("neumann", 4, 3, 4),
    ],
)
def test_laplacian_boundary_orders(kind, order, row_order, solve_order):
    ns = [16, 32, 64, 128]
    interior, rows, solves = [], [], []
    for n in ns:
        grid = _grid_1d(n, kind)
        x = grid.axis("x")

        def op(v, grid=grid):
            return ds.fd.laplacian(v, grid, order=order)

        error = np.abs(np.asarray(op(jnp.asarray(_exact_1d(x)))) - _d2exact_1d(x))
        interior.append(error[_middle(x)].max())
        rows.append(error[:2].max())
        # The discrete problem L u = f with the boundary data: its solution's error.
        matrix, offset = _affine_matrix(op, n)
        if kind == "dirichlet":
            solution = np.linalg.solve(matrix, _d2exact_1d(x) - offset)
            solves.append(np.abs(solution - _exact_1d(x)).max())
        else:  # Neumann: defined up to a constant; compare zero-mean parts
            solution = np.linalg.lstsq(matrix, _d2exact_1d(x) - offset, rcond=None)[0]
            diff = solution - _exact_1d(x)
            solves.append(np.abs(diff - diff.mean()).max())
    hs = [1 / n for n in ns]
    assert abs(_order(hs, interior) - order) < 0.2
    assert abs(_order(hs, rows) - row_order) < 0.2
    assert abs(_order(hs, solves) - solve_order) < 0.2
    if row_order == 0:
        assert rows[-1] > 0.1  # O(1) locally, really
    assert solves[-1] < (1e-4 if order == 2 else 1e-8)


def test_dirichlet_operator_is_stable_and_neumann_conserves():
    # The operator a heat equation steps: real, negative spectrum (Neumann: one zero mode).
    for bc in (ds.Dirichlet(0.0), ds.Neumann(0.0)):
        for order in (2, 4):
            grid = ds.Grid(24, 1.0, bc)
            matrix, _ = _affine_matrix(
                lambda v, g=grid, o=order: ds.fd.laplacian(v, g, order=o), 24
            )
            eig = np.linalg.eigvals(matrix)
            assert np.abs(eig.imag).max() < 1e-8
            assert eig.real.max() < (1e-9 if isinstance(bc, ds.Neumann) else -9.0)
    # Second-order no-flux Neumann is the finite-volume Laplacian: mass is exactly conserved.
    grid = ds.Grid.neumann(24, 1.0)
    matrix, _ = _affine_matrix(lambda v: ds.fd.laplacian(v, grid), 24)
    np.testing.assert_allclose(matrix.sum(axis=0), 0.0, atol=1e-9)


@pytest.mark.parametrize(
    "kind, order, row_order", [("dirichlet", 2, 1), ("dirichlet", 4, 4), ("neumann", 2, 2)]
)
def test_derivative_boundary_orders(kind, order, row_order):
    ns = [16, 32, 64, 128]
    interior, rows = [], []
    for n in ns:
        grid = _grid_1d(n, kind)
        x = grid.axis("x")
        du = ds.fd.derivative(jnp.asarray(_exact_1d(x)), grid, "x", order=order)
        error = np.abs(np.asarray(du) - _dexact_1d(x))
        interior.append(error[_middle(x)].max())
        rows.append(max(error[:2].max(), error[-2:].max()))
    hs = [1 / n for n in ns]
    assert abs(_order(hs, interior) - order) < 0.2
    assert abs(_order(hs, rows) - row_order) < 0.2


def _u2d(x, y, t):
    return np.sin(K1 * x + t) * np.cos(K2 * y)


def _grid_2d_time_dependent(n):
    """2-D, x Dirichlet with time-dependent face values, y: non-zero Dirichlet low, Neumann
    high (exact outward derivative), all from `_u2d`."""
    probe = ds.Grid((n, n), 1.0, ds.Dirichlet(0.0))
    xs, ys = probe.axis("x"), probe.axis("y")
    bc = {
        "x-": ds.Dirichlet(lambda t: _u2d(0.0, ys, t)),
        "x+": ds.Dirichlet(lambda t: _u2d(1.0, ys, t)),
        "y-": ds.Dirichlet(_u2d(xs, 0.0, 0.7)),  # a fixed array: only right at t = 0.7
        "y+": ds.Neumann(-K2 * np.sin(K1 * xs + 0.7) * np.sin(K2 * 1.0)),
    }
    return ds.Grid((n, n), 1.0, bc)


@pytest.mark.parametrize("order", [2, 4])
def test_laplacian_2d_time_dependent_dirichlet(order):
    t = 0.7
    ns = [16, 32, 64]
    interior, everywhere = [], []
    for n in ns:
        grid = _grid_2d_time_dependent(n)
        x, y = (np.asarray(a) for a in grid.mesh())
        u = jnp.asarray(_u2d(x, y, t))
        exact = -(K1**2 + K2**2) * _u2d(x, y, t)
        error = np.abs(np.asarray(ds.fd.laplacian(u, grid, order=order, t=t)) - exact)
        interior.append(error[np.ix_(_middle(grid.axis(0)), _middle(grid.axis(1)))].max())
        everywhere.append(error.max())
    hs = [1 / n for n in ns]
    assert abs(_order(hs, interior) - order) < 0.2
    # With the boundary rows: O(1) for order 2 (Dirichlet rows), O(h³) for order 4.
    assert abs(_order(hs, everywhere) - (0 if order == 2 else 3)) < 0.25
    # The time matters: the face values at another time give a different answer there.
    other = ds.fd.laplacian(u, grid, order=order, t=0.0)
    assert float(jnp.abs(other - ds.fd.laplacian(u, grid, order=order, t=t)).max()) > 1.0
    with pytest.raises(ValueError, match="time-dependent"):
        ds.fd.laplacian(u, grid, order=order)


def test_batch_axes_and_bc_override():
    grid = _grid_2d_time_dependent(16)
    x, y = (np.asarray(a) for a in grid.mesh())
    stacked = jnp.stack([jnp.asarray(_u2d(x, y, 0.7)), jnp.asarray(2 * _u2d(x, y, 0.7))])
    # Face values broadcast over the leading axis.
    out = ds.fd.laplacian(stacked, grid, order=4, t=0.7)
    assert out.shape == (2, 16, 16)
    np.testing.assert_allclose(out[0], ds.fd.laplacian(stacked[0], grid, order=4, t=0.7))
    # `bc=` another grid's conditions (here zero Dirichlet) replace the grid's own.
    zero = grid.with_bc(ds.Dirichlet(0.0))
    a = ds.fd.laplacian(stacked[0], grid, bc=zero)
    b = ds.fd.laplacian(stacked[0], zero)
    np.testing.assert_array_equal(a, b)
    gx, gy = ds.fd.gradient(stacked, grid, order=2, t=0.7)
    assert gx.shape == gy.shape == (2, 16, 16)


def test_operators_jit_and_grad():
    grid = ds.Grid.dirichlet((12, 10), 1.0, value=1.0)
    rng = np.random.default_rng(0)
    u, w, v = (jnp.asarray(rng.normal(size=(12, 10))) for _ in range(3))
    jitted = jax.jit(lambda a: ds.fd.laplacian(a, grid, order=4))
    np.testing.assert_allclose(jitted(u), ds.fd.laplacian(u, grid, order=4), rtol=1e-12)
    # The operator is affine, L u = A u + b: the gradient of <w, L u> is Aᵀw, so its inner
    # product with any v is <w, A v> = <w, L v - L 0>.
    grad = jax.grad(lambda a: jnp.sum(w * ds.fd.laplacian(a, grid, order=4)))(u)
    a_v = ds.fd.laplacian(v, grid, order=4) - ds.fd.laplacian(jnp.zeros_like(v), grid, order=4)
    np.testing.assert_allclose(jnp.sum(grad * v), jnp.sum(w * a_v), rtol=1e-10)


# ---------------------------------------------------------------------------- bad input


def test_bad_inputs_name_the_culprit():
    grid = ds.Grid.periodic((8, 8))
    u = jnp.zeros((8, 8))
    with pytest.raises(ValueError, match=r"u has shape \(8, 7\)"):
        ds.fd.laplacian(jnp.zeros((8, 7)), grid)
    with pytest.raises(ValueError, match="order"):
        ds.fd.laplacian(u, grid, order=3)
    with pytest.raises(ValueError, match="order"):
        ds.fd.derivative(u, grid, "x", order=6)
    with pytest.raises(ValueError, match="axis 'z'"):
        ds.fd.derivative(u, grid, "z")
    with pytest.raises(ValueError, match="v has 1 components"):
        ds.fd.divergence([u], grid)
    with pytest.raises(ValueError, match=r"v\[1\] \(y component\)"):
        ds.fd.divergence([u, jnp.zeros(8)], grid)
    with pytest.raises(ValueError, match="bc must be a ds.Grid"):
        ds.fd.laplacian(u, grid, bc=ds.Grid.periodic((4, 4)))
    with pytest.raises(TypeError, match="grid"):
        ds.fd.laplacian(u, "grid")


def test_biharmonic_refuses_non_periodic_axis():
    grid = ds.Grid((8, 8), 1.0, (ds.Periodic(), ds.Dirichlet(0.0)))
    with pytest.raises(ValueError, match=r"axis 'y' has boundary condition Dirichlet\(0\)"):
        ds.fd.biharmonic(jnp.zeros((8, 8)), grid)
    with pytest.raises(ValueError, match="axis 'x'.*Neumann"):
        ds.fd.biharmonic(jnp.zeros(8), ds.Grid.neumann(8))
