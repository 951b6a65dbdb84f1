"""Preparing a sweep: its options checked against the model, and everything derived from them
before a single trajectory runs (what is kept, the Dataset's layout, the settings hash, the
memory of one trajectory)."""

import dataclasses
import json
import logging

import jax.numpy as jnp
import numpy as np

from difsim import solvers
from difsim._core import (
    KEYS,
    Layout,
    Model,
    SaveSpec,
    SolverSettings,
    check_rhs,
    check_stiff_term,
    resolve_solver_settings,
    solver_settings,
)
from difsim._ensemble import unsupported
from difsim._sweep._chunking import bytes_per_trajectory
from difsim._sweep._layout import (
    OutputLayout,
    build_layout,
    default_controller,
    settings,
    settings_hash,
    sweep_attrs,
)
from difsim._sweep._observables import KeepPlan, plan_keep
from difsim._sweep._options import SolverChoice, SweepOptions, SweepTimes
from difsim._sweep._resources import check_sweep_resources
from difsim._sweep._samples import sde_solver_choice, stochastic_engine
from difsim._sweep._spec import AbstractSweep

logger = logging.getLogger("difsim")


@dataclasses.dataclass(frozen=True)
class SweepSetup:
    """A sweep's checked settings and what follows from them.

    **Fields:** `times` (checked; `save` is the same as the core's [`SaveSpec`][]), `solver`
    (checked and resolved), `dtype` (the run's floating
    dtype, from the model's state), `plan` (what is kept), `layout` (the Dataset's shape
    and attributes, `sweep_hash` included), `settings` (`{name: text}` of everything that
    determines the results), `per_traj` (estimated bytes of one trajectory in a chunk).
    """

    times: SweepTimes
    save: SaveSpec
    solver: SolverChoice
    dtype: np.dtype
    plan: KeepPlan
    layout: OutputLayout
    settings: dict[str, str]
    per_traj: int
    engine: str = "diffrax"

    @property
    def sweep_hash(self) -> str:
        """The hash of `settings`: identifies the sweep's result."""
        return self.layout.attrs["sweep_hash"]


def prepare(model: Model, spec: AbstractSweep, options: SweepOptions) -> SweepSetup:
    """Check `model`, `spec` and `options` against each other; nothing is compiled.

    **Raises:** `TypeError` for a `model` or `spec` of the wrong kind; `ValueError` naming
    the culprit for a key, time, solver or `keep` that does not fit.
    """
    if not isinstance(model, Model):
        raise TypeError(f"sweep expects a difsim.Model instance, got {type(model).__name__}")
    if not isinstance(spec, AbstractSweep):
        raise TypeError(
            "sweep expects a spec (ds.GridSweep, ds.ZipSweep or ds.RandomSweep), got "
            f"{type(spec).__name__}"
        )
    spec.check(model)
    save = SaveSpec(t0=options.t0, t1=options.t1, save=options.save)  # every time check
    times = SweepTimes(
        float(save.t0), float(save.t1), save.save,
        None if save.ts is None else np.asarray(save.ts, np.float64),
        save.n_saved, save.save_text,
    )  # fmt: skip
    solver = _resolve_solver(model, options)
    state = model.initial_state()
    # Traced once (no FLOPs): the ensemble engine calls `rhs` without simulate's checks, so
    # a Python `if` on the state or a missing derivative is named here.
    check_rhs(model, Layout.of(state), "rhs")
    if solver.settings.imex:  # a linear-implicit solver's stiff part must be affine
        check_stiff_term(
            model, Layout.of(state), solver.settings.solver, save.t0, solver.settings.dt0
        )
    dtype = np.dtype(jnp.result_type(*[jnp.asarray(v) for v in state.values.values()]))
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(jnp.result_type(float))
    plan = plan_keep(options.keep, type(model), state, times.n_saved, times.save_text)
    outputs = plan.outputs(model, times.n_saved, dtype)
    # Before any point is drawn, hashed or allocated: refuse what cannot fit.
    check_sweep_resources(model, spec, outputs, times.n_saved, dtype, options)
    if model.is_stochastic():  # the ensemble engine integrates ODEs: it would drop the noise
        engine, fallback = stochastic_engine(options.engine)
    else:
        engine, fallback = choose_engine(options.engine, solver.settings, model)
    # The engine is part of the result's identity: the two round differently, and a resumed
    # sweep must not mix their chunks.
    described = {**settings(model, spec, times, solver, plan, dtype), "engine": engine}
    attrs = sweep_attrs(model, spec, times, solver, plan, dtype, options.attrs)
    attrs["engine"] = engine
    if fallback:
        attrs["engine_fallback"] = fallback
    attrs["sweep_hash"] = settings_hash(described)
    attrs["sweep_settings"] = json.dumps(described, sort_keys=True)
    layout = build_layout(model, spec, outputs, plan, times, dtype, attrs)
    per_traj = bytes_per_trajectory(model, outputs, times.n_saved, dtype)
    return SweepSetup(times, save, solver, dtype, plan, layout, described, per_traj, engine)


def choose_engine(
    requested: str, settings: SolverSettings, model: Model | None = None
) -> tuple[str, str | None]:
    """`(engine, why not the ensemble engine)` for `engine=requested`: `"auto"` takes the
    ensemble engine whenever it supports the solve, and logs why when it does not.

    **Raises:** `ValueError` for `"ensemble"` with a solve it does not support.
    """
    if requested == "diffrax":
        return "diffrax", None
    reason = unsupported(settings, model)
    if reason is None:
        return "ensemble", None
    if requested == "ensemble":
        raise ValueError(f"engine='ensemble' cannot run this sweep: {reason}; use engine='auto'")
    logger.info("sweep: the diffrax engine runs this sweep (%s)", reason)
    return "diffrax", reason


def _resolve_solver(model: Model, options: SweepOptions) -> SolverChoice:
    """The options' solver settings, completed from the model's `solver_defaults` and
    difsim's (`resolve_solver_settings`), with the default controller spelt out, so that a
    config (which stores them) and a Python call that leaves them out are the same sweep:
    same hash, same compiled function."""
    given = {k: getattr(options, k) for k in KEYS}
    if model.is_stochastic():
        return sde_solver_choice(model, options)
    resolved = resolve_solver_settings(type(model), **given)
    solver = resolved["solver"]
    solvers.make_solver(solver)  # unknown names fail here, before anything compiles
    return SolverChoice(
        settings=solver_settings(model, **given),
        solver=solver,
        controller=default_controller(solver, resolved["controller"]),
        rtol=float(resolved["rtol"]),
        atol=_scalar_atol(resolved["atol"]),
        dt0=resolved["dt0"],
        max_steps=int(resolved["max_steps"]),
    )


resolve_solver = _resolve_solver  # for the Monte Carlo sweep's setup (`_mc_setup`)


def _scalar_atol(value) -> float:
    # The solver settings are a static (hashed) argument of the compiled chunk: an array
    # cannot be one yet.
    if np.ndim(value):
        raise ValueError(
            "atol: ds.sweep takes one absolute tolerance; for one per state variable use "
            "jax.vmap(ds.simulate)"
        )
    return float(value)
