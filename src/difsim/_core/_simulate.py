"""`simulate`: solve a model's ODE with diffrax and return a labelled `Solution`."""

from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax.sharding import NamedSharding

from difsim import solvers
from difsim._core._custom_types import RealScalarLike, SaveSpec, Times
from difsim._core._event import Event, to_diffrax_event
from difsim._core._fixed_step import plan_scan, scan_solve
from difsim._core._model import Model
from difsim._core._solution import Solution
from difsim._core._solver_defaults import resolve_solver_settings
from difsim._core._stability import check_explicit_step
from difsim._core._state import is_finite_concrete
from difsim._core._vector_field import Layout, SpectrumField, VectorField, check_rhs, check_spectrum
from difsim._pde import constrain
from difsim._status import Status, status_from_result

DEFAULT_SAVE_POINTS = 101
# State sizes above which named implicit solvers go matrix-free (solvers.newton_krylov).
MATRIX_FREE_SIZE = 1000


def simulate(
    model: Model,
    t: Times | None = None,
    *,
    t0: RealScalarLike | None = None,
    t1: RealScalarLike | None = None,
    save: SaveSpec = None,
    solver: str | dfx.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0: RealScalarLike | None = None,
    controller: str | dfx.AbstractStepSizeController | None = None,
    max_steps: int | None = None,
    adjoint: str | dfx.AbstractAdjoint = "checkpoint",
    event: Event | Callable | None = None,
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
      from `t0` to `t1`; default 101), or an array of times in `[t0, t1]`.
    - `solver`: a name from `difsim.solvers.SOLVERS` or any diffrax solver instance. Default:
      the model's `solver_defaults` (e.g. ETDRK4 with a fixed step for a stiff PDE), else
      `"tsit5"`, or `"kvaerno5"` for models with `stiff = True`.
    - `rtol`, `atol`: relative/absolute tolerances of the adaptive step-size controller (and of
      the nonlinear solves of implicit solvers); default 1e-6 (or the model's).
    - `dt0`: initial step (adaptive) or the step (fixed-step solvers, `controller="constant"`).
    - `controller`: `"pid"`, `"constant"`, or a diffrax controller (default: PID when the solver
      has an error estimate).
    - `max_steps`: most steps before the solve gives up with `Status.MAX_STEPS` (default
      16384).

    Arguments left as `None` take the model's `solver_defaults`, then difsim's defaults.
    - `adjoint`: how `jax.grad` differentiates the solve: `"checkpoint"` (reverse mode with
      recursive checkpointing; default), `"forward"` (forward mode; best for few parameters
      and `jax.jacfwd`), `"backsolve"` (continuous adjoint, O(1) memory), `"direct"`, or a
      diffrax adjoint.
    - `event`: an [`Event`][] (or a callable `(t, s, model) -> scalar`) that ends the solve.
    - `throw`: if `True` (default) a failed solve raises an error with a hint; if `False` the
      failure is reported in `Solution.status` and the failed values are NaN (what sweeps use).
    - `progress`: show a progress bar (tqdm) while solving.
    - `sharding`: split the fields of a PDE model across devices, e.g.
      `ds.domain_sharding(model.grid)` (a `NamedSharding` for one field; state arrays with
      more axes are split along their trailing ones). Results equal the unsharded solve.

    **Returns:** a [`Solution`][]; `jit`, `vmap` and `grad` pass through.
    """
    if not isinstance(model, Model):
        raise TypeError(f"simulate expects a difsim.Model instance, got {type(model).__name__}")
    name = type(model).__name__
    ts, t0, t1, final_only = _resolve_times(t, t0, t1, save)

    settings = resolve_solver_settings(
        type(model), solver=solver, dt0=dt0, controller=controller, rtol=rtol, atol=atol,
        max_steps=max_steps,
    )  # fmt: skip
    solver, dt0, controller = settings["solver"], settings["dt0"], settings["controller"]
    rtol, atol, max_steps = settings["rtol"], settings["atol"], settings["max_steps"]
    solver_obj = solvers.make_solver(solver)
    state0 = model.initial_state()
    size = sum(int(np.size(v)) for _, v in state0.items())
    if isinstance(solver, str) and isinstance(solver_obj, dfx.AbstractImplicitSolver):
        if size > MATRIX_FREE_SIZE:
            # A dense Jacobian of a PDE state is O(size²) memory and O(size³) to factorise:
            # named implicit solvers switch to Newton–Krylov (matrix-free GMRES).
            solver_obj = solvers.newton_krylov(solver_obj)
    imex = isinstance(solver_obj, dfx.AbstractSolver) and _is_imex(solver_obj)
    if imex and not model.has_split():
        raise ValueError(
            f"solver {type(solver_obj).__name__} is IMEX: {name} must define rhs_nonstiff and "
            "rhs_stiff (the explicit and implicit parts of its right-hand side)"
        )
    controller_obj = solvers.make_controller(controller, solver_obj, rtol=rtol, atol=atol, dt0=dt0)
    fixed_step = not isinstance(controller_obj, dfx.AbstractAdaptiveStepSizeController)
    implicit = isinstance(solver_obj, dfx.AbstractImplicitSolver)
    if isinstance(solver, str) and implicit and fixed_step:
        # A named implicit solver takes its root-finder tolerances from an adaptive
        # controller; with fixed steps there is none (diffrax refuses): use rtol/atol.
        solver_obj = eqx.tree_at(
            lambda s: (s.root_finder.rtol, s.root_finder.atol, s.root_finder.norm),
            solver_obj,
            (rtol, atol, optx.max_norm),
        )
    adjoint_obj = solvers.make_adjoint(adjoint)

    if len(state0) == 0:
        raise ValueError(f"{name} declares no state variables")
    for var, value in state0.items():
        if not is_finite_concrete(value):
            raise ValueError(f"initial value of state variable {var!r} of {name} is not finite")
    layout = Layout.of(state0)
    parts = ("rhs_nonstiff", "rhs_stiff") if imex else ("rhs",)
    spectral = imex and model.has_spectrum()
    if spectral:
        check_spectrum(model, layout)  # first: the derived rhs_nonstiff would fail less clearly
    for part in parts:
        check_rhs(model, layout, part)
    if fixed_step and not imex:
        check_explicit_step(
            solver_obj, VectorField(layout, "rhs"), model, t0, layout.pack(state0.values), dt0, name
        )
    terms = tuple(dfx.ODETerm(VectorField(layout, part)) for part in parts)
    if spectral:
        physical = VectorField(layout, "rhs_nonstiff")
        terms = (solvers.SpectralODETerm(physical, SpectrumField(layout)), terms[1])
    terms = dfx.MultiTerm(*terms) if imex else terms[0]
    dfx_event = None if event is None else to_diffrax_event(event, layout, rtol, atol)
    meter = dfx.TqdmProgressMeter() if progress else dfx.NoProgressMeter()

    if event is not None and isinstance(adjoint_obj, dfx.BacksolveAdjoint):
        raise ValueError(
            "adjoint='backsolve' cannot differentiate through a terminating event; use "
            "adjoint='checkpoint' (or 'forward')"
        )
    if sharding is not None and not isinstance(sharding, NamedSharding):
        raise TypeError(
            f"sharding must be a jax.sharding.NamedSharding (see ds.domain_sharding), got "
            f"{type(sharding).__name__}"
        )
    # Times take the state's (real) dtype: diffrax would otherwise promote a float32 state
    # to the float64 of Python-float times under x64, ignoring the precision the user chose.
    dtype = jnp.finfo(layout.dtype).dtype
    return _solve(
        model,
        None if ts is None else jnp.asarray(ts, dtype),
        jnp.asarray(t0, dtype),
        jnp.asarray(t1, dtype),
        None if dt0 is None else jnp.asarray(dt0, dtype),
        terms=terms,
        solver=solver_obj,
        controller=controller_obj,
        adjoint=adjoint_obj,
        event=dfx_event,
        meter=meter,
        layout=layout,
        final_only=final_only,
        max_steps=max_steps,
        throw=throw,
        sharding=sharding,
        scan_plan=plan_scan(
            ts,
            t0,
            t1,
            dt0,
            final_only=final_only,
            fixed_step=isinstance(controller_obj, dfx.ConstantStepSize),
            event=dfx_event,
            adjoint=adjoint_obj,
            progress=progress,
            max_steps=max_steps,
        ),  # fmt: skip
    )


def _is_imex(solver: dfx.AbstractSolver) -> bool:
    info = solvers.solver_info(solver)
    if info is not None:
        return info.imex
    return "MultiTerm" in str(getattr(solver, "term_structure", ""))


@eqx.filter_jit
def _solve(
    model,
    ts,
    t0,
    t1,
    dt0,
    *,
    terms,
    solver,
    controller,
    adjoint,
    event,
    meter,
    layout,
    final_only,
    max_steps,
    throw,
    sharding,
    scan_plan,
):
    save = dict(t1=True) if final_only else dict(ts=ts)
    # With an event, a second save of the end point gives `t_end`/`y_end`. Without one, a
    # plain SaveAt: diffrax's BacksolveAdjoint rejects `SaveAt(subs=...)`.
    if event is None:
        saveat = dfx.SaveAt(**save)
    else:
        saveat = dfx.SaveAt(subs=[dfx.SubSaveAt(**save), dfx.SubSaveAt(t1=True)])
    field_ndim = 0 if sharding is None else len(sharding.spec)
    y0 = constrain(layout.pack(model.initial_state().values), sharding, field_ndim)
    if scan_plan is not None:
        reached_saves, saved_ys, result, steps = scan_solve(
            terms, solver, t0, dt0, y0, model, scan_plan
        )
        save_ts = jnp.broadcast_to(t1, (1,)) if final_only else ts
        sol = _ScanSolution(
            ts=jnp.where(reached_saves, save_ts, jnp.inf),
            ys=saved_ys,
            result=result,
            stats=dict(num_steps=steps, num_accepted_steps=steps, num_rejected_steps=steps * 0),
        )
    else:
        sol = _diffrax_solve(
            terms, solver, t0, t1, dt0, y0, model, saveat, controller, adjoint, event, max_steps,
            meter,
        )  # fmt: skip
    status = status_from_result(sol.result)
    if event is None:
        saved_ts, saved_ys = sol.ts, sol.ys
    else:
        saved_ts, saved_ys = sol.ts[0], sol.ys[0]
    # diffrax marks save times it never reached with t = inf: blank them with NaN.
    reached = jnp.isfinite(saved_ts)
    failed = ~((status == Status.SUCCESS) | (status == Status.EVENT))
    reached = reached & ~(failed & final_only)
    mask = reached.reshape(reached.shape + (1,) * (jnp.ndim(y0) if layout.packed else 0))
    if layout.packed:
        saved_ys = jnp.where(mask, saved_ys, jnp.nan)
        nonfinite = ~jnp.all(jnp.isfinite(jnp.where(mask, saved_ys, 0)))
        ys = layout.unpack(saved_ys, axis=1)
    else:
        ys = {k: jnp.where(_expand(reached, v), v, jnp.nan) for k, v in saved_ys.items()}
        nonfinite = ~jnp.all(
            jnp.stack(
                [jnp.all(jnp.isfinite(jnp.where(_expand(reached, v), v, 0))) for v in ys.values()]
            )
        )
    status = jnp.where((status == Status.SUCCESS) & nonfinite, int(Status.NONFINITE), status)
    if final_only:
        # With an event the final state is the one where the solve stopped, not at t1.
        out_ts = jnp.broadcast_to(t1 if event is None else sol.ts[1][0], (1,))
    else:
        out_ts = ts
    t_end = y_end = None
    if event is not None:
        t_end = sol.ts[1][0]
        y_end = layout.unpack(sol.ys[1], axis=1)
        y_end = {k: v[0] for k, v in y_end.items()}
    if throw:
        failed = ~((status == Status.SUCCESS) | (status == Status.EVENT))
        name = type(model).__name__
        messages = [f"simulate({name}) failed [{s.name}]: {s.message}" for s in Status]
        # Guard every output: under an outer jit, a check attached to `ts` alone is dead
        # code (and silently dropped) whenever the caller only reads `ys`.
        if sharding is None:
            out_ts, ys, status, t_end, y_end = eqx.branched_error_if(
                (out_ts, ys, status, t_end, y_end), failed, status, messages
            )
        else:
            # The check's host callback would gather sharded fields onto one device: guard
            # the small outputs only (read `status` or `ts` to be sure it runs under jit).
            out_ts, status, t_end = eqx.branched_error_if(
                (out_ts, status, t_end), failed, status, messages
            )
    ys = constrain(ys, sharding, field_ndim)
    return Solution(
        ts=out_ts,
        ys=ys,
        status=status,
        num_steps=sol.stats["num_steps"],
        num_accepted_steps=sol.stats["num_accepted_steps"],
        num_rejected_steps=sol.stats["num_rejected_steps"],
        t_end=t_end,
        y_end=y_end,
        model=model,
        var_info=layout.info,
        solver=type(solver).__name__,
    )


class _ScanSolution(NamedTuple):
    ts: Any
    ys: Any
    result: Any
    stats: dict


def _diffrax_solve(
    terms, solver, t0, t1, dt0, y0, model, saveat, controller, adjoint, event, max_steps, meter
):
    return dfx.diffeqsolve(
        terms,
        solver,
        t0,
        t1,
        dt0,
        y0,
        args=model,
        saveat=saveat,
        stepsize_controller=controller,
        adjoint=adjoint,
        event=event,
        max_steps=max_steps,
        throw=False,
        progress_meter=meter,
    )


def _expand(mask, value):
    return mask.reshape(mask.shape + (1,) * (value.ndim - mask.ndim))


def _concrete(x: Any) -> np.ndarray | None:
    try:
        return np.asarray(x)
    except Exception:  # traced under jit/vmap: checked by the solver instead
        return None


def _resolve_times(t, t0, t1, save):
    """Turn the time arguments into `(ts, t0, t1, final_only)`, raising on nonsense."""
    if t is not None:
        clash = [k for k, v in dict(t0=t0, t1=t1, save=save).items() if v is not None]
        if clash:
            raise ValueError(f"give either t (the save times) or t0/t1/save, not t and {clash[0]}")
        ts = jnp.asarray(t)
        if ts.ndim != 1 or ts.shape[0] < 2:
            raise ValueError(
                f"t must be a 1-D array of at least 2 save times, got shape {ts.shape}"
            )
        _check_increasing(ts, "t")
        return ts, ts[0], ts[-1], False
    if t0 is None or t1 is None:
        raise ValueError("give the save times t, or both t0 and t1")
    c0, c1 = _concrete(t0), _concrete(t1)
    if c0 is not None and c1 is not None and not c1 > c0:
        raise ValueError(f"t1 must be greater than t0, got t0={float(c0)}, t1={float(c1)}")
    if save is None:
        save = DEFAULT_SAVE_POINTS
    if isinstance(save, str):
        if save != "final":
            raise ValueError(f"save must be 'final', a number of points or times, got {save!r}")
        return None, t0, t1, True
    if isinstance(save, (int, np.integer)) and not isinstance(save, bool):
        if save < 1:
            raise ValueError(f"save must be at least 1 point, got {save}")
        if save == 1:
            return None, t0, t1, True
        return jnp.linspace(t0, t1, int(save)), t0, t1, False
    ts = jnp.asarray(save)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"save times must be a 1-D array, got shape {ts.shape}")
    _check_increasing(ts, "save")
    cts = _concrete(ts)
    if cts is not None and c0 is not None and c1 is not None:
        outside = cts[(cts < c0) | (cts > c1)]
        if outside.size:
            raise ValueError(
                f"save time {float(outside[0])} lies outside [t0, t1] = [{float(c0)}, {float(c1)}]"
            )
    return ts, t0, t1, False


def _check_increasing(ts, key: str) -> None:
    cts = _concrete(ts)
    if cts is None:
        return
    if not np.all(np.isfinite(cts)):
        raise ValueError(f"{key} contains a non-finite time")
    if cts.size > 1 and not np.all(np.diff(cts) > 0):
        raise ValueError(f"{key} must be strictly increasing")
