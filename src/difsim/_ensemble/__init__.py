"""The ensemble engine: many trajectories of one model integrated as one batch, in
structure-of-arrays layout (each state variable one array with the lanes as its first axis), with
per-lane adaptive steps. Depends on `_core` and `_status` only.
"""

from difsim._ensemble._adjoint import (
    ADJOINTS as ADJOINTS,
    AbstractEnsembleAdjoint as AbstractEnsembleAdjoint,
    AutoAdjoint as AutoAdjoint,
    CheckpointAdjoint as CheckpointAdjoint,
    DiscreteAdjoint as DiscreteAdjoint,
    ForwardAdjoint as ForwardAdjoint,
    make_adjoint as make_adjoint,
)
from difsim._ensemble._field import with_point as with_point
from difsim._ensemble._methods import (
    METHODS as METHODS,
    AbstractEnsembleMethod as AbstractEnsembleMethod,
    Bosh3 as Bosh3,
    Dopri5 as Dopri5,
    Dopri8 as Dopri8,
    Tsit5 as Tsit5,
)
from difsim._ensemble._select import unsupported as unsupported
from difsim._ensemble._simulate import (
    check_points as check_points,
    run_ensemble as run_ensemble,
    simulate_ensemble as simulate_ensemble,
)
from difsim._ensemble._single import simulate_one as simulate_one
