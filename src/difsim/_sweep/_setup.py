"""Preparing a sweep: its options checked against the model, and everything derived from them
before a single trajectory runs (what is kept, the Dataset's layout, the settings hash, the
memory of one trajectory)."""

import dataclasses
import json
import logging
from collections.abc import Hashable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim import solvers
from difsim._core import (
    KEYS,
    Layout,
    Model,
    SaveSpec,
    SolverSettings,
    check_index_one,
    check_rhs,
    check_stiff_term,
    reports_model_time,
    resolve_solver_settings,
    solver_settings,
)
from difsim._ensemble import unsupported
from difsim._io import attr_value, environment, environment_attrs
from difsim._sweep._chunking import bytes_per_trajectory
from difsim._sweep._dataset import DatasetTemplate
from difsim._sweep._events import event_attrs, event_outputs, with_event_cap
from difsim._sweep._layout import (
    OutputLayout,
    base_layout,
    coord_meta,
    default_controller,
    points_setting,
    settings,
    settings_hash,
    spec_attrs,
    sweep_attrs,
    with_points,
)
from difsim._sweep._memo import LRU, Unkeyable, freeze
from difsim._sweep._observables import KeepPlan, plan_keep
from difsim._sweep._options import SolverChoice, SweepOptions, SweepTimes
from difsim._sweep._resources import check_sweep_resources, result_bytes
from difsim._sweep._samples import sde_solver_choice
from difsim._sweep._spec import AbstractSweep

logger = logging.getLogger("difsim")


@dataclasses.dataclass(frozen=True)
class SweepSetup:
    """A sweep's checked settings and what follows from them.

    **Fields:** `times` (checked; `save` is the same as the core's [`SaveSpec`][]), `solver`
    (checked and resolved), `dtype` (the run's floating
    dtype, from the model's state), `plan` (what is kept), `layout` (the Dataset's shape
    and attributes, `sweep_hash` included), `settings` (`{name: text}` of everything that
    determines the results), `per_traj` (estimated bytes of one trajectory in a chunk),
    `engine` (`"ensemble"` or `"diffrax"`), `fallback` (why `engine="auto"` did not take
    the ensemble engine, or `None`), `outputs` (the kept quantities) and `model_time`
    (whether the solves report model time, as a PDE model's do: progress within a chunk).

    A setup is reused by every repeat of the same sweep (see [`prepare`][]): treat it as
    read-only. `memo` holds what its runs derive from it once (the Dataset's template, the
    chunking of an in-memory run); `shared`, what every sweep of the same model and
    settings over other points derives alike (the `ChunkRunner`: the compiled call and
    the model's arrays placed on the devices).
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
    fallback: str | None = None
    outputs: tuple = ()  # the kept quantities (`Output`s)
    model_time: bool = False  # the solves report model time (a PDE model): progress inside
    memo: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)
    shared: dict[Any, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def sweep_hash(self) -> str:
        """The hash of `settings`: identifies the sweep's result."""
        return self.layout.attrs["sweep_hash"]

    def dataset(self, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> xr.Dataset:
        """The Dataset of flat `arrays` (`{name: (size, *tail)}`) with `attrs` added, as
        `layout.to_dataset(arrays)` builds it, but from a template built once (see
        [`DatasetTemplate`][]): `arrays` become its variables without a copy."""
        template = self.memo.get("dataset")
        if template is None:
            template = self.memo["dataset"] = DatasetTemplate(self.layout)
        return template.fill(arrays, attrs)


@dataclasses.dataclass(frozen=True)
class _ModelPart:
    """What preparing a sweep derives from the model, the swept keys and the options — all
    but the points' values, which it never looks at: shared by the sweeps of one model over
    new values (an outer loop, a notebook). `described` is [`settings`][] with an empty
    `"sweep"` entry (the only one that depends on the values); `layout`, the layout but
    the spec's dimensions and coordinates, with the first spec's attributes (not the
    caller's); `setups`, the recent setups of this part with the points (their bytes)
    they were made for."""

    times: SweepTimes
    save: SaveSpec
    solver: SolverChoice
    dtype: np.dtype
    plan: KeepPlan
    outputs: tuple
    engine: str
    fallback: str | None
    described: dict[str, str]
    layout: OutputLayout
    per_traj: int
    model_time: bool
    coord_meta: dict[str, dict]  # the swept keys' coordinate attributes
    point_bytes: int  # what one trajectory adds to the results (`result_bytes`)
    memo: dict[Any, Any] = dataclasses.field(default_factory=dict)
    setups: list[tuple[Hashable, dict[str, bytes], SweepSetup]] = dataclasses.field(
        default_factory=list
    )


# Parts of recent sweeps, keyed on everything they are derived from (values by content).
# Setups are kept per part for sweeps of up to CACHED_POINTS points: for those the rest of
# the preparation (layout, hash) is a visible share of the run (a few % at 1e4–1e5 Lorenz
# points), beyond it is not, and the cache would hold their coordinates.
_PARTS: LRU[_ModelPart] = LRU(8)
CACHED_POINTS = 2**17
_SETUPS_PER_PART = 8


def prepare(model: Model, spec: AbstractSweep, options: SweepOptions) -> SweepSetup:
    """Check `model`, `spec` and `options` against each other; nothing is compiled.

    A sweep of a recent model (equal values) over the same keys with the same settings
    reuses what was derived from those (checks passed, solver, kept quantities, engine); a
    repeat over the same points, too, gets the whole setup prepared the first time (the
    layout, attributes and hash would come out the same). What the machine has room for
    is asked every time.

    **Raises:** `TypeError` for a `model` or `spec` of the wrong kind; `ValueError` naming
    the culprit for a key, time, solver or `keep` that does not fit.
    """
    # Of the class: `isinstance` on an equinox module reads `__class__` through Python code.
    if not issubclass(type(model), Model):
        raise TypeError(f"sweep expects a difsim.Model instance, got {type(model).__name__}")
    if not isinstance(spec, AbstractSweep):
        raise TypeError(
            "sweep expects a spec (ds.GridSweep, ds.ZipSweep or ds.RandomSweep), got "
            f"{type(spec).__name__}"
        )
    part, _ = _PARTS.get(_part_key(model, spec, options), lambda: _model_part(model, spec, options))
    # Before any point is drawn, hashed or allocated: refuse what cannot fit.
    check_sweep_resources(model, spec, part.outputs, part.times.n_saved, part.dtype, options,
                          part.point_bytes)  # fmt: skip
    if part.fallback:
        logger.info("sweep: the diffrax engine runs this sweep (%s)", part.fallback)
    # Where it runs is part of the result's identity (`_provenance`): asked every time.
    env = environment(options.devices)
    try:  # with the coordinates compared below: what `spec.fingerprint` hashes, and more
        signature = (type(spec), spec.keys, spec.dims, spec.shape, spec.signature(),
                     freeze(options.attrs) if options.attrs else (), env["xla"],
                     env["devices"])  # fmt: skip
    except Unkeyable:
        signature = None
    if signature is None or spec.size > CACHED_POINTS:
        return _setup(part, model, spec, options, env)
    # The points as bytes (1-D float64 each): a copy (the spec's values may be the
    # caller's array, which they may write into), compared with `memcmp` (bitwise: -0.0 is
    # not 0.0), not NumPy's `==` and `all`, whose machinery costs ~0.1 ms on the cold
    # caches a repeated sweep runs on (bytes: ~0.03 ms at 10⁴ points). Made once per call
    # however many setups are compared: a loop over new values reads its points once.
    points = {k: v.tobytes() for k, v in spec.point_values().items()}
    # Newest first: a repeat is most often of the last sweep.
    for i in range(len(part.setups) - 1, -1, -1):
        seen, values, setup = part.setups[i]
        if seen == signature and values == points:
            part.setups.append(part.setups.pop(i))  # the most recent last
            return setup
    setup = _setup(part, model, spec, options, env)
    part.setups.append((signature, points, setup))
    del part.setups[:-_SETUPS_PER_PART]
    return setup


def _part_key(model: Model, spec: AbstractSweep, options: SweepOptions) -> Hashable | None:
    """What [`_model_part`][] reads, as a content key; `None` (do not cache) if some input
    has none. The precision switch is in it: it decides the run's dtype."""
    settings_key = options.shaping_key
    if settings_key is None:
        return None
    try:
        return (freeze(model), (type(spec), spec.keys), settings_key, jax.config.jax_enable_x64)
    except Unkeyable:
        return None


def _model_part(model: Model, spec: AbstractSweep, options: SweepOptions) -> _ModelPart:
    """Everything [`prepare`][] derives from `model`, `spec`'s keys and `options`."""
    spec.check(model)
    save = SaveSpec(t0=options.t0, t1=options.t1, save=options.save)  # every time check
    times = SweepTimes(
        float(save.t0), float(save.t1), save.save,
        None if save.ts is None else np.asarray(save.ts, np.float64),
        save.n_saved, save.save_text,
    )  # fmt: skip
    solver = with_event_cap(_resolve_solver(model, options), model, options.max_events)
    state = model.initial_state()
    # Traced once (no FLOPs): the ensemble engine calls `rhs` without simulate's checks, so
    # a Python `if` on the state or a missing derivative is named here.
    check_rhs(model, Layout.of(state), "rhs")
    if (layout := Layout.of(state)).algebraic:  # a DAE: its constraints determine z
        check_index_one(model, layout, save.t0, layout.pack(state.values))
    if solver.settings.imex:  # a linear-implicit solver's stiff part must be affine
        check_stiff_term(
            model, Layout.of(state), solver.settings.solver, save.t0, solver.settings.dt0
        )
    dtype = np.dtype(jnp.result_type(*[jnp.asarray(v) for v in state.values.values()]))
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(jnp.result_type(float))
    plan = plan_keep(options.keep, type(model), state, times.n_saved, times.save_text)
    # A model with events keeps each trajectory's event record too (`_events`).
    record = event_outputs(model, dtype, solver.max_events)
    outputs = tuple(plan.outputs(model, times.n_saved, dtype) + record)
    engine, fallback = choose_engine(options.engine, solver.settings, model)
    # The engine is part of the result's identity: the two round differently, and a resumed
    # sweep must not mix their chunks.
    # Nothing here looks at the points' values: a random spec has not drawn them yet, and
    # what the machine has room for is checked first (`prepare`).
    described = {**settings(model, spec, times, solver, plan, dtype, False), "engine": engine}
    events = event_attrs(model, solver.max_events)
    if events:  # the record's names and room are part of the result
        described["events"] = f"{events['events']}, max_events={events['max_events']}"
    per_traj = bytes_per_trajectory(model, list(outputs), times.n_saved, dtype)
    attrs = sweep_attrs(model, spec, times, solver, plan, dtype, events)
    layout = base_layout(model, spec.keys, list(outputs), plan, times, dtype, attrs)
    return _ModelPart(
        times, save, solver, dtype, plan, outputs, engine, fallback, described, layout, per_traj,
        reports_model_time(model), coord_meta(model, spec.keys), result_bytes(outputs),
    )  # fmt: skip


def _setup(
    part: _ModelPart, model: Model, spec: AbstractSweep, options, env: dict[str, str]
) -> SweepSetup:
    """The [`SweepSetup`][] of `part` over `spec`'s points, run where `env` says
    ([`environment`][]): their hash, coordinates and attributes (the rest of the layout
    depends on the keys only: the part's)."""
    described = {**part.described, "sweep": points_setting(spec, part.dtype), **env}
    # In place of the first spec's values (the keys, so the attributes present, are the same).
    attrs = {**part.layout.attrs, **spec_attrs(spec), **options.attrs, **environment_attrs(env)}
    attrs = {k: v for k, v in attrs.items() if attr_value(v) is not None}
    attrs["engine"] = part.engine
    if part.fallback:
        attrs["engine_fallback"] = part.fallback
    attrs["sweep_hash"] = settings_hash(described)
    attrs["sweep_settings"] = json.dumps(described, sort_keys=True)
    layout = with_points(part.layout, part.coord_meta, spec, part.dtype, attrs)
    return SweepSetup(
        part.times, part.save, part.solver, part.dtype, part.plan, layout, described,
        part.per_traj, part.engine, part.fallback, part.outputs, part.model_time,
        shared=part.memo,
    )  # fmt: skip


def choose_engine(
    requested: str, settings: SolverSettings, model: Model | None = None
) -> tuple[str, str | None]:
    """`(engine, why not the ensemble engine)` for `engine=requested`: `"auto"` takes the
    ensemble engine whenever it supports the solve ([`prepare`][] logs why when not).

    **Raises:** `ValueError` for `"ensemble"` with a solve it does not support.
    """
    if requested == "diffrax":
        return "diffrax", None
    reason = unsupported(settings, model)
    if reason is None:
        return "ensemble", None
    if requested == "ensemble":
        raise ValueError(f"engine='ensemble' cannot run this sweep: {reason}; use engine='auto'")
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
    controller = default_controller(solver, resolved["controller"])
    return SolverChoice(
        # The controller spelt out here too: the settings are the compiled function's static
        # argument, and a config names its controller.
        settings=solver_settings(model, **{**given, "controller": controller}),
        solver=solver,
        controller=controller,
        rtol=float(resolved["rtol"]),
        atol=_scalar_atol(resolved["atol"]),
        dt0=resolved["dt0"],
        max_steps=int(resolved["max_steps"]),
        root_tol=None if resolved["root_tol"] is None else float(resolved["root_tol"]),
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
