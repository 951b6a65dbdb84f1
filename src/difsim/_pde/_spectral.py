"""Fourier spectral operators on periodic grids.

Every function here acts on the trailing `grid.ndim` axes of its input (leading batch axes
pass through) and needs a grid that is periodic on every axis. Real fields go in and real
fields come out, in the input's precision (`float32` stays `float32`). Transforms are real
FFTs: the last grid axis holds only the non-negative frequencies, `n // 2 + 1` of them.
"""

import math

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float

from difsim._pde._grid import Grid


def _require_periodic(grid: Grid, what: str) -> None:
    grid.require_periodic(
        what,
        "use finite differences (e.g. ds.fd.laplacian, ds.fd.solve_poisson) on non-periodic grids",
    )


def _axes(grid: Grid) -> tuple[int, ...]:
    return tuple(range(-grid.ndim, 0))


def _real_dtype(x: Array) -> jnp.dtype:
    return jnp.finfo(x.dtype).dtype


def spectrum_shape(grid: Grid) -> tuple[int, ...]:
    """The shape of one field's `rfftn` spectrum on `grid`: `(n_0, ..., n_{d-1} // 2 + 1)`."""
    return grid.shape[:-1] + (grid.shape[-1] // 2 + 1,)


def mode_numbers(grid: Grid) -> tuple[np.ndarray, ...]:
    """Integer mode numbers per axis (1-D), in the order `rfftn` stores them."""
    *full, last = grid.shape
    return tuple(np.fft.fftfreq(n, 1.0 / n) for n in full) + (np.fft.rfftfreq(last, 1.0 / last),)


def _wavenumbers(grid: Grid, rank: int, dtype) -> tuple[Array, ...]:
    # Grid axis `i` is array axis `rank - ndim + i` of a (possibly batched) spectrum.
    lead = rank - grid.ndim
    out = []
    for i, (m, length) in enumerate(zip(mode_numbers(grid), grid.extent)):
        shape = [1] * rank
        shape[lead + i] = len(m)
        out.append(jnp.asarray((2 * math.pi / length * m).reshape(shape), dtype))
    return tuple(out)


def wavenumbers(grid: Grid, *, dtype=None) -> tuple[Float[Array, "..."], ...]:
    """The angular wavenumbers `k = 2π m / L` (units of 1/length) of the `rfftn` modes.

    **Arguments:**

    - `grid`: a periodic grid.
    - `dtype`: floating dtype of the result (default: JAX's default float).

    **Returns:** a tuple of `grid.ndim` arrays; the one for axis `i` has length `n_i` along
    axis `i` and 1 elsewhere, so each broadcasts against the spectrum of one field (shape
    `(n_0, ..., n_{d-1} // 2 + 1)`). Full axes are in `fftfreq` order (the Nyquist mode of
    an even `n` is negative); the last axis holds `0, 1, ..., n // 2` (`rfftfreq`).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    (k,) = ds.spectral.wavenumbers(ds.Grid(8, extent=4 * jnp.pi))  # k = 2π m / L
    assert jnp.allclose(k, jnp.array([0.0, 0.5, 1.0, 1.5, 2.0]))
    ```
    """
    _require_periodic(grid, "ds.spectral.wavenumbers")
    dtype = jnp.zeros((), dtype).dtype if dtype is None else dtype
    return _wavenumbers(grid, grid.ndim, dtype)


def rfftn(u: Float[Array, "*shape"], grid: Grid) -> Complex[Array, "*spectrum"]:
    """Real FFT of a field over the grid axes.

    **Arguments:**

    - `u`: real field, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.

    **Returns:** the complex spectrum, shape `(*batch, n_0, ..., n_{d-1} // 2 + 1)`, with the
    unnormalised convention of `jnp.fft.rfftn` (the zero mode is the sum of `u`).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((16, 8))
    u = jnp.arange(128.0).reshape(16, 8) / 128
    u_hat = ds.spectral.rfftn(u, grid)  # modes of the last axis halved: (16, 5)
    assert u_hat.shape == (16, 5) and jnp.allclose(ds.spectral.irfftn(u_hat, grid), u, atol=1e-6)
    ```
    """
    _require_periodic(grid, "ds.spectral.rfftn")
    grid.check(u, "u")
    return jnp.fft.rfftn(u, s=grid.shape, axes=_axes(grid))


def irfftn(u_hat: Complex[Array, "*spectrum"], grid: Grid) -> Float[Array, "*shape"]:
    """Inverse of [`rfftn`][]: the real field of shape `(*batch, *grid.shape)`.

    **Arguments:**

    - `u_hat`: spectrum, shape `(*batch, n_0, ..., n_{d-1} // 2 + 1)`.
    - `grid`: a periodic grid.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(16, extent=2 * jnp.pi)
    u_hat = jnp.zeros(9, complex).at[1].set(-8j)  # the modes of sin x on 16 points
    assert jnp.allclose(ds.spectral.irfftn(u_hat, grid), jnp.sin(grid.axis("x")), atol=1e-6)
    ```
    """
    _require_periodic(grid, "ds.spectral.irfftn")
    expected = spectrum_shape(grid)
    shape = tuple(jnp.shape(u_hat))
    if len(shape) < grid.ndim or shape[len(shape) - grid.ndim :] != expected:
        raise ValueError(
            f"u_hat has shape {shape}, but the spectrum of a field on grid {grid.shape} "
            f"has trailing shape {expected} (rfftn keeps n // 2 + 1 modes on the last axis)"
        )
    return jnp.fft.irfftn(u_hat, s=grid.shape, axes=_axes(grid))


def _transform(u: Array, grid: Grid, what: str, name: str = "u") -> tuple[Array, Array]:
    _require_periodic(grid, what)
    u = jnp.asarray(u)
    if jnp.issubdtype(u.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be a real field, got dtype {u.dtype}")
    if not jnp.issubdtype(u.dtype, jnp.floating):
        u = u.astype(jnp.result_type(float))
    grid.check(u, name)
    return u, jnp.fft.rfftn(u, s=grid.shape, axes=_axes(grid))


def _back(u_hat: Array, grid: Grid, dtype) -> Array:
    return jnp.fft.irfftn(u_hat, s=grid.shape, axes=_axes(grid)).astype(dtype)


def _derivative_factor(grid: Grid, i: int, order: int, rank: int, dtype) -> Array:
    """`(i k)ᵐ` along grid axis `i`, shaped to broadcast against a rank-`rank` spectrum."""
    n = grid.shape[i]
    m = mode_numbers(grid)[i]
    if order % 2 == 1 and n % 2 == 0:
        # An odd derivative of the Nyquist mode cos(πx/dx) is not representable on the grid
        # (it samples to zero): drop it so the result is real and the operator antisymmetric.
        m = np.where(np.abs(m) == n // 2, 0.0, m)
    factor = (2j * math.pi / grid.extent[i] * m) ** order
    shape = [1] * rank
    shape[rank - grid.ndim + i] = len(m)
    return jnp.asarray(factor.reshape(shape), dtype)


def _check_order(order) -> None:
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or order < 0:
        raise ValueError(f"order must be an integer >= 0, got {order!r}")


def _complex_dtype(u: Array):
    return jnp.result_type(u.dtype, jnp.complex64)


def spectral_derivative(
    u: Float[Array, "*shape"], grid: Grid, dim: str | int, *, order: int = 1
) -> Float[Array, "*shape"]:
    """The `order`-th derivative `∂ᵐu/∂xᵐ` along axis `dim`, by Fourier differentiation.

    Spectrally accurate for smooth periodic fields. For odd orders on an axis with an even
    number of points the Nyquist mode is zeroed (its odd derivatives are not representable).

    **Arguments:**

    - `u`: real field, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.
    - `dim`: axis name (`"x"`) or index.
    - `order`: derivative order, an integer `>= 0`.

    **Returns:** an array like `u` (units of `u` / lengthᵐ).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    x = grid.axis("x")
    d2 = ds.spectral.derivative(jnp.sin(x), grid, "x", order=2)
    assert jnp.allclose(d2, -jnp.sin(x), atol=1e-3)  # rounding times k²
    ```
    """
    _check_order(order)
    i = grid._axis_index(dim)
    u, u_hat = _transform(u, grid, "ds.spectral.derivative")
    if order == 0:
        return u
    factor = _derivative_factor(grid, i, order, u.ndim, _complex_dtype(u))
    return _back(u_hat * factor, grid, u.dtype)


def spectral_gradient(u: Float[Array, "*shape"], grid: Grid) -> tuple[Float[Array, "*shape"], ...]:
    """The gradient `(∂u/∂x, ∂u/∂y, ...)` by Fourier differentiation (one forward FFT).

    **Arguments:**

    - `u`: real field, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.

    **Returns:** a tuple of `grid.ndim` arrays shaped like `u` (units of `u` / length).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((32, 32), extent=2 * jnp.pi)
    x, y = grid.mesh()
    gx, gy = ds.spectral.gradient(jnp.sin(x) * jnp.cos(y), grid)
    assert jnp.allclose(gx, jnp.cos(x) * jnp.cos(y), atol=1e-5)
    ```
    """
    u, u_hat = _transform(u, grid, "ds.spectral.gradient")
    dtype = _complex_dtype(u)
    return tuple(
        _back(u_hat * _derivative_factor(grid, i, 1, u.ndim, dtype), grid, u.dtype)
        for i in range(grid.ndim)
    )


def _k_squared(grid: Grid, rank: int, dtype) -> Array:
    ks = _wavenumbers(grid, rank, dtype)
    total = ks[0] ** 2
    for k in ks[1:]:
        total = total + k**2
    return total


def spectral_laplacian(u: Float[Array, "*shape"], grid: Grid) -> Float[Array, "*shape"]:
    """The Laplacian `∇²u`, as `-|k|² û` in Fourier space.

    **Arguments:**

    - `u`: real field, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.

    **Returns:** an array like `u` (units of `u` / length²).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((32, 32), extent=2 * jnp.pi)
    x, y = grid.mesh()
    u = jnp.sin(x) * jnp.cos(2 * y)
    assert jnp.allclose(ds.spectral.laplacian(u, grid), -5 * u, atol=1e-4)
    ```
    """
    u, u_hat = _transform(u, grid, "ds.spectral.laplacian")
    return _back(-_k_squared(grid, u.ndim, _real_dtype(u)) * u_hat, grid, u.dtype)


def inverse_laplacian(f: Float[Array, "*shape"], grid: Grid) -> Float[Array, "*shape"]:
    """The zero-mean solution `u` of `∇²u = f` on a periodic domain, as `û = -f̂ / |k|²`.

    A periodic Poisson problem is solvable only if `f` has zero mean; the mean of `f` is
    ignored here (the `k = 0` mode is set to zero), i.e. this solves `∇²u = f - mean(f)`,
    and `u` has zero mean. For the solve consistent with the finite-difference Laplacian
    (and non-periodic boundaries) use [`ds.fd.solve_poisson`][difsim.fd.solve_poisson].

    **Arguments:**

    - `f`: real source, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.

    **Returns:** an array like `f` (units of `f` × length²).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    u = jnp.sin(3 * grid.axis("x"))
    assert jnp.allclose(ds.spectral.inverse_laplacian(-9 * u, grid), u, atol=1e-5)  # ∇²u = -9u
    ```
    """
    f, f_hat = _transform(f, grid, "ds.spectral.inverse_laplacian", "f")
    return _back(_inverse_k_squared(grid, f.ndim, _real_dtype(f)) * f_hat, grid, f.dtype)


def _inverse_k_squared(grid: Grid, rank: int, dtype) -> Array:
    """`-1/|k|²`, and 0 for the mean mode."""
    k2 = _k_squared(grid, rank, dtype)
    zero = k2 == 0
    return jnp.where(zero, 0, -1 / jnp.where(zero, 1, k2))
