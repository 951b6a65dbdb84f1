"""Grid-point operators of PDE models: finite differences, WENO advection and the Poisson
solve that inverts the finite-difference Laplacian.

Every operator acts on the trailing `grid.ndim` axes of a field (leading batch axes pass
through) and takes its ghost cells from the grid's boundary conditions, so one model's
`rhs` can switch grids or boundaries without changing code. The Fourier counterparts with
the same names (`laplacian`, `gradient`, `derivative`) live in [`difsim.spectral`][].

```python
import jax.numpy as jnp
import difsim as ds

grid = ds.Grid(64, extent=2 * jnp.pi)
u = jnp.sin(grid.axis("x"))
assert jnp.allclose(ds.fd.laplacian(u, grid, order=4), -u, atol=1e-5)
```
"""

from difsim._pde import (
    advection as advection,
    biharmonic as biharmonic,
    conservative_divergence as conservative_divergence,
    derivative as derivative,
    divergence as divergence,
    gradient as gradient,
    laplacian as laplacian,
    solve_poisson as solve_poisson,
)

__all__ = [
    "advection",
    "biharmonic",
    "conservative_divergence",
    "derivative",
    "divergence",
    "gradient",
    "laplacian",
    "solve_poisson",
]
