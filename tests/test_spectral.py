"""Fourier spectral operators against analytic derivatives."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

TWO_PI = 2 * math.pi


def _grid_2d(shape=(16, 12)):
    # Unequal lengths and resolutions (even and odd) so axis mix-ups cannot cancel out.
    return ds.Grid.periodic(shape, (2.0, 3.0))


def _trig(grid):
    """u = sin(2πx/Lx)·cos(4πy/Ly) + cos(6πx/Lx) and its analytic derivatives."""
    x, y = grid.mesh()
    ax, by = TWO_PI / grid.extent[0], TWO_PI / grid.extent[1]
    s, c = jnp.sin(ax * x), jnp.cos(ax * x)
    s2, c2 = jnp.sin(2 * by * y), jnp.cos(2 * by * y)
    s3, c3 = jnp.sin(3 * ax * x), jnp.cos(3 * ax * x)
    u = s * c2 + c3
    ux = ax * c * c2 - 3 * ax * s3
    uy = -2 * by * s * s2
    uxx = -(ax**2) * s * c2 - 9 * ax**2 * c3
    uyy = -4 * by**2 * s * c2
    uxxx = -(ax**3) * c * c2 + 27 * ax**3 * s3
    return u, dict(ux=ux, uy=uy, uxx=uxx, uyy=uyy, uxxx=uxxx)


def _max_err(a, b):
    return float(jnp.max(jnp.abs(a - b)))


def test_derivatives_of_trig_products():
    grid = _grid_2d()
    u, d = _trig(grid)
    assert _max_err(ds.spectral.derivative(u, grid, "x"), d["ux"]) < 1e-12
    assert _max_err(ds.spectral.derivative(u, grid, 1), d["uy"]) < 1e-12
    assert _max_err(ds.spectral.derivative(u, grid, "x", order=2), d["uxx"]) < 1e-11
    assert _max_err(ds.spectral.derivative(u, grid, "y", order=2), d["uyy"]) < 1e-11
    assert _max_err(ds.spectral.derivative(u, grid, "x", order=3), d["uxxx"]) < 1e-10
    assert _max_err(ds.spectral.derivative(u, grid, "x", order=0), u) == 0
    gx, gy = ds.spectral.gradient(u, grid)
    assert _max_err(gx, d["ux"]) < 1e-12 and _max_err(gy, d["uy"]) < 1e-12
    lap = d["uxx"] + d["uyy"]
    assert _max_err(ds.spectral.laplacian(u, grid), lap) < 1e-11
    # inverse_laplacian recovers the zero-mean part of u (mean(u) = 0 here).
    assert _max_err(ds.spectral.inverse_laplacian(lap, grid), u) < 1e-13


def test_batch_axes_and_3d():
    grid = ds.Grid.periodic((8, 6, 10), (1.0, 2.0, 0.5))
    x, y, z = grid.mesh()
    kx, ky, kz = (TWO_PI / length for length in grid.extent)
    u = jnp.sin(kx * x) * jnp.cos(2 * ky * y) * jnp.sin(kz * z)
    lap = -(kx**2 + 4 * ky**2 + kz**2) * u
    stacked = jnp.stack([u, 2 * u])
    out = ds.spectral.laplacian(stacked, grid)
    assert out.shape == (2, 8, 6, 10)
    assert _max_err(out[0], lap) < 1e-10 and _max_err(out[1], 2 * lap) < 1e-10
    uz = ds.spectral.derivative(stacked, grid, "z")
    assert _max_err(uz[1], 2 * kz * jnp.sin(kx * x) * jnp.cos(2 * ky * y) * jnp.cos(kz * z)) < 1e-12
    back = ds.spectral.irfftn(ds.spectral.rfftn(stacked, grid), grid)
    assert _max_err(back, stacked) < 1e-14


def test_exponential_convergence():
    # exp(sin x) is smooth but not band-limited: the error falls faster than any power of h.
    def error(n):
        grid = ds.Grid.periodic(n, TWO_PI)
        (x,) = grid.mesh()
        u = jnp.exp(jnp.sin(x))
        exact = jnp.cos(x) * u
        return _max_err(ds.spectral.derivative(u, grid, "x"), exact)

    e8, e16, e32 = error(8), error(16), error(32)
    assert e8 > 1e-3 and e32 < 1e-13
    # An algebraic rate p gives a constant ratio 2^p per halving of h; here the ratio
    # itself grows (~2^15, then ~2^26): faster than any power.
    assert e8 / e16 > 2**12
    assert math.log(e16 / e32) > 1.5 * math.log(e8 / e16)


def test_wavenumbers():
    grid = ds.Grid.periodic((4, 6), (2.0, 3.0))
    kx, ky = ds.spectral.wavenumbers(grid)
    assert kx.shape == (4, 1) and ky.shape == (1, 4)
    np.testing.assert_allclose(kx[:, 0], np.pi * np.array([0, 1, -2, -1]))
    np.testing.assert_allclose(ky[0], TWO_PI / 3 * np.array([0, 1, 2, 3]))
    assert ds.spectral.rfftn(jnp.zeros((5, 4, 6)), grid).shape == (5, 4, 4)


def test_odd_derivative_drops_nyquist():
    grid = ds.Grid.periodic((8, 8), 1.0)
    x, y = grid.mesh()
    # The Nyquist mode cos(πx/dx) on both axes: its first derivative samples to zero.
    nyquist = jnp.cos(8 * math.pi * x) + jnp.cos(8 * math.pi * y)
    for dim in ("x", "y"):
        assert _max_err(ds.spectral.derivative(nyquist, grid, dim), 0.0) < 1e-12
        assert _max_err(ds.spectral.derivative(nyquist, grid, dim, order=3), 0.0) < 1e-9
    # Even orders keep it: d²/dx² cos(8πx) = -(8π)² cos(8πx).
    uxx = ds.spectral.derivative(nyquist, grid, "x", order=2)
    assert _max_err(uxx, -((8 * math.pi) ** 2) * jnp.cos(8 * math.pi * x)) < 1e-9
    # The first derivative is antisymmetric (as a matrix): <v, D w> = -<D v, w>.
    v, w = jax.random.normal(jax.random.key(0), (2, 8, 8))
    d = ds.spectral.derivative
    lhs = jnp.sum(v * d(w, grid, "y"))
    assert abs(float(lhs + jnp.sum(d(v, grid, "y") * w))) < 1e-12


def test_dealias_zeroes_exactly_the_high_modes():
    n = 12
    grid = ds.Grid.periodic((n, n), TWO_PI)
    x, y = grid.mesh()
    # Every mode pair (mx, my), mx, my in 0..6, with a distinct amplitude.
    u = sum((1 + mx + 10 * my) * jnp.cos(mx * x + my * y) for mx in range(7) for my in range(7))
    out = ds.spectral.dealias(u, grid)
    assert out.dtype == u.dtype
    expected = sum(
        (1 + mx + 10 * my) * jnp.cos(mx * x + my * y) for mx in range(5) for my in range(5)
    )
    # 2/3 of the Nyquist mode number 6 is 4: modes 0..4 stay, 5 and 6 go, on every axis.
    assert _max_err(out, expected) < 1e-11
    # fraction = 1 keeps everything but is still a projection.
    assert _max_err(ds.spectral.dealias(u, grid, fraction=1.0), u) < 1e-11
    assert _max_err(ds.spectral.dealias(out, grid), out) < 1e-11


def test_float32_preserved():
    grid = _grid_2d((8, 8))
    u, d = _trig(grid)
    u32 = u.astype(jnp.float32)
    outs = [
        ds.spectral.derivative(u32, grid, "x"),
        ds.spectral.derivative(u32, grid, "y", order=2),
        *ds.spectral.gradient(u32, grid),
        ds.spectral.laplacian(u32, grid),
        ds.spectral.inverse_laplacian(u32, grid),
        ds.spectral.dealias(u32, grid),
        ds.spectral.irfftn(ds.spectral.rfftn(u32, grid), grid),
    ]
    assert all(out.dtype == jnp.float32 for out in outs)
    assert ds.spectral.rfftn(u32, grid).dtype == jnp.complex64
    assert _max_err(outs[0], d["ux"].astype(jnp.float32)) < 1e-4


def test_jit_and_grad():
    grid = _grid_2d((8, 8))
    u, d = _trig(grid)
    lap = jax.jit(lambda v: ds.spectral.laplacian(v, grid))
    assert _max_err(lap(u), d["uxx"] + d["uyy"]) < 1e-11
    # The spectral Laplacian is self-adjoint: the gradient of <w, ∇²u> is ∇²w.
    w = jnp.cos(TWO_PI / 2 * grid.mesh()[0])
    g = jax.grad(lambda v: jnp.sum(w * ds.spectral.laplacian(v, grid)))(u)
    assert _max_err(g, ds.spectral.laplacian(w, grid)) < 1e-11


def test_errors():
    grid = ds.Grid((8, 8), 1.0, {"x": ds.Periodic(), "y": ds.Dirichlet(0.0)})
    u = jnp.zeros((8, 8))
    for fn in (
        ds.spectral.laplacian,
        ds.spectral.inverse_laplacian,
        ds.spectral.dealias,
        ds.spectral.rfftn,
    ):
        with pytest.raises(ValueError, match=r"axis 'y' has Dirichlet\(0\)"):
            fn(u, grid)
    with pytest.raises(ValueError, match="axis 'y'"):
        ds.spectral.wavenumbers(grid)
    periodic = ds.Grid.periodic((8, 8))
    with pytest.raises(ValueError, match="u has shape"):
        ds.spectral.derivative(jnp.zeros((8, 7)), periodic, "x")
    with pytest.raises(ValueError, match="u_hat has shape"):
        ds.spectral.irfftn(jnp.zeros((8, 8), jnp.complex128), periodic)
    with pytest.raises(ValueError, match="order"):
        ds.spectral.derivative(u, periodic, "x", order=-1)
    with pytest.raises(ValueError, match="no axis 'z'"):
        ds.spectral.derivative(u, periodic, "z")
    with pytest.raises(ValueError, match="fraction"):
        ds.spectral.dealias(u, periodic, fraction=0.0)
    with pytest.raises(TypeError, match="real"):
        ds.spectral.laplacian(u.astype(jnp.complex128), periodic)


def test_fourier_multipliers_are_the_operators_symbols():
    # irfftn(symbol · rfftn(u)) must be the operator applied to u: against the analytic
    # derivatives of _trig, and against the field-space operators for the rest.
    grid = _grid_2d()
    u, d = _trig(grid)
    u_hat = ds.spectral.rfftn(u, grid)

    def apply(symbol):
        return ds.spectral.irfftn(symbol * u_hat, grid)

    assert _max_err(apply(ds.spectral.derivative_symbol(grid, "x")), d["ux"]) < 1e-12
    assert _max_err(apply(ds.spectral.derivative_symbol(grid, 1)), d["uy"]) < 1e-12
    assert _max_err(apply(ds.spectral.derivative_symbol(grid, "x", order=3)), d["uxxx"]) < 1e-10
    assert _max_err(apply(ds.spectral.laplacian_symbol(grid)), d["uxx"] + d["uyy"]) < 1e-11
    lap = d["uxx"] + d["uyy"]
    assert (
        _max_err(
            ds.spectral.irfftn(
                ds.spectral.inverse_laplacian_symbol(grid) * ds.spectral.rfftn(lap, grid), grid
            ),
            u,
        )
        < 1e-13
    )
    noisy = jax.random.normal(jax.random.key(0), grid.shape)
    kept = ds.spectral.irfftn(
        jnp.where(ds.spectral.dealias_mask(grid), ds.spectral.rfftn(noisy, grid), 0), grid
    )
    assert _max_err(kept, ds.spectral.dealias(noisy, grid)) < 1e-14
    # Shapes broadcast against one spectrum (16, 12 // 2 + 1); dtypes follow the request.
    assert ds.spectral.derivative_symbol(grid, "x").shape == (16, 1)
    assert ds.spectral.derivative_symbol(grid, "y").shape == (1, 7)
    assert (
        ds.spectral.laplacian_symbol(grid).shape == ds.spectral.dealias_mask(grid).shape == (16, 7)
    )
    assert ds.spectral.derivative_symbol(grid, "x", dtype=jnp.float32).dtype == jnp.complex64
    assert ds.spectral.laplacian_symbol(grid, dtype=jnp.float32).dtype == jnp.float32
    # Odd orders drop the Nyquist mode of the even axis; even orders keep it.
    nyquist = 8  # mode -8 of the 16-point x axis, stored at index 8
    assert ds.spectral.derivative_symbol(grid, "x")[nyquist, 0] == 0
    assert ds.spectral.derivative_symbol(grid, "x", order=2)[nyquist, 0] != 0


def test_fourier_multiplier_errors():
    grid = ds.Grid((8, 8), 1.0, {"x": ds.Periodic(), "y": ds.Dirichlet(0.0)})
    for fn in (
        ds.spectral.laplacian_symbol,
        ds.spectral.inverse_laplacian_symbol,
        ds.spectral.dealias_mask,
    ):
        with pytest.raises(ValueError, match=r"axis 'y' has Dirichlet\(0\)"):
            fn(grid)
    with pytest.raises(ValueError, match=r"axis 'y' has Dirichlet\(0\)"):
        ds.spectral.derivative_symbol(grid, "x")
    periodic = ds.Grid.periodic((8, 8))
    with pytest.raises(ValueError, match="order"):
        ds.spectral.derivative_symbol(periodic, "x", order=1.5)
    with pytest.raises(ValueError, match="fraction"):
        ds.spectral.dealias_mask(periodic, fraction=1.5)
