"""Named time steppers, step-size controllers and adjoints for difsim.

This package is the lowest layer of difsim: it depends on diffrax, lineax and optimistix
only, never on the difsim core, so the core (and configs) can look solvers up by name
without import cycles. Every name a config may use is listed in [`SOLVERS`][],
[`CONTROLLERS`][] and [`ADJOINTS`][]; each entry builds a diffrax object.
[`ADJOINT_NAMES`][] is the one vocabulary of the `adjoint=` names of `simulate`,
`simulate_ensemble` and `fit`. The PDE steppers
([`ETDRK4`][], [`CrankNicolson`][], [`BackwardEuler`][]) are diffrax solvers for a
`MultiTerm(non-stiff, linear stiff)`; [`newton_krylov`][] makes an implicit solver
matrix-free; [`Rodas5P`][] (Rosenbrock), [`Radau5`][] (Radau IIA) and [`BDF`][] (variable
order, with its [`BDFController`][]) are for stiff systems and index-1 DAEs; [`StageNewton`][]
solves the stages of the named implicit solvers (its `kappa` is their `root_tol`). Stochastic
models take the SDE solvers of [`SDE_SOLVERS`][] (Euler–Maruyama, Milstein, Heun, ShARK, …).
"""

from difsim.solvers._bdf import (
    BDF as BDF,
    BDFError as BDFError,
    BDFInterpolation as BDFInterpolation,
)
from difsim.solvers._bdf_controller import BDFController as BDFController
from difsim.solvers._etdrk4 import ETDRK4 as ETDRK4
from difsim.solvers._linear_implicit import (
    AbstractLinearImplicit as AbstractLinearImplicit,
    BackwardEuler as BackwardEuler,
    CrankNicolson as CrankNicolson,
    ScaledKrylov as ScaledKrylov,
)
from difsim.solvers._newton_krylov import newton_krylov as newton_krylov
from difsim.solvers._radau import Radau5 as Radau5
from difsim.solvers._registry import (
    ADJOINT_DESCRIPTIONS as ADJOINT_DESCRIPTIONS,
    ADJOINTS as ADJOINTS,
    CONTROLLERS as CONTROLLERS,
    DEFAULT_ROOT_TOL as DEFAULT_ROOT_TOL,
    SOLVERS as SOLVERS,
    SolverInfo as SolverInfo,
    make_adjoint as make_adjoint,
    make_controller as make_controller,
    make_solver as make_solver,
    solver_info as solver_info,
    wants_split_terms as wants_split_terms,
)
from difsim.solvers._rosenbrock import Rodas5P as Rodas5P
from difsim.solvers._sde import (
    SDE_SOLVERS as SDE_SOLVERS,
    SDESolverInfo as SDESolverInfo,
    default_sde_solver as default_sde_solver,
    make_sde_solver as make_sde_solver,
    sde_solver_info as sde_solver_info,
)
from difsim.solvers._spectral_term import SpectralODETerm as SpectralODETerm
from difsim.solvers._stage_newton import StageNewton as StageNewton
from difsim.solvers._vocabulary import (
    ADJOINT_NAMES as ADJOINT_NAMES,
    ENTRY_POINTS as ENTRY_POINTS,
    AdjointName as AdjointName,
    adjoint_names as adjoint_names,
    check_adjoint_name as check_adjoint_name,
)
