"""`simulate`: solve a model's ODE with diffrax and return a labelled `Solution`."""

from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jaxtyping import PRNGKeyArray

from difsim import solvers
from difsim._core._adjoint import (
    check_backsolve,
    forward_mode_error,
    forward_only,
    is_stiff_solver,
)
from difsim._core._backends import AbstractBackend, choose_backend
from difsim._core._custom_types import RealScalarLike, SaveLike, Times
from difsim._core._event import AbstractEvent
from difsim._core._event_plan import EventPlan, plan_events
from difsim._core._fixed_step import plan_scan
from difsim._core._model import Model
from difsim._core._own_steps import check_own_steps, own_steps
from difsim._core._progress_meter import solve_meter
from difsim._core._save import SaveSpec, check_dt0, check_saved_memory
from difsim._core._sde import check_key, sde_settings
from difsim._core._sde_steps import check_sde_plan, restarts
from difsim._core._solution import Solution
from difsim._core._solver_settings import SolverSettings, solver_settings
from difsim._core._stability import check_explicit_step
from difsim._core._state import State, is_finite_concrete
from difsim._core._terms import check_stiff_term, model_terms, solve_controller, traced_tolerances
from difsim._core._throw import raise_if_failed
from difsim._core._vector_field import Layout, VectorField, check_rhs, check_spectrum
from difsim._pde import constrain
from difsim._status import SolveError, Status, result_index


def simulate(
    model: Model,
    t: Times | None = None,
    *,
    t0: RealScalarLike | None = None,
    t1: RealScalarLike | None = None,
    save: SaveLike = None,
    key: PRNGKeyArray | None = None,
    brownian: str | None = None,
    solver: str | dfx.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0: RealScalarLike | None = None,
    controller: str | dfx.AbstractStepSizeController | None = None,
    max_steps: int | None = None,
    root_tol: float | None = None,
    adjoint: str | dfx.AbstractAdjoint = "checkpoint",
    event: AbstractEvent | Callable | Sequence[AbstractEvent | Callable] | None = None,
    max_events: int | None = None,
    throw: bool = True,
    progress: bool = False,
    sharding: NamedSharding | None = None,
) -> Solution:
    """Integrate `model` in time and return its trajectory.

    Give the times either as `t` (an increasing array of save times; the solve runs from
    `t[0]` to `t[-1]`) or as `t0`, `t1` and `save`. Times are in the model's `time_units`.

    **Arguments:**

    - `model`: a [`Model`][] instance; its `state` is the initial condition.
    - `t`: save times, shape `(time,)`.
    - `t0`, `t1`: start and end of the solve (`t1 > t0`), when `t` is not given.
    - `save`: `"final"` (only the state at `t1`), an integer `n` (`n` evenly spaced times
      from `t0` to `t1`; default 101), an array of times in `[t0, t1]`, or `"dense"`: the
      solver's interpolant is kept ([`Solution.evaluate`][difsim.Solution.evaluate] gives
      the state at any time; `ys` holds the final state, as with `"final"`).
      At an event time the saved state is the one just after the event.
    - `key`: for a stochastic model (one with `diffusion`; see `docs/stochastic.md`), the
      PRNG key of its Brownian path, e.g. `jax.random.key(0)`: the same key gives the same
      path, whatever the solver and its steps. Required for such a model, refused otherwise.
    - `brownian`: that path: `"tree"` (default; one path for any steps) or `"steps"` (one
      draw per fixed step: much cheaper; the path changes with `dt0`).
    - `solver`: a name from `difsim.solvers.SOLVERS` or any diffrax solver instance. Default:
      the model's `solver_defaults` (e.g. ETDRK4 with a fixed step for a stiff PDE), else
      `"tsit5"`, or `"kvaerno5"` for models with `stiff = True`. A stochastic model takes a
      name from `difsim.solvers.SDE_SOLVERS` (default `"shark"` for additive noise, else
      `"euler"` (Itô) or `"heun"` (Stratonovich); SDE tolerances default to 1e-3).
    - `rtol`, `atol`: relative/absolute tolerances of the adaptive step-size controller (and of
      the nonlinear solves of implicit solvers); default 1e-6 (or the model's). Checked:
      finite and positive, `rtol < 1`, and an adaptive solve's `atol` below the size of the
      initial state (larger, the error test accepts any step); `atol` may also be one value
      per state variable.
      Leave both out when `controller` is an instance: it carries its own.
    - `dt0`: initial step (adaptive) or the step (fixed-step solvers, `controller="constant"`).
    - `controller`: `"pid"`, `"constant"`, or a diffrax controller (default: PID when the solver
      has an error estimate).
    - `max_steps`: most steps before the solve gives up with `Status.MAX_STEPS` (default
      16384).
    - `root_tol`: how exactly a named implicit solver (`"kvaerno5"`, ...) solves its
      stages: their estimated error as a fraction of the step's error allowance (default
      0.01; see `difsim.solvers.StageNewton`). Only for named implicit solvers.

    Arguments left as `None` take the model's `solver_defaults`, then difsim's defaults.
    - `adjoint`: how `jax.grad` differentiates the solve: `"checkpoint"` (reverse mode with
      recursive checkpointing; default), `"forward"` (forward mode only; best for few
      parameters and `jax.jacfwd`), `"backsolve"` (continuous adjoint, O(1) memory; raises
      if its backward solve fails; refused for stiff models and solvers), `"direct"` (both
      modes), `"discrete"` (the ensemble engine's own steps, one lane, and its discrete
      adjoint: both modes, bounded memory, the cheaper reverse mode for a network in
      `rhs`; ODEs without events, its solvers and the PID controller only), or a diffrax
      adjoint.
    - `event`: an [`Event`][] or [`TimeEvent`][] (a callable `(t, s, model) -> scalar` is
      an `Event` that ends the solve), or a list of them, in addition to the model's own
      `events`. Events that happened are in `Solution.events`.
    - `max_events`: most events in one solve (default: the model's `max_events`, 100);
      one more ends the solve with `Status.EVENT_LIMIT` (a chattering model cannot hang).
    - `throw`: if `True` (default) a failed solve raises [`SolveError`][difsim.SolveError]
      (its `status` and `solution` attributes say how and where it failed; inside
      `jax.jit`/`jax.vmap`, equinox's `EquinoxRuntimeError` with the same message); if
      `False` the failure is reported in `Solution.status` and the failed values are NaN
      (what sweeps use). A right-hand side that turns NaN/inf ends an adaptive solve there,
      `Status.NONFINITE`.
    - `progress`: report progress in model time while solving (`t = 412.5 of 2000 s`): a
      bar on a terminal, log lines elsewhere (docs: "Progress and logging"). It costs a
      host callback every few steps (about 1 %), and keeps the program out of JAX's
      persistent compilation cache. None when events restart the solve.
    - `sharding`: split the fields of a PDE model across devices, e.g.
      `ds.domain_sharding(model.grid)` (a `NamedSharding` for one field; state arrays with
      more axes are split along their trailing ones). Results equal the unsharded solve.

    **Returns:** a [`Solution`][]; `jit`, `vmap` and `grad` pass through.

    **Example:**

    ```python
    import jax
    import jax.numpy as jnp

    import difsim as ds

    sol = ds.simulate(ds.models.ExponentialDecay(k=0.5), t0=0.0, t1=2.0, save=5)
    assert sol.status == ds.Status.SUCCESS and sol.ts.shape == (5,)
    assert jnp.allclose(sol.ys["y"], jnp.exp(-0.5 * sol.ts), rtol=1e-5)  # y(t) = exp(-k t)


    # Gradients pass through: d y(2) / dk = -2 exp(-2 k).
    def final(k):
        sol = ds.simulate(ds.models.ExponentialDecay(k=k), t0=0.0, t1=2.0, save="final")
        return sol.ys["y"][-1]


    assert jnp.allclose(jax.grad(final)(0.5), -2 * jnp.exp(-1.0), rtol=1e-4)
    ```
    """
    # Sweeps pass `t` as a checked `SaveSpec`, `solver` as resolved `SolverSettings` (once).
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
        return _run_own_steps(own, model, state0, times, _solver_settings(model, solver, given),
                              throw)  # fmt: skip
    adjoint_obj = solvers.make_adjoint(adjoint)
    if key is None:
        settings = _solver_settings(model, solver, given)
        layout = _checked_layout(model, state0, settings.imex)
    else:  # an SDE: its noise picks the solver, and needs the state's layout
        layout = _checked_layout(model, state0, False)
        settings = sde_settings(model, layout, solver, given, adjoint_obj, brownian, times)
    check_saved_memory(times, layout, type(model).__name__)
    check_backsolve(adjoint, type(model), settings.solver_requested)
    imex = settings.imex and key is None
    if settings.fixed_step and not imex:
        y0, field = layout.pack(state0.values), VectorField(layout, "rhs")
        name = type(model).__name__
        check_explicit_step(settings.solver, field, model, times.t0, y0, settings.dt0, name)
    if imex:
        check_stiff_term(model, layout, settings.solver, times.t0, settings.dt0)
    dfx_event = plan_events(model, event, layout, settings.rtol, settings.atol, max_events, dense)
    _check_adjoint_and_sharding(dfx_event, adjoint_obj, sharding)
    check_sde_plan(key, settings, dfx_event, times, type(model).__name__)
    ts = times.save_times()
    scan_plan = plan_scan(
        ts, times.t0, times.t1, settings.dt0, final_only=times.final_only,
        fixed_step=isinstance(settings.controller, dfx.ConstantStepSize), event=dfx_event,
        adjoint=adjoint_obj, progress=progress, max_steps=settings.max_steps,
    )  # fmt: skip
    # Times take the state's (real) dtype: diffrax would otherwise promote a float32 state
    # to the float64 of Python-float times under x64, ignoring the precision the user chose.
    dtype = jnp.finfo(layout.dtype).dtype
    try:
        return _run_solve(model, ts, times, dtype, settings, adjoint_obj, dfx_event, layout,
                          progress, throw, sharding, scan_plan, key)  # fmt: skip
    except SolveError as error:  # raised here: the user's call and this line, no internals
        raise error.with_traceback(None) from None
    except TypeError as error:
        explained = forward_mode_error(adjoint_obj, error)
        if explained is None:
            raise
        raise explained from error


def _run_solve(model, ts, times, dtype, settings, adjoint_obj, dfx_event, layout, progress,
               throw, sharding, scan_plan, key) -> Solution:  # fmt: skip
    t0, t1 = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
    dt0 = None if settings.dt0 is None else jnp.asarray(settings.dt0, dtype)
    terms = model_terms(model, layout, settings, key, t0, t1, dt0)
    ts = None if ts is None else jnp.asarray(ts, dtype)
    controller = solve_controller(settings, key, ts, times.final_only, t0, restarts(dfx_event),
                                  t1=t1)  # fmt: skip
    sol = _solve(
        model, ts, t0, t1, dt0, backend=choose_backend(scan_plan, dfx_event), terms=terms,
        solver=settings.solver, controller=traced_tolerances(controller, dtype),
        adjoint=adjoint_obj,
        meter=solve_meter(model, times, layout) if progress else dfx.NoProgressMeter(),
        layout=layout, final_only=times.final_only, max_steps=settings.max_steps,
        sharding=sharding,
    )  # fmt: skip
    if not throw:
        return sol
    stiff = is_stiff_solver(settings.solver)
    return raise_if_failed(sol, type(model).__name__, stiff=stiff, sharded=sharding is not None)


def _run_own_steps(own, model, state0, times, settings, throw) -> Solution:
    """The solve under an adjoint of difsim's own steps (`_own_steps.py`)."""
    _checked_layout(model, state0, settings.imex)
    adjoint, solve = own
    sol = solve(model, times, settings, adjoint)
    if not throw:
        return sol
    try:
        stiff = is_stiff_solver(settings.solver)
        return raise_if_failed(sol, type(model).__name__, stiff=stiff, sharded=False)
    except SolveError as error:
        raise error.with_traceback(None) from None


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


def _checked_layout(model: Model, state0: State, imex: bool) -> Layout:
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


@eqx.filter_jit
def _solve(model, ts, t0, t1, dt0, *, backend: AbstractBackend, terms, solver, controller,
           adjoint, meter, layout, final_only, max_steps, sharding):  # fmt: skip
    field_ndim = 0 if sharding is None else len(sharding.spec)
    y0 = constrain(layout.pack(model.initial_state().values), sharding, field_ndim)
    raw = backend.run(
        terms=terms, solver=solver, t0=t0, t1=t1, dt0=dt0, y0=y0, model=model, ts=ts,
        final_only=final_only, controller=controller, adjoint=adjoint, max_steps=max_steps,
        meter=meter, layout=layout,
    )  # fmt: skip
    ys, status = _blank_unreached(raw.saved_ts, raw.saved_ys, raw.status, layout, final_only)
    # The final state is the one where the solve stopped (an event's time, or t1).
    out_ts = jnp.broadcast_to(raw.t_final, (1,)) if final_only else ts
    extras = (raw.record, raw.dense)
    out_ts, ys, t_end, y_end, extras = forward_only(
        adjoint, (out_ts, ys, raw.t_end, raw.y_end, extras)
    )
    return Solution(
        ts=out_ts,
        ys=constrain(ys, sharding, field_ndim),
        status=status,
        num_steps=raw.stats["num_steps"],
        num_accepted_steps=raw.stats["num_accepted_steps"],
        num_rejected_steps=raw.stats["num_rejected_steps"],
        t_end=t_end,
        y_end=y_end,
        events=extras[0],
        dense=extras[1],
        model=model,
        var_info=layout.info,
        solver=type(solver).__name__,
        result=result_index(raw.result),
    )


def _blank_unreached(saved_ts, saved_ys, status, layout: Layout, final_only: bool):
    """`(ys, status)`: the saved states by name, NaN at the save times the solve never
    reached (diffrax marks them t = inf), and `Status.NONFINITE` for a solve that
    "succeeded" with non-finite values."""
    reached = jnp.isfinite(saved_ts)
    failed = ~((status == Status.SUCCESS) | (status == Status.EVENT))
    reached = reached & ~(failed & final_only)
    if layout.packed:
        saved_ys = jnp.where(_expand(reached, saved_ys), saved_ys, jnp.nan)
        nonfinite = ~jnp.all(jnp.isfinite(jnp.where(_expand(reached, saved_ys), saved_ys, 0)))
        ys = layout.unpack(saved_ys, axis=1)
    else:
        ys = {k: jnp.where(_expand(reached, v), v, jnp.nan) for k, v in saved_ys.items()}
        nonfinite = ~jnp.all(
            jnp.stack(
                [jnp.all(jnp.isfinite(jnp.where(_expand(reached, v), v, 0))) for v in ys.values()]
            )
        )
    status = jnp.where((status == Status.SUCCESS) & nonfinite, int(Status.NONFINITE), status)
    return ys, status


def _expand(mask, value):
    return mask.reshape(mask.shape + (1,) * (value.ndim - mask.ndim))
