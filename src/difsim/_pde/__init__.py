"""Grids, boundary conditions and the spatial operators of PDE models (finite differences, WENO
advection, Fourier, Poisson). Depends on nothing else in difsim.
"""

from difsim._pde._advection import (
    advection as advection,
    conservative_divergence as conservative_divergence,
)
from difsim._pde._domain import (
    constrain as constrain,
    domain_sharding as domain_sharding,
)
from difsim._pde._fd import (
    biharmonic as biharmonic,
    derivative as derivative,
    divergence as divergence,
    gradient as gradient,
    laplacian as laplacian,
)
from difsim._pde._grid import (
    BoundaryCondition as BoundaryCondition,
    Dirichlet as Dirichlet,
    Grid as Grid,
    Neumann as Neumann,
    Periodic as Periodic,
    grid_from_table as grid_from_table,
)
from difsim._pde._poisson import (
    solve_poisson as solve_poisson,
)
from difsim._pde._spectral import (
    inverse_laplacian as inverse_laplacian,
    irfftn as irfftn,
    rfftn as rfftn,
    spectral_derivative as spectral_derivative,
    spectral_gradient as spectral_gradient,
    spectral_laplacian as spectral_laplacian,
    spectrum_shape as spectrum_shape,
    wavenumbers as wavenumbers,
)
from difsim._pde._symbols import (
    dealias as dealias,
    dealias_mask as dealias_mask,
    derivative_symbol as derivative_symbol,
    inverse_laplacian_symbol as inverse_laplacian_symbol,
    laplacian_symbol as laplacian_symbol,
)
