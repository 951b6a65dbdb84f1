"""Fourier operators on periodic grids: transforms, wavenumbers, derivatives, the Laplacian
and its inverse, their Fourier multipliers (symbols) and dealiasing.

Real fields go in and real fields come out, in the input's precision; the operators act on
the trailing `grid.ndim` axes. `laplacian`, `gradient` and `derivative` are the spectrally
accurate counterparts of the finite-difference operators of the same names in
[`difsim.fd`][]; `inverse_laplacian` inverts `laplacian` (zero mean), as
`difsim.fd.solve_poisson` inverts `difsim.fd.laplacian`. The `*_symbol` functions return
the multipliers for solvers that work on spectra (`ds.solvers.ETDRK4`).

```python
import jax.numpy as jnp
import difsim as ds

grid = ds.Grid(32, extent=2 * jnp.pi)
u = jnp.sin(3 * grid.axis("x"))
assert jnp.allclose(ds.spectral.laplacian(u, grid), -9 * u, atol=1e-4)
assert jnp.allclose(ds.spectral.inverse_laplacian(-9 * u, grid), u, atol=1e-5)
```
"""

from difsim._pde import (
    dealias as dealias,
    dealias_mask as dealias_mask,
    derivative_symbol as derivative_symbol,
    inverse_laplacian as inverse_laplacian,
    inverse_laplacian_symbol as inverse_laplacian_symbol,
    irfftn as irfftn,
    laplacian_symbol as laplacian_symbol,
    rfftn as rfftn,
    spectral_derivative as derivative,
    spectral_gradient as gradient,
    spectral_laplacian as laplacian,
    wavenumbers as wavenumbers,
)

__all__ = [
    "dealias",
    "dealias_mask",
    "derivative",
    "derivative_symbol",
    "gradient",
    "inverse_laplacian",
    "inverse_laplacian_symbol",
    "irfftn",
    "laplacian",
    "laplacian_symbol",
    "rfftn",
    "wavenumbers",
]
