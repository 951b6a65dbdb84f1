"""difsim: differentiable simulation of ODE and PDE models with JAX.

Define a model as a Python class ([`Model`][]), solve it with [`simulate`][], get a
labelled `xarray.Dataset`. Models are pytrees, so `jax.jit`, `jax.vmap` and `jax.grad`
compose with everything here.
"""

import importlib
import importlib.metadata

from difsim import solvers as solvers
from difsim._advection import (
    advection as advection,
    conservative_divergence as conservative_divergence,
)
from difsim._config import ConfigError as ConfigError, load_config as load_config
from difsim._domain import domain_sharding as domain_sharding
from difsim._event import Event as Event
from difsim._experiment import Experiment as Experiment
from difsim._fd import (
    biharmonic as biharmonic,
    derivative as derivative,
    divergence as divergence,
    gradient as gradient,
    laplacian as laplacian,
)
from difsim._fit import fit as fit
from difsim._fit_result import FitResult as FitResult
from difsim._grid import (
    BoundaryCondition as BoundaryCondition,
    Dirichlet as Dirichlet,
    Grid as Grid,
    Neumann as Neumann,
    Periodic as Periodic,
)
from difsim._model import Model as Model, param as param
from difsim._observables import observable as observable
from difsim._plot import plot as plot
from difsim._plot_field import animate as animate, plot_snapshots as plot_snapshots
from difsim._poisson import solve_poisson as solve_poisson
from difsim._run import run_config as run_config
from difsim._shooting import MultipleShooting as MultipleShooting
from difsim._simulate import simulate as simulate
from difsim._solution import Solution as Solution
from difsim._spectral import (
    dealias as dealias,
    dealias_mask as dealias_mask,
    derivative_symbol as derivative_symbol,
    inverse_laplacian as inverse_laplacian,
    inverse_laplacian_symbol as inverse_laplacian_symbol,
    irfftn as irfftn,
    laplacian_symbol as laplacian_symbol,
    rfftn as rfftn,
    spectral_derivative as spectral_derivative,
    spectral_gradient as spectral_gradient,
    spectral_laplacian as spectral_laplacian,
    wavenumbers as wavenumbers,
)
from difsim._state import State as State, Var as Var, VarInfo as VarInfo
from difsim._status import Status as Status
from difsim._steady import steady_state as steady_state
from difsim._sweep import sweep as sweep
from difsim._sweep_spec import (
    GridSweep as GridSweep,
    LogUniform as LogUniform,
    Normal as Normal,
    RandomSweep as RandomSweep,
    Uniform as Uniform,
    ZipSweep as ZipSweep,
)
from difsim._transforms import (
    AbstractTransform as AbstractTransform,
    Bounded as Bounded,
    Identity as Identity,
    Positive as Positive,
)
from difsim._xarray import to_xarray as to_xarray

try:
    __version__ = importlib.metadata.version("difsim")
except importlib.metadata.PackageNotFoundError:  # a source tree, not installed
    __version__ = "0+unknown"


def __getattr__(name: str):
    # `difsim.models` imports `difsim` (models subclass `Model`), so it is loaded on first
    # use rather than here, keeping the import graph acyclic.
    if name == "models":
        return importlib.import_module("difsim.models")
    raise AttributeError(f"module 'difsim' has no attribute {name!r}")
