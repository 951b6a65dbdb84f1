"""The checked plan of one `simulate` call: every argument checked, resolved and combined
once, before anything is traced or compiled.

`plan_solve` turns `simulate`'s arguments into a `SolvePlan` (save times, solver settings,
the state's layout, the events, the fixed-step scan, the adjoint) or refuses them by name;
`simulate` then runs the plan through the backend its kind of solve needs
(`_backends.py`). Sweeps build their plans from a `SaveSpec` and `SolverSettings` they
checked once for every trajectory.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import jax.numpy as jnp
from jax.sharding import NamedSharding

from difsim import solvers
from difsim._core._adjoint import check_backsolve
from difsim._core._dae import check_index_one, refuse_dae
from difsim._core._event_plan import EventPlan, plan_events
from difsim._core._fixed_step import ScanPlan, plan_scan
from difsim._core._model import Model
from difsim._core._own_steps import check_own_steps, own_steps
from difsim._core._save import SaveSpec, check_dt0, check_saved_memory
from difsim._core._sde import check_key, sde_settings
from difsim._core._sde_steps import check_sde_plan
from difsim._core._solver_settings import SolverSettings, solver_settings
from difsim._core._stability import check_explicit_step
from difsim._core._state import State, is_finite_concrete
from difsim._core._terms import check_stiff_term
from difsim._core._vector_field import Layout, VectorField, check_rhs, check_spectrum


@dataclasses.dataclass(frozen=True)
class SolvePlan:
    """What one solve will do, every part checked.

    **Fields:** `times` (the save spec), `settings` (solver, controller, tolerances),
    `key` (the Brownian key of an SDE, else `None`); for a solve under difsim's own steps,
    `own` (the adjoint and its solve function) and nothing else below; otherwise `layout`
    (how the state packs into one array), `adjoint` (a diffrax adjoint), `events` (the
    event plan, or `None`), `scan` (the fixed-step scan, or `None`) and `dtype` (the real
    dtype of times and state).
    """

    times: SaveSpec
    settings: SolverSettings
    key: Any = None
    own: tuple[Any, Callable] | None = None
    layout: Layout | None = None
    adjoint: dfx.AbstractAdjoint | None = None
    events: EventPlan | None = None
    scan: ScanPlan | None = None
    dtype: Any = None


def plan_solve(model, t, *, t0, t1, save, key, brownian, solver, rtol, atol, dt0, controller,
               max_steps, root_tol, adjoint, event, max_events, progress,
               sharding) -> SolvePlan:  # fmt: skip
    """`simulate`'s arguments as a `SolvePlan`; raises `TypeError`/`ValueError` naming the
    argument (or the model's method) at fault."""
    if not isinstance(model, Model):
        raise TypeError(f"simulate expects a difsim.Model instance, got {type(model).__name__}")
    key = check_key(model, key, brownian)
    dense = isinstance(save, str) and save == "dense"
    times = _save_spec(t, t0=t0, t1=t1, save="final" if dense else save)
    given = dict(controller=controller, dt0=check_dt0(dt0), rtol=rtol, atol=atol,
                 max_steps=max_steps, root_tol=root_tol)  # fmt: skip
    state0 = model.initial_state()
    if (own := own_steps(adjoint)) is not None:
        check_own_steps(own[0].name, key=key, event=event, dense=dense, sharding=sharding,
                        progress=progress, model=model)  # fmt: skip
        settings = _solver_settings(model, solver, given)
        layout = checked_layout(model, state0, settings.imex)
        if layout.algebraic:  # packing the state is work an ODE's solve need not do here
            check_index_one(model, layout, times.t0, layout.pack(state0.values))
        return SolvePlan(times, settings, own=own)
    adjoint_obj = solvers.make_adjoint(adjoint)
    if key is None:
        settings = _solver_settings(model, solver, given)
        layout = checked_layout(model, state0, settings.imex)
    else:  # an SDE: its noise picks the solver, and needs the state's layout
        layout = checked_layout(model, state0, False)
        refuse_dae(layout, type(model).__name__, "noise (a diffusion)")
        settings = sde_settings(model, layout, solver, given, adjoint_obj, brownian, times)
    _check_steps(model, state0, times, layout, settings, adjoint, key)
    events = plan_events(model, event, layout, settings.rtol, settings.atol, max_events, dense)
    if layout.algebraic:
        if events is not None and events.events:
            refuse_dae(layout, type(model).__name__, "an event")
        check_index_one(model, layout, times.t0, layout.pack(state0.values))
    _check_adjoint_and_sharding(events, adjoint_obj, sharding)
    check_sde_plan(key, settings, events, times, type(model).__name__)
    scan = plan_scan(
        times.save_times(), times.t0, times.t1, settings.dt0, final_only=times.final_only,
        fixed_step=isinstance(settings.controller, dfx.ConstantStepSize), event=events,
        adjoint=adjoint_obj, progress=progress, max_steps=settings.max_steps,
    )  # fmt: skip
    # Times take the state's (real) dtype: diffrax would otherwise promote a float32 state
    # to the float64 of Python-float times under x64, ignoring the precision the user chose.
    dtype = jnp.finfo(layout.dtype).dtype
    return SolvePlan(times, settings, key, None, layout, adjoint_obj, events, scan, dtype)


def _check_steps(model, state0, times, layout, settings, adjoint, key) -> None:
    """What the solver's steps need: memory for the saved times, an adjoint the solver
    supports, a stable fixed step, a stiff term the implicit stages can solve."""
    name = type(model).__name__
    check_saved_memory(times, layout, name)
    check_backsolve(adjoint, type(model), settings.solver_requested)
    imex = settings.imex and key is None
    if settings.fixed_step and not imex:
        y0, field = layout.pack(state0.values), VectorField(layout, "rhs")
        check_explicit_step(settings.solver, field, model, times.t0, y0, settings.dt0, name)
    if imex:
        check_stiff_term(model, layout, settings.solver, times.t0, settings.dt0)


def _save_spec(t, **loose) -> SaveSpec:
    if not isinstance(t, SaveSpec):
        return SaveSpec(t, **loose)
    clash = [k for k, v in loose.items() if v is not None]
    if clash:
        raise ValueError(f"t is a SaveSpec, which holds t0, t1 and save: leave out {clash[0]}")
    return t


def _solver_settings(model: Model, solver, given: dict[str, Any]) -> SolverSettings:
    if not isinstance(solver, SolverSettings):
        return solver_settings(model, solver=solver, **given)
    clash = [k for k, v in given.items() if v is not None]
    if clash:
        raise ValueError(f"solver is a SolverSettings, which holds {clash[0]}: leave it out")
    return solver


def checked_layout(model: Model, state0: State, imex: bool) -> Layout:
    """The layout of `model`'s state, after checking the initial values and what each
    right-hand side the solve calls returns."""
    name = type(model).__name__
    if len(state0) == 0:
        raise ValueError(f"{name} declares no state variables")
    for var, value in state0.items():
        if not is_finite_concrete(value):
            raise ValueError(f"initial value of state variable {var!r} of {name} is not finite")
    layout = Layout.of(state0)
    if imex and model.has_spectrum():
        check_spectrum(model, layout)  # first: the derived rhs_nonstiff would fail less clearly
    for part in ("rhs_nonstiff", "rhs_stiff") if imex else ("rhs",):
        check_rhs(model, layout, part)
    return layout


def _check_adjoint_and_sharding(plan: EventPlan | None, adjoint, sharding) -> None:
    if plan is not None and isinstance(adjoint, dfx.BacksolveAdjoint):
        what = "events" if plan.events else "dense output"
        raise ValueError(
            f"adjoint='backsolve' cannot differentiate a solve with {what} (a terminating "
            "event included); use adjoint='checkpoint' (or 'forward')"
        )
    if sharding is not None and not isinstance(sharding, NamedSharding):
        raise TypeError(
            f"sharding must be a jax.sharding.NamedSharding (see ds.domain_sharding), got "
            f"{type(sharding).__name__}"
        )
