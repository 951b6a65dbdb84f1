"""`SolverSettings`: the solver, controller, step and tolerances of a solve, resolved once.

Names become diffrax objects here, once, where a solve's settings enter difsim; `simulate`
(and a sweep, which resolves once for all its trajectories) then use the objects as they
are. The precedence of the caller's values, the model's `solver_defaults` and difsim's is
[`resolve_solver_settings`][]'s.
"""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from difsim import solvers
from difsim._core._custom_types import RealScalarLike
from difsim._core._dae import dae_solver, refuse_singular_mass
from difsim._core._model import Model
from difsim._core._save import check_dt0
from difsim._core._solver_defaults import (
    atol_origin,
    check_atol_scale,
    check_tolerance,
    resolve_solver_settings,
)
from difsim._core._vector_field import Layout

# State sizes above which named implicit solvers go matrix-free (solvers.newton_krylov).
MATRIX_FREE_SIZE = 1000


class SolverSettings(eqx.Module):
    """How one model is solved, every choice made: made by [`solver_settings`][].

    **Fields:**

    - `solver`: the diffrax solver.
    - `controller`: the diffrax step-size controller.
    - `dt0`: the initial step (adaptive) or the step (fixed), in the model's time units;
      `None` lets diffrax pick the first step of an adaptive solve.
    - `rtol`, `atol`: tolerances of the controller, of implicit solvers' nonlinear solves
      and of event location (a controller instance's own, when one was given); `atol` is a
      number or, one per state variable, an array of shape `(n_vars, 1, ...)` that
      broadcasts against the stacked state.
    - `max_steps`: most steps before the solve gives up with `Status.MAX_STEPS`.
    - `root_tol`: the named implicit solver's nonlinear-solve tolerance as given, a
      fraction of the step's error allowance (`None`: its default, or no such solves).
    - `solver_requested`, `controller_requested`: the solver and controller as chosen
      before any object was built: a registered name, the instance given, or (controller
      only) `None` for the solver's default; what a sweep describes and hashes. Static.
    - `brownian`: a stochastic model's Brownian path, `"tree"` (a virtual Brownian tree)
      or `"steps"` (increments per fixed step); see `docs/stochastic.md`. Static.
    """

    solver: dfx.AbstractSolver
    controller: dfx.AbstractStepSizeController
    dt0: RealScalarLike | None
    rtol: RealScalarLike
    atol: RealScalarLike
    max_steps: int = eqx.field(static=True)
    solver_requested: str | dfx.AbstractSolver = eqx.field(static=True)
    controller_requested: str | dfx.AbstractStepSizeController | None = eqx.field(static=True)
    brownian: str = eqx.field(default="tree", static=True)
    root_tol: RealScalarLike | None = None

    @property
    def imex(self) -> bool:
        """Whether the solver takes the right-hand side split in non-stiff and stiff parts."""
        return solvers.wants_split_terms(self.solver)

    @property
    def fixed_step(self) -> bool:
        """Whether the steps are not adapted to an error estimate."""
        return not isinstance(self.controller, dfx.AbstractAdaptiveStepSizeController)


def solver_settings(
    model: Model,
    *,
    solver: str | dfx.AbstractSolver | None = None,
    controller: str | dfx.AbstractStepSizeController | None = None,
    dt0: RealScalarLike | None = None,
    rtol: RealScalarLike | None = None,
    atol: RealScalarLike | None = None,
    max_steps: int | None = None,
    root_tol: RealScalarLike | None = None,
) -> SolverSettings:
    """Resolve the solver settings of `model` once: the caller's values (non-`None`) win,
    then the model's `solver_defaults`, then difsim's (see [`simulate`][]).

    Takes the model instance, not only its class: the size of its state decides whether a
    named implicit solver solves its stages matrix-free (above `MATRIX_FREE_SIZE` entries).

    `atol` may be one number or one per state variable (a sequence in declaration order;
    the variables must share one shape). `root_tol` sets how exactly a named implicit
    solver solves its stages, as a fraction of the step's error allowance (see
    `difsim.solvers.StageNewton`; default `difsim.solvers.DEFAULT_ROOT_TOL`).

    **Raises:** `ValueError` for an unknown solver or controller name, an IMEX solver on a
    model without `rhs_nonstiff`/`rhs_stiff`, a fixed step without `dt0`, a tolerance that
    is not finite and positive (or an `rtol` of 1 or more), an `atol` whose length is not
    the number of state variables, an `rtol` the state's precision cannot deliver (see
    `rtol_floor`), an adaptive solve's `atol` at least as large as the state (see
    [`check_atol_scale`][]), `rtol`/`atol` given beside a controller instance
    that carries its own, or a `root_tol` for a solver that is not a named implicit one.
    """
    _check_controller_clash(controller, rtol=rtol, atol=atol)
    atol_given = atol is not None
    given = dict(solver=solver, controller=controller, dt0=dt0, rtol=rtol, atol=atol)
    dtype = precision(model)
    layout = Layout.of(model.initial_state())
    requested = resolve_solver_settings(
        type(model), **given, max_steps=max_steps, root_tol=root_tol, dtype=dtype,
        dae=bool(layout.algebraic),
    )  # fmt: skip
    name, rtol, atol, dt0 = (requested[k] for k in ("solver", "rtol", "atol", "dt0"))
    dt0 = check_dt0(dt0)  # the model's solver_defaults too
    given_atol, atol = atol, _atol_for_state(atol, model)
    solver_obj = _make_solver(model, name, requested["root_tol"], layout)
    named = isinstance(name, str)
    if solvers.wants_split_terms(solver_obj) and not model.has_split():
        raise ValueError(
            f"solver {type(solver_obj).__name__} is IMEX: {type(model).__name__} must define "
            "rhs_nonstiff and rhs_stiff (the explicit and implicit parts of its right-hand side)"
        )
    controller_obj = solvers.make_controller(
        requested["controller"], solver_obj, rtol=rtol, atol=atol, dt0=dt0
    )
    adaptive = isinstance(controller_obj, dfx.AbstractAdaptiveStepSizeController)
    _check_bdf_controller(solver_obj, controller_obj)
    if adaptive and controller_obj is requested["controller"]:
        # A controller instance brings its own tolerances: they are the solve's (events,
        # fixed-step root finds), so what the settings say is what the controller does.
        rtol, atol = controller_obj.rtol, controller_obj.atol
        for key, value in (("rtol", rtol), ("atol", atol)):
            check_tolerance(key, value, f"the controller's {key}", dtype=dtype)
        given_atol, origin = atol, ("the controller's atol", "")
    else:
        origin = atol_origin(type(model), atol_given)
    if adaptive:  # the error test that an atol as large as the state would void
        state = model.initial_state().items()
        check_atol_scale(given_atol, state, type(model).__name__, origin[0], rtol=rtol,
                         note=origin[1])  # fmt: skip
    if named and isinstance(solver_obj, dfx.AbstractImplicitSolver) and not adaptive:
        # A named implicit solver takes its root-finder tolerances from an adaptive
        # controller; with fixed steps there is none (diffrax refuses): use rtol/atol.
        solver_obj = eqx.tree_at(
            lambda s: (s.root_finder.rtol, s.root_finder.atol, s.root_finder.norm),
            solver_obj,
            (rtol, atol, optx.max_norm),
        )
    return SolverSettings(
        solver=solver_obj,
        controller=controller_obj,
        dt0=dt0,
        rtol=rtol,
        atol=atol,
        max_steps=check_max_steps(requested["max_steps"]),
        root_tol=requested["root_tol"],
        solver_requested=name,
        controller_requested=requested["controller"],
    )


def _make_solver(model: Model, name, root_tol, layout: Layout) -> dfx.AbstractSolver:
    """The solver object of `name` for `model`: matrix-free for a large state, holding the
    mass matrix of a differential-algebraic model."""
    solver_obj = solvers.make_solver(name, root_tol=root_tol)
    # Radau5 and BDF solve their stages themselves (dense): no Krylov solves to switch to.
    krylov = not isinstance(solver_obj, solvers.Radau5 | solvers.BDF)
    if isinstance(name, str) and isinstance(solver_obj, dfx.AbstractImplicitSolver) and krylov:
        size = sum(int(np.size(v)) for _, v in model.initial_state().items())
        if size > MATRIX_FREE_SIZE:
            # A dense Jacobian of a PDE state is O(size²) memory and O(size³) to factorise:
            # named implicit solvers switch to Newton–Krylov (matrix-free GMRES).
            solver_obj = solvers.newton_krylov(solver_obj)
    if layout.algebraic:
        return dae_solver(solver_obj, layout, type(model).__name__)
    refuse_singular_mass(solver_obj, layout, type(model).__name__)
    return solver_obj


def precision(model: Model):
    """The real floating dtype `model` is solved in: its initial state's (see `Layout`)."""
    return jnp.finfo(Layout.of(model.initial_state()).dtype).dtype


def check_max_steps(value: Any) -> int:
    """`value` as the step cap of a solve: an integer from 1 to 2**31 - 1 (diffrax counts
    steps in int32; a larger cap would overflow inside the compiled loop).

    **Raises:** `ValueError` naming `max_steps` and the value."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | np.integer)
        or not (1 <= value < 2**31)
    ):
        raise ValueError(f"max_steps must be an integer from 1 to 2**31 - 1, got {value!r}")
    return int(value)


def _check_bdf_controller(solver, controller) -> None:
    """A `ValueError` for BDF under another adaptive controller: BDF reports its own choice
    of step (a `BDFError`), which no other controller reads."""
    if (
        isinstance(solver, solvers.BDF)
        and isinstance(controller, dfx.AbstractAdaptiveStepSizeController)
        and not isinstance(controller, solvers.BDFController)
    ):
        raise ValueError(
            f"solver BDF chooses its own steps and orders, which {type(controller).__name__} "
            "cannot apply: use controller='pid' (difsim builds a difsim.solvers.BDFController "
            "for BDF), a difsim.solvers.BDFController instance, or controller='constant'"
        )


def _check_controller_clash(controller, **tolerances) -> None:
    """A controller instance with its own tolerances would silently ignore `rtol`/`atol`."""
    if not isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
        return
    for key, value in tolerances.items():
        if value is not None:
            own = getattr(controller, key)
            raise ValueError(
                f"{key}={value!r} was given beside controller={type(controller).__name__}"
                f"(..., {key}={own!r}), which carries its own {key}: remove the {key} "
                f"argument, or build the controller with the {key} you want"
            )


def _atol_for_state(atol, model: Model):
    """`atol` as the controller applies it: a number as is; one value per state variable
    (checked against the state) shaped to broadcast against the stacked state
    `(n_vars, *shape)`."""
    if isinstance(atol, jax.core.Tracer) or np.ndim(atol) == 0:
        return atol
    state = model.initial_state()
    name, n_vars = type(model).__name__, len(state.names)
    if np.shape(atol) != (n_vars,):
        raise ValueError(
            f"atol has shape {np.shape(atol)}: give one number, or one per state variable of "
            f"{name} (shape ({n_vars},), in the order {', '.join(state.names)})"
        )
    shapes = {np.shape(v) for _, v in state.items()}
    if len(shapes) != 1:
        raise ValueError(
            f"a per-variable atol needs the state variables of {name} to share one shape; "
            f"they have shapes {sorted(shapes)}: give one number"
        )
    (shape,) = shapes
    dtype = jnp.finfo(Layout.of(state).dtype).dtype  # the state's precision, not x64's
    return jnp.reshape(jnp.asarray(atol, dtype), (n_vars,) + (1,) * len(shape))
