"""The shape and metadata of a sweep's Dataset, and the settings that identify a sweep.

Everything here is known before a single trajectory runs: the [`OutputLayout`][] (dims,
coordinates, variables, attributes) lets results stream into a netCDF file chunk by chunk,
and [`settings`][] lists, as text, everything that determines the results (its hash
identifies the sweep for resuming).
"""

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim import solvers
from difsim._core import state_key, state_var
from difsim._io import (
    attr_value,
    cf_attrs,
    code_text,
    coord_attrs,
    fixed_variables,
    model_title,
    param_attrs,
    parameter_attr,
    time_attrs,
    value_digest,
    var_attrs,
    versions_text,
)
from difsim._status import Status, flag_attrs
from difsim._sweep._options import SolverChoice, SweepTimes


@dataclasses.dataclass(frozen=True)
class OutputLayout:
    """The shape of a sweep's Dataset, known before anything runs (not to be confused with
    the core's state layout: this one describes the sweep's output on disk and in memory).

    **Fields:** `dims`/`shape` (the sweep's own dimensions), `coords`
    (`{name: (dims, values, attrs)}`), `variables` (`{name: (tail_dims, tail_shape, dtype,
    attrs)}`, each stored with dims `(*dims, *tail_dims)`), `attrs` (global attributes),
    `fixed` (`{name: (dims, values, attrs)}`: data variables that are the same at every
    point, the model's array-valued parameters, named by their path; see
    `difsim._io._parameters`).
    """

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    coords: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, Any]]]
    variables: dict[str, tuple[tuple[str, ...], tuple[int, ...], Any, dict[str, Any]]]
    attrs: dict[str, Any]
    fixed: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, Any]]] = dataclasses.field(
        default_factory=dict
    )

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def empty(self) -> dict[str, np.ndarray]:
        """Flat arrays `(size, *tail)` for every variable, to fill chunk by chunk."""
        size = self.size
        return {
            name: np.empty((size, *tail), dtype)
            for name, (_, tail, dtype, _) in self.variables.items()
        }

    def to_dataset(self, arrays: dict[str, np.ndarray]) -> xr.Dataset:
        """The Dataset of flat `arrays` (as from [`empty`][]), reshaped to the dims."""
        data_vars = {
            name: ((*self.dims, *tdims), arrays[name].reshape(*self.shape, *tail), dict(attrs))
            for name, (tdims, tail, _, attrs) in self.variables.items()
        }
        data_vars.update({k: (d, np.array(v), dict(a)) for k, (d, v, a) in self.fixed.items()})
        coords = {k: (d, v, dict(a)) for k, (d, v, a) in self.coords.items()}
        return xr.Dataset(data_vars, coords, dict(self.attrs))


def status_counts(status: np.ndarray) -> dict[int, int]:
    """`{status code: count}` of the codes present."""
    status = np.asarray(status).ravel()
    if not np.count_nonzero(status):  # all succeeded (the usual case): one fast pass
        return {int(Status.SUCCESS): status.size} if status.size else {}
    if status.min() >= 0:  # the codes are small: one counting pass
        return {code: int(n) for code, n in enumerate(np.bincount(status)) if n}
    codes, counts = np.unique(status, return_counts=True)
    return {int(c): int(n) for c, n in zip(codes, counts)}


def value_text(value: Any) -> str:
    """A parameter's or initial value's text in the sweep's settings (its identity): a
    small array as its values, a large one by a hash of its bytes, a module (a grid, a
    network) or another container by [`value_digest`][]: every leaf and static field,
    its functions (a network's activation) by their code, the same in every process."""
    if isinstance(value, eqx.Module | dict | list | tuple) or callable(value):
        return f"{type(value).__name__} sha256:{value_digest(value)[:16]}"
    array = np.asarray(value)
    if array.size <= 8:
        return repr(array.tolist()) + ("" if array.dtype == object else f" {array.dtype}")
    digest = hashlib.sha256(array.dtype.str.encode() + array.tobytes()).hexdigest()
    return f"array{array.shape} {array.dtype} sha256:{digest[:16]}"


def settings(
    model, spec, times: SweepTimes, solver: SolverChoice, plan, dtype, points: bool = True
) -> dict[str, str]:
    """Everything that determines the results, as text (hashed; shown when they differ).
    `points=False` leaves the `"sweep"` entry empty, to be filled in by [`points_setting`][]:
    nothing else looks at the points (which a random spec would draw)."""
    cls = type(model)
    swept = set(spec.keys)
    params = {k: getattr(model, k) for k in cls.parameter_names() if k not in swept}
    state = {k: v for k, v in model.initial_state().items() if state_key(k) not in swept}
    described = f"t0={times.t0!r}, t1={times.t1!r}, save={times.save_text}"
    if times.ts is not None:
        described += f" {value_text(times.ts)}"
    return {
        "model": f"{cls.__module__}.{cls.__qualname__}",
        # The code that computes the numbers, and what runs it (`_provenance`).
        "code": code_text(cls),
        "parameters": ", ".join(f"{k}={value_text(v)}" for k, v in params.items()),
        "state": ", ".join(f"{k}={value_text(v)}" for k, v in state.items()),
        "sweep": points_setting(spec, dtype) if points else "",
        "time": described,
        "solver": (
            f"{solver.solver!r}, controller={solver.controller!r}, rtol={solver.rtol!r}, "
            f"atol={solver.atol!r}, dt0={solver.dt0!r}, max_steps={solver.max_steps}"
            # Only when set, so that sweeps without it keep the hash they had before it.
            + ("" if solver.root_tol is None else f", root_tol={solver.root_tol!r}")
        ),
        "keep": plan.describe(),
        "dtype": str(dtype),
        "versions": versions_text(),
    }


def points_setting(spec, dtype) -> str:
    """The `"sweep"` entry of [`settings`][]: the spec and a hash of its points in `dtype`
    (the one entry that depends on the points' values rather than only on their keys)."""
    return f"{spec!r} points sha256:{spec.fingerprint(dtype)[:16]}"


def default_controller(solver: Any, controller: Any) -> Any:
    """`controller`, or for `None` the name `simulate` would choose for `solver`."""
    if controller is not None:
        return controller
    info = solvers.solver_info(solver)
    return controller if info is None else ("pid" if info.adaptive else "constant")


def settings_hash(settings: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def base_layout(
    model, keys, outputs, plan, times: SweepTimes, dtype, attrs: dict[str, Any]
) -> OutputLayout:
    """The [`OutputLayout`][] of a sweep of `model` over the keys `keys` keeping `outputs`
    (planned by `plan`), at `times`, in `dtype`, with global attributes `attrs`, but the
    spec's own dimensions and coordinates (see [`with_points`][]): all that the points'
    values do not change."""
    cls = type(model)
    coords = {}
    # The model's array-valued parameters (a network's weights): the same at every point.
    fixed = fixed_variables(model, tuple(keys))
    tail_dims = {d for o in outputs for d in o.dims} | {d for d, _, _ in fixed.values()}
    if plan.mode == "trajectory":
        if times.ts is None:
            start, stop = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
            values = np.asarray(jnp.linspace(start, stop, times.n_saved))
        else:
            values = times.ts.astype(dtype)
        coords["time"] = (("time",), values, time_attrs(cls.time_units))
    grid_attrs = coord_attrs(model)
    for dim, values in model.coords().items():
        if dim in tail_dims and dim not in coords and dim not in keys:
            meta = grid_attrs.get(dim, {"long_name": dim, "units": "1"})
            coords[dim] = ((dim,), np.asarray(values), meta)
    variables = {o.name: (o.dims, o.shape, np.dtype(o.dtype), dict(o.attrs)) for o in outputs}
    if len(variables) < len(outputs):  # e.g. an observable named like the event record
        names = [o.name for o in outputs]
        twice = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"sweep: two kept variables are called {twice!r}; rename one")
    variables["status"] = ((), (), np.dtype(np.int32), flag_attrs())
    steps = jax.eval_shape(lambda: jnp.zeros((), jnp.result_type(int))).dtype
    steps_attrs = {"long_name": "number of solver steps", "units": "1"}
    variables["num_steps"] = ((), (), np.dtype(steps), steps_attrs)
    clash = (set(coords) | set(keys)) & (set(variables) | set(fixed))
    if clash:
        raise ValueError(
            f"sweep: {sorted(clash)[0]!r} would be both a coordinate and a kept variable; "
            "rename the sweep dimension (dim=...) or keep observables instead"
        )
    if clash := sorted(set(variables) & set(fixed)):
        raise ValueError(
            f"sweep: {clash[0]!r} is both a kept variable and an array parameter of "
            f"{cls.__name__}; rename one"
        )
    return OutputLayout((), (), coords, variables, attrs, fixed)


def with_points(
    base: OutputLayout, meta: dict[str, dict], spec, dtype, attrs: dict[str, Any] | None = None
) -> OutputLayout:
    """`base` (from [`base_layout`][] with `spec`'s keys) with `spec`'s dimensions and
    coordinates (first, in key order; `meta`: their attributes from [`coord_meta`][]) and,
    where given, other global attributes."""
    coords = {**spec_coords(meta, spec, dtype), **base.coords}
    attrs = base.attrs if attrs is None else attrs
    return dataclasses.replace(base, dims=spec.dims, shape=spec.shape, coords=coords, attrs=attrs)


def coord_meta(model, keys) -> dict[str, dict[str, Any]]:
    """`{key: attributes}` of the coordinates of sweep keys `keys`: units and long names
    from the model (the same for any points: computed once per model and keys)."""
    cls = type(model)
    state_info = dict(model.initial_state().info)
    meta = {}
    for key in keys:
        if (var := state_var(key)) is not None:
            info = state_info[var]
            meta[key] = var_attrs(info)
            meta[key]["long_name"] = f"initial {info.description or key[6:]}"
        else:
            meta[key] = param_attrs(cls.parameter_info(key))
    return meta


def spec_coords(meta: dict[str, dict], spec, dtype) -> dict[str, tuple]:
    """The spec's coordinates `{key: (dims, values, attrs)}`, with the attributes `meta`
    ([`coord_meta`][]) under the spec's own."""
    return {key: (dims, values, {**meta[key], **attrs})
            for key, (dims, values, attrs) in spec.coords(dtype).items()}  # fmt: skip


def sweep_attrs(
    model, spec, times: SweepTimes, solver: SolverChoice, plan, dtype, extra: Mapping[str, Any]
) -> dict[str, Any]:
    """The Dataset's global attributes: the model, its fixed values, the sweep's settings,
    then `extra` (the caller's own); values netCDF cannot store are left out."""
    cls = type(model)
    attrs = cf_attrs(f"difsim.sweep({cls.__name__})")
    attrs.update(
        difsim_output="sweep",  # what the file is: see difsim._io's ownership check
        model=cls.__name__,
        model_module=cls.__module__,
        model_code=code_text(cls),
        solver=type(solvers.make_solver(solver.solver)).__name__,
        parameters=" ".join(cls.parameter_names()),
    )
    title = model_title(cls)
    if title:
        attrs["title"] = title
    attrs.update(_fixed_values(model, spec))
    attrs.update(spec_attrs(spec))
    attrs.update(
        t0=times.t0,
        t1=times.t1,
        time_units=time_attrs(cls.time_units)["units"],
        save=times.save if isinstance(times.save, str | int) else f"{times.n_saved} times",
        rtol=solver.rtol,
        atol=solver.atol,
        max_steps=solver.max_steps,
        keep=plan.describe(),
        dtype=str(dtype),
    )
    attrs.update(extra)
    return {k: v for k, v in attrs.items() if attr_value(v) is not None}


def spec_attrs(spec) -> dict[str, Any]:
    """The global attributes of [`sweep_attrs`][] that depend on the spec's kind and size
    rather than only on its keys."""
    attrs = dict(sweep_kind=spec.kind, sweep_keys=" ".join(spec.keys), sweep_size=spec.size)
    description = spec.describe()
    if "seed" in description:
        attrs["seed"] = description["seed"]
    return attrs


def _fixed_values(model, spec) -> dict[str, Any]:
    """The scalar parameters (with their units) and initial values that are not swept."""
    cls = type(model)
    swept = set(spec.keys)
    attrs: dict[str, Any] = {}
    for name, value in model.parameters().items():
        value = np.asarray(value)
        if name in swept or value.ndim != 0:
            continue
        key = parameter_attr(name)
        attrs[key] = value.item()
        attrs[f"{key}_units"] = param_attrs(cls.parameter_info(name))["units"]
    for name, value in model.initial_state().items():
        if state_key(name) not in swept and np.ndim(value) == 0:
            attrs[f"initial_{name}"] = float(np.asarray(value))
    return attrs


def count_attrs(counts: dict[int, int]) -> dict[str, int]:
    """`{"n_success": …, "n_<status>": …}` of the codes in `counts` (success always)."""
    out = {"n_success": counts.get(int(Status.SUCCESS), 0)}
    for code, n in sorted(counts.items()):
        out[_COUNT_NAMES[code]] = n
    return out


_COUNT_NAMES = {int(s): f"n_{s.name.lower()}" for s in Status}


def counts_from_file(path: Path) -> dict[int, int]:
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return {int(s): int(f.attrs[f"n_{s.name.lower()}"]) for s in Status
                if f"n_{s.name.lower()}" in f.attrs and f.attrs[f"n_{s.name.lower()}"]}  # fmt: skip
