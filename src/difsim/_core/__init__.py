"""The core: models, states, `simulate`, solutions, events, steady states. Depends on `_pde`,
`_plot`, `_io`, `difsim.solvers` and `_status` only.
"""

from difsim._core._adjoint import (
    check_backsolve as check_backsolve,
)
from difsim._core._brownian import (
    StepBrownianPath as StepBrownianPath,
)
from difsim._core._custom_types import (
    RealScalarLike as RealScalarLike,
    SaveLike as SaveLike,
    Times as Times,
)
from difsim._core._dae import (
    check_index_one as check_index_one,
    consistent_state as consistent_state,
    init_status as init_status,
)
from difsim._core._dense import (
    DenseOutput as DenseOutput,
)
from difsim._core._event import (
    AbstractEvent as AbstractEvent,
    Event as Event,
    TimeEvent as TimeEvent,
)
from difsim._core._event_plan import (
    check_max_events as check_max_events,
    declared_events as declared_events,
)
from difsim._core._event_record import (
    EventRecord as EventRecord,
)
from difsim._core._model import (
    Model as Model,
    host_leaves as host_leaves,
    param as param,
)
from difsim._core._noise import (
    Noise as Noise,
    brownian_shape as brownian_shape,
)
from difsim._core._observable import (
    ObservableInfo as ObservableInfo,
    model_observables as model_observables,
    observable as observable,
)
from difsim._core._own_steps import (
    register_own_steps as register_own_steps,
)
from difsim._core._progress_meter import (
    reports_model_time as reports_model_time,
)
from difsim._core._save import (
    SaveSpec as SaveSpec,
)
from difsim._core._sde import (
    brownian_path as brownian_path,
    check_key as check_key,
    check_saves as check_saves,
    levy_area as levy_area,
    noise_summary as noise_summary,
    sde_solver_settings as sde_solver_settings,
)
from difsim._core._sde_steps import (
    check_sde_plan as check_sde_plan,
)
from difsim._core._seed import (
    check_seed as check_seed,
    is_seed as is_seed,
)
from difsim._core._simulate import (
    simulate as simulate,
)
from difsim._core._solution import (
    Solution as Solution,
)
from difsim._core._solver_defaults import (
    KEYS as KEYS,
    atol_origin as atol_origin,
    check_atol_scale as check_atol_scale,
    check_tolerance as check_tolerance,
    resolve_solver_settings as resolve_solver_settings,
)
from difsim._core._solver_settings import (
    SolverSettings as SolverSettings,
    solver_settings as solver_settings,
)
from difsim._core._state import (
    State as State,
    Var as Var,
    VarInfo as VarInfo,
    state_key as state_key,
    state_var as state_var,
)
from difsim._core._steady import (
    solve_steady_state as solve_steady_state,
    steady_state as steady_state,
)
from difsim._core._terms import check_stiff_term as check_stiff_term
from difsim._core._vector_field import (
    Layout as Layout,
    check_rhs as check_rhs,
)
