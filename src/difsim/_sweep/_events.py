"""The event record of a sweep of a model with events (docs/events.md): per trajectory,
the variables a vmapped solution's Dataset holds (`event_count`, `event_time`,
`event_type`, `<var>_before_event`, `<var>_after_event`, and `t_end`), with the same names,
dims, attributes and padding.

While a sweep runs, each trajectory's record has room for `max_events` events (the
sweep's `max_events`, else its model's cap; [`with_event_cap`][] puts it in the solver
settings): every chunk has the same shape, in memory and in the chunk store. The
Dataset (in memory or the netCDF file) then cuts the `event` dimension to the most events
any trajectory had, as [`to_xarray`][] does: a property of the whole sweep, so the result
is the same for any chunking and after a resume.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import xarray as xr

from difsim._core import Model, declared_events
from difsim._io import EVENT_DIM, event_variables, t_end_attrs, time_attrs
from difsim._sweep._layout import OutputLayout
from difsim._sweep._observables import Output
from difsim._sweep._options import SolverChoice

_INTEGER = ("event_count", "event_type")


def with_event_cap(solver: SolverChoice, model: Model, max_events: int | None) -> SolverChoice:
    """`solver` with its `max_events`: the cap on events per trajectory, which sizes the
    record; `max_events` (checked by `SweepOptions`) or, for `None`, the model's own.

    **Raises:** `ValueError` for a `max_events` given for a model that declares no events
    (a sweep adds none: it would change nothing).
    """
    names, cap = declared_events(type(model))
    if not names:
        if max_events is not None:
            raise ValueError(
                f"max_events={max_events}: {type(model).__name__} declares no events, so "
                "there is nothing to cap; leave max_events out"
            )
        return solver
    return dataclasses.replace(solver, max_events=cap if max_events is None else max_events)


def event_outputs(model: Model, dtype: Any, cap: int | None) -> list[Output]:
    """The event record's variables of one trajectory of a sweep of `model` (in the run's
    floating `dtype`; counts and event types int32), room for `cap` events along `event`
    (`SolverChoice.max_events`); `[]` for a model without events."""
    cls = type(model)
    names, _ = declared_events(cls)
    if not names:
        return []
    state = model.initial_state()
    shapes = {var: tuple(np.shape(value)) for var, value in state.items()}
    units = time_attrs(cls.time_units)["units"]
    ndim = {var: len(shape) for var, shape in shapes.items()}
    meta = event_variables(model, names, state.info, ndim, units)
    out = []
    for name, (dims, attrs) in meta.items():
        var = next((v for v in shapes if name in (f"{v}_before_event", f"{v}_after_event")), "")
        shape = (cap, *shapes.get(var, ())) if dims else ()
        kind = np.int32 if name in _INTEGER else dtype
        out.append(Output(name, dims, shape, np.dtype(kind), tuple(attrs.items())))
    out.append(Output("t_end", (), (), np.dtype(dtype), tuple(t_end_attrs(units).items())))
    return out


def event_attrs(model: Model, cap: int | None) -> dict[str, Any]:
    """The Dataset's global attributes of the events (as [`to_xarray`][] writes them):
    `events` (their names) and `max_events` (`cap`); `{}` for a model without events."""
    names, _ = declared_events(type(model))
    return {"events": " ".join(names), "max_events": cap} if names else {}


def record_values(sol) -> dict[str, jax.Array]:
    """The event record of one (unbatched) solution, named as [`event_outputs`][] names
    it; `{}` for a solve without events. Kept whatever the status (as a vmapped solution
    keeps it): the events up to a failure, or the `max_events` before `EVENT_LIMIT`."""
    record = sol.events
    if record is None:
        return {}
    out = dict(
        event_count=record.count, event_time=record.times, event_type=record.which,
        t_end=sol.t_end,
    )  # fmt: skip
    for var in record.before:
        out[f"{var}_before_event"] = record.before[var]
        out[f"{var}_after_event"] = record.after[var]
    return out


def most_events(layout: OutputLayout, counts: Callable[[], Any]) -> int | None:
    """The length of the Dataset's `event` dimension: the largest of the event counts that
    `counts()` yields (arrays of them, e.g. chunk by chunk); `None` without events."""
    if "event_count" not in layout.variables:
        return None
    return max((int(np.max(c, initial=0)) for c in counts()), default=0)


def cut_layout(layout: OutputLayout, n: int | None) -> OutputLayout:
    """`layout` with its `event` dimension `n` long (unchanged for `n = None`)."""
    if n is None:
        return layout
    variables = {
        name: (tdims, _cut_shape(tdims, tail, n), dtype, attrs)
        for name, (tdims, tail, dtype, attrs) in layout.variables.items()
    }
    return dataclasses.replace(layout, variables=variables)


def cut_arrays(
    layout: OutputLayout, arrays: dict[str, np.ndarray], n: int | None
) -> dict[str, np.ndarray]:
    """Flat `arrays` (`{name: (points, *tail)}`) of `layout` with the `event` axis cut to
    its first `n` entries."""
    if n is None:
        return arrays
    out = dict(arrays)
    for name, (tdims, _, _, _) in layout.variables.items():
        if EVENT_DIM in tdims:
            out[name] = np.take(arrays[name], np.arange(n), axis=1 + tdims.index(EVENT_DIM))
    return out


def cut_dataset(dataset: xr.Dataset) -> xr.Dataset:
    """A sweep's Dataset in memory with its `event` dimension cut to the most events."""
    if "event_count" not in dataset:
        return dataset
    n = int(dataset["event_count"].max()) if dataset["event_count"].size else 0
    return dataset.isel({EVENT_DIM: slice(0, n)})


def _cut_shape(tdims: tuple[str, ...], tail: tuple[int, ...], n: int) -> tuple[int, ...]:
    if EVENT_DIM not in tdims:
        return tail
    axis = tdims.index(EVENT_DIM)
    return (*tail[:axis], n, *tail[axis + 1 :])
