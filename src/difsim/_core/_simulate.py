"""`simulate`: solve a model's ODE with diffrax and return a labelled `Solution`."""

from collections.abc import Callable, Sequence

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jaxtyping import PRNGKeyArray

from difsim._core._adjoint import (
    forward_mode_error,
    forward_only,
    is_stiff_solver,
)
from difsim._core._backends import AbstractBackend, choose_backend
from difsim._core._custom_types import RealScalarLike, SaveLike, Times
from difsim._core._dae import consistent_state, init_status
from difsim._core._event import AbstractEvent
from difsim._core._model import Model
from difsim._core._progress_meter import solve_meter
from difsim._core._sde_steps import restarts
from difsim._core._solution import Solution
from difsim._core._solve_plan import SolvePlan, plan_solve
from difsim._core._terms import model_terms, solve_controller, traced_tolerances
from difsim._core._throw import raise_if_failed
from difsim._core._vector_field import Layout
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
    plan = plan_solve(
        model, t, t0=t0, t1=t1, save=save, key=key, brownian=brownian, solver=solver,
        rtol=rtol, atol=atol, dt0=dt0, controller=controller, max_steps=max_steps,
        root_tol=root_tol, adjoint=adjoint, event=event, max_events=max_events,
        progress=progress, sharding=sharding,
    )  # fmt: skip
    if plan.own is not None:
        return _run_own_steps(plan, model, throw)
    try:
        return _run_solve(model, plan, progress, throw, sharding)
    except SolveError as error:  # raised here: the user's call and this line, no internals
        raise error.with_traceback(None) from None
    except TypeError as error:
        explained = forward_mode_error(plan.adjoint, error)
        if explained is None:
            raise
        raise explained from error


def _run_solve(model: Model, plan: SolvePlan, progress, throw, sharding) -> Solution:
    times, settings, dtype = plan.times, plan.settings, plan.dtype
    t0, t1 = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
    dt0 = None if settings.dt0 is None else jnp.asarray(settings.dt0, dtype)
    terms = model_terms(model, plan.layout, settings, plan.key, t0, t1, dt0)
    ts = times.save_times()
    ts = None if ts is None else jnp.asarray(ts, dtype)
    controller = solve_controller(settings, plan.key, ts, times.final_only, t0,
                                  restarts(plan.events), t1=t1)  # fmt: skip
    sol = _solve(
        model, ts, t0, t1, dt0, backend=choose_backend(plan.scan, plan.events), terms=terms,
        solver=settings.solver, controller=traced_tolerances(controller, dtype),
        adjoint=plan.adjoint,
        meter=solve_meter(model, times, plan.layout) if progress else dfx.NoProgressMeter(),
        layout=plan.layout, final_only=times.final_only, max_steps=settings.max_steps,
        sharding=sharding, init_tol=_init_tolerances(plan),
    )  # fmt: skip
    if not throw:
        return sol
    stiff = is_stiff_solver(settings.solver)
    return raise_if_failed(sol, type(model).__name__, stiff=stiff, sharded=sharding is not None)


def _init_tolerances(plan: SolvePlan):
    """The solve's `(rtol, atol)` as arrays (arguments, not constants, of the compiled
    solve) for the consistent initialisation of a differential-algebraic model; `None`
    for any other model."""
    if not plan.layout.algebraic:
        return None
    settings = plan.settings
    return jnp.asarray(settings.rtol, plan.dtype), jnp.asarray(settings.atol, plan.dtype)


def _run_own_steps(plan: SolvePlan, model: Model, throw: bool) -> Solution:
    """The solve under an adjoint of difsim's own steps (`_own_steps.py`)."""
    adjoint, solve = plan.own
    settings = plan.settings
    sol = solve(model, plan.times, settings, adjoint)
    if not throw:
        return sol
    try:
        stiff = is_stiff_solver(settings.solver)
        return raise_if_failed(sol, type(model).__name__, stiff=stiff, sharded=False)
    except SolveError as error:
        raise error.with_traceback(None) from None


@eqx.filter_jit
def _solve(model, ts, t0, t1, dt0, *, backend: AbstractBackend, terms, solver, controller,
           adjoint, meter, layout, final_only, max_steps, sharding, init_tol):  # fmt: skip
    field_ndim = 0 if sharding is None else len(sharding.spec)
    y0 = constrain(layout.pack(model.initial_state().values), sharding, field_ndim)
    if init_tol is not None:  # a differential-algebraic model
        y0, consistent = consistent_state(model, layout, t0, y0, rtol=init_tol[0],
                                          atol=init_tol[1])  # fmt: skip
    raw = backend.run(
        terms=terms, solver=solver, t0=t0, t1=t1, dt0=dt0, y0=y0, model=model, ts=ts,
        final_only=final_only, controller=controller, adjoint=adjoint, max_steps=max_steps,
        meter=meter, layout=layout,
    )  # fmt: skip
    saved_ts, status, stats = raw.saved_ts, raw.status, raw.stats
    if init_tol is not None:  # nothing was solved from inconsistent initial values
        saved_ts, status = jnp.where(consistent, saved_ts, jnp.inf), init_status(status, consistent)
        stats = {k: jnp.where(consistent, v, 0) for k, v in stats.items()}
    ys, status = _blank_unreached(saved_ts, raw.saved_ys, status, layout, final_only)
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
        num_steps=stats["num_steps"],
        num_accepted_steps=stats["num_accepted_steps"],
        num_rejected_steps=stats["num_rejected_steps"],
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
