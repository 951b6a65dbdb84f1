"""Preparing a sweep: its options checked against the model, and everything derived from them
before a single trajectory runs (what is kept, the Dataset's layout, the settings hash, the
memory of one trajectory)."""

import dataclasses
import json
import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from difsim import solvers
from difsim._core import KEYS, Model, resolve_solver_settings
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
from difsim._sweep._spec import AbstractSweep


@dataclasses.dataclass(frozen=True)
class SweepSetup:
    """A sweep's checked settings and what follows from them.

    **Fields:** `times`, `solver` (checked and resolved), `dtype` (the run's floating
    dtype, from the model's state), `plan` (what is kept), `layout` (the Dataset's shape
    and attributes, `sweep_hash` included), `settings` (`{name: text}` of everything that
    determines the results), `per_traj` (estimated bytes of one trajectory in a chunk).
    """

    times: SweepTimes
    solver: SolverChoice
    dtype: np.dtype
    plan: KeepPlan
    layout: OutputLayout
    settings: dict[str, str]
    per_traj: int

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
    # The two checks below are where a save/time specification object and resolved solver
    # settings from the core would plug in: each is one call.
    times = SweepTimes(*_check_times(options.t0, options.t1, options.save))
    solver = _resolve_solver(model, options)
    state = model.initial_state()
    dtype = np.dtype(jnp.result_type(*[jnp.asarray(v) for v in state.values.values()]))
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(jnp.result_type(float))
    plan = plan_keep(options.keep, type(model), state, times.n_saved, times.save_text)
    outputs = plan.outputs(model, times.n_saved, dtype)
    described = settings(model, spec, times, solver, plan, dtype)
    attrs = sweep_attrs(model, spec, times, solver, plan, dtype, options.attrs)
    attrs["sweep_hash"] = settings_hash(described)
    attrs["sweep_settings"] = json.dumps(described, sort_keys=True)
    layout = build_layout(model, spec, outputs, plan, times, dtype, attrs)
    per_traj = bytes_per_trajectory(model, outputs, times.n_saved, dtype)
    return SweepSetup(times, solver, dtype, plan, layout, described, per_traj)


def _resolve_solver(model: Model, options: SweepOptions) -> SolverChoice:
    """The options' solver settings, completed from the model's `solver_defaults` and
    difsim's (`resolve_solver_settings`), with the default controller spelt out, so that a
    config (which stores them) and a Python call that leaves them out are the same sweep:
    same hash, same compiled function."""
    resolved = resolve_solver_settings(type(model), **{k: getattr(options, k) for k in KEYS})
    solver = resolved["solver"]
    solvers.make_solver(solver)  # unknown names fail here, before anything compiles
    return SolverChoice(
        solver=solver,
        controller=default_controller(solver, resolved["controller"]),
        rtol=float(resolved["rtol"]),
        atol=float(resolved["atol"]),
        dt0=resolved["dt0"],
        max_steps=int(resolved["max_steps"]),
    )


def _check_times(t0: Any, t1: Any, save: Any):
    try:
        t0, t1 = float(t0), float(t1)
    except (TypeError, ValueError):
        raise ValueError(f"t0 and t1 must be numbers, got t0={t0!r}, t1={t1!r}") from None
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        raise ValueError(f"t1 must be greater than t0 (both finite), got t0={t0}, t1={t1}")
    if isinstance(save, str):
        if save != "final":
            raise ValueError(f"save must be 'final', a number of points or times, got {save!r}")
        return t0, t1, "final", None, 1, "'final'"
    if isinstance(save, int | np.integer) and not isinstance(save, bool):
        if save < 1:
            raise ValueError(f"save must be at least 1 point, got {save}")
        if save == 1:
            return t0, t1, "final", None, 1, "1"
        return t0, t1, int(save), None, int(save), str(int(save))
    ts = np.asarray(save, dtype=np.float64)
    if ts.ndim != 1 or ts.size == 0 or not np.all(np.isfinite(ts)):
        raise ValueError(f"save times must be a non-empty 1-D array of finite times, got {save!r}")
    if ts.size > 1 and not np.all(np.diff(ts) > 0):
        raise ValueError("save times must be strictly increasing")
    if ts[0] < t0 or ts[-1] > t1:
        raise ValueError(f"save times must lie in [t0, t1] = [{t0}, {t1}]")
    return t0, t1, None, ts, ts.size, f"[{ts.size} times]"
