"""Fitting models to data: data and noise models, transforms, the optimisation loop, multiple
shooting, results.
"""

from difsim._fit._check import (
    check_data_values as check_data_values,
)
from difsim._fit._checkpoint import (
    check_checkpoint as check_checkpoint,
)
from difsim._fit._data import (
    NOISE_MODELS as NOISE_MODELS,
    read_data as read_data,
)
from difsim._fit._diagnostics import (
    FitWarning as FitWarning,
)
from difsim._fit._drivers import (
    ADJOINTS as ADJOINTS,
    OPTAX_OPTIMIZERS as OPTAX_OPTIMIZERS,
    OPTIMIZERS as OPTIMIZERS,
)
from difsim._fit._fit import (
    fit as fit,
)
from difsim._fit._free import (
    path_steps as path_steps,
)
from difsim._fit._network import (
    ACTIVATIONS as ACTIVATIONS,
    NETWORK_KEYS as NETWORK_KEYS,
    network_sizes as network_sizes,
    rbf as rbf,
    with_networks as with_networks,
)
from difsim._fit._result import (
    FitResult as FitResult,
)
from difsim._fit._shooting import (
    MultipleShooting as MultipleShooting,
)
from difsim._fit._stochastic import (
    AbstractObjective as AbstractObjective,
    KalmanLikelihood as KalmanLikelihood,
    SimulatedMoments as SimulatedMoments,
)
from difsim._fit._transforms import (
    AbstractTransform as AbstractTransform,
    Bounded as Bounded,
    Identity as Identity,
    Positive as Positive,
    as_transform as as_transform,
)
