"""Dealiasing and the Fourier multipliers of the spectral operators (`_spectral.py`), for
models that work on spectra (`Model.rhs_nonstiff_spectrum`): each operator there is
`irfftn(symbol * rfftn(u))`; these give the symbols, shaped to broadcast against the
spectrum of one field, `(n_0, ..., n_{d-1} // 2 + 1)`.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Complex, Float

from difsim._pde._grid import Grid
from difsim._pde._spectral import (
    _back,
    _check_order,
    _derivative_factor,
    _inverse_k_squared,
    _k_squared,
    _require_periodic,
    _transform,
    mode_numbers,
    spectrum_shape,
)


def dealias(
    u: Float[Array, "*shape"], grid: Grid, *, fraction: float = 2 / 3
) -> Float[Array, "*shape"]:
    """`u` with the high modes removed: every mode with `|k_i| > fraction · k_max,i` on any
    axis `i` is zeroed, where `k_max,i = π n_i / L_i` is the Nyquist wavenumber.

    The default `fraction = 2/3` is Orszag's rule: products of two dealiased fields have no
    aliasing error in the retained modes. (On an even axis the Nyquist mode always goes.)

    **Arguments:**

    - `u`: real field, shape `(*batch, *grid.shape)`.
    - `grid`: a periodic grid.
    - `fraction`: the kept fraction of the Nyquist wavenumber, in `(0, 1]`.

    **Returns:** a real array like `u`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    x = grid.axis("x")
    smooth = ds.spectral.dealias(jnp.sin(x) + jnp.sin(30 * x), grid)  # keeps |k| <= 2/3 · 32
    assert jnp.allclose(smooth, jnp.sin(x), atol=1e-5)
    ```
    """
    keep = dealias_mask(grid, fraction=fraction)
    u, u_hat = _transform(u, grid, "ds.spectral.dealias")
    return _back(jnp.where(keep, u_hat, 0), grid, u.dtype)


def _symbol_dtype(grid: Grid, dtype, what: str):
    _require_periodic(grid, what)
    return jnp.zeros((), dtype).dtype if dtype is None else jnp.dtype(dtype)


def derivative_symbol(
    grid: Grid, dim: str | int, *, order: int = 1, dtype=None
) -> Complex[Array, "..."]:
    """The multiplier `(i k)ᵐ` of `∂ᵐ/∂xᵐ` along axis `dim`: `rfftn(∂ᵐu) = symbol · rfftn(u)`.

    As in [`derivative`][], odd orders drop the Nyquist mode of an even axis.

    **Arguments:**

    - `grid`: a periodic grid.
    - `dim`: axis name (`"x"`) or index.
    - `order`: derivative order, an integer `>= 0`.
    - `dtype`: real or complex dtype; the result is its complex counterpart (default: of
        JAX's default float).

    **Returns:** a complex array with `grid.ndim` axes: the spectrum's length on axis `dim`,
    1 elsewhere (units of 1/lengthᵐ).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    x = grid.axis("x")
    ik = ds.spectral.derivative_symbol(grid, "x")
    du = ds.spectral.irfftn(ik * ds.spectral.rfftn(jnp.sin(x), grid), grid)
    assert jnp.allclose(du, jnp.cos(x), atol=1e-5)
    ```
    """
    dtype = _symbol_dtype(grid, dtype, "ds.spectral.derivative_symbol")
    _check_order(order)
    i = grid._axis_index(dim)
    return _derivative_factor(grid, i, order, grid.ndim, jnp.result_type(dtype, jnp.complex64))


def laplacian_symbol(grid: Grid, *, dtype=None) -> Float[Array, "*spectrum"]:
    """The multiplier `-|k|²` of the Laplacian, shape `(n_0, ..., n_{d-1} // 2 + 1)`
    (units of 1/length²), in the real `dtype` (default: JAX's default float).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    symbol = ds.spectral.laplacian_symbol(grid)  # -k² for the modes of `rfftn`
    assert symbol.shape == (33,) and jnp.isclose(symbol[3], -9.0)
    ```
    """
    dtype = _symbol_dtype(grid, dtype, "ds.spectral.laplacian_symbol")
    return jnp.broadcast_to(-_k_squared(grid, grid.ndim, dtype), spectrum_shape(grid))


def inverse_laplacian_symbol(grid: Grid, *, dtype=None) -> Float[Array, "*spectrum"]:
    """The multiplier `-1/|k|²` of [`inverse_laplacian`][] (0 for the mean mode), shape
    `(n_0, ..., n_{d-1} // 2 + 1)` (units of length²), in the real `dtype`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    symbol = ds.spectral.inverse_laplacian_symbol(grid)  # -1/k², 0 for the mean mode
    assert symbol.shape == (33,) and symbol[0] == 0 and jnp.isclose(symbol[2], -0.25)
    ```
    """
    dtype = _symbol_dtype(grid, dtype, "ds.spectral.inverse_laplacian_symbol")
    return jnp.broadcast_to(_inverse_k_squared(grid, grid.ndim, dtype), spectrum_shape(grid))


def dealias_mask(grid: Grid, *, fraction: float = 2 / 3) -> np.ndarray:
    """The modes [`dealias`][] keeps: a boolean NumPy array of shape
    `(n_0, ..., n_{d-1} // 2 + 1)`, false where `|k_i| > fraction · k_max,i` on any axis.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    mask = ds.spectral.dealias_mask(ds.Grid(64, extent=2 * jnp.pi))  # modes k = 0 … 32
    assert mask.shape == (33,) and mask.sum() == 22  # k = 0 … 21 kept
    ```
    """
    _require_periodic(grid, "ds.spectral.dealias")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    keep = np.ones(spectrum_shape(grid), dtype=bool)
    for i, (m, n) in enumerate(zip(mode_numbers(grid), grid.shape)):
        shape = [1] * grid.ndim
        shape[i] = len(m)
        keep = keep & (np.abs(m) <= fraction * (n / 2)).reshape(shape)
    return keep
