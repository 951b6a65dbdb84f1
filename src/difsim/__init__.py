"""difsim: differentiable simulation of ODE and PDE models with JAX.

Define a model as a Python class ([`Model`][]), solve it with [`simulate`][], get a
labelled `xarray.Dataset`. Models are pytrees, so `jax.jit`, `jax.vmap` and `jax.grad`
compose with everything here.
"""

from difsim import fd as fd, models as models, solvers as solvers, spectral as spectral
from difsim._app import run_config as run_config
from difsim._config import (
    ConfigError as ConfigError,
    Experiment as Experiment,
    load_config as load_config,
)
from difsim._core import (
    AbstractEvent as AbstractEvent,
    Event as Event,
    EventRecord as EventRecord,
    Model as Model,
    Noise as Noise,
    Solution as Solution,
    State as State,
    TimeEvent as TimeEvent,
    Var as Var,
    VarInfo as VarInfo,
    brownian_path as brownian_path,
    observable as observable,
    param as param,
    simulate as simulate,
    steady_state as steady_state,
)
from difsim._deprecated import MOVED as _MOVED, moved as _moved
from difsim._ensemble import (
    simulate_ensemble as simulate_ensemble,
)
from difsim._fit import (
    AbstractTransform as AbstractTransform,
    Bounded as Bounded,
    FitResult as FitResult,
    FitWarning as FitWarning,
    Identity as Identity,
    KalmanLikelihood as KalmanLikelihood,
    MultipleShooting as MultipleShooting,
    Positive as Positive,
    SimulatedMoments as SimulatedMoments,
    fit as fit,
)
from difsim._io import difsim_version as _difsim_version, to_xarray as to_xarray
from difsim._learn import (
    Discovery as Discovery,
    FunctionLibrary as FunctionLibrary,
    PolynomialLibrary as PolynomialLibrary,
    discover as discover,
)
from difsim._pde import (
    BoundaryCondition as BoundaryCondition,
    Dirichlet as Dirichlet,
    Grid as Grid,
    Neumann as Neumann,
    Periodic as Periodic,
    domain_sharding as domain_sharding,
)
from difsim._plot import animate as animate, plot as plot, plot_snapshots as plot_snapshots
from difsim._resources import ResourceError as ResourceError
from difsim._status import SolveError as SolveError, Status as Status
from difsim._sweep import (
    GridSweep as GridSweep,
    LogUniform as LogUniform,
    Normal as Normal,
    RandomSweep as RandomSweep,
    Uniform as Uniform,
    ZipSweep as ZipSweep,
    sweep as sweep,
)
from difsim._xla import tune_xla as tune_xla

__version__ = _difsim_version()


def __getattr__(name: str) -> object:
    # The PDE operators that moved to `ds.fd` and `ds.spectral` (deprecated aliases).
    if name in _MOVED:
        return _moved(name)
    raise AttributeError(f"module 'difsim' has no attribute {name!r}")
