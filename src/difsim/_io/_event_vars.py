"""The event record's variables in a Dataset: names, dims and attributes, shared by a
(vmapped) solution's Dataset (`to_xarray`) and a sweep's, so both label events alike."""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from difsim._io._meta import var_attrs

EVENT_DIM = "event"


def t_end_attrs(time_units: str) -> dict[str, Any]:
    """Attributes of `t_end`, the time a solve stopped (`t1`, an event, or a failure)."""
    return dict(long_name="time the solve stopped (event)", units=time_units)


def event_variables(
    model: Any,
    names: Sequence[str],
    var_info: Iterable[tuple[str, Any]],
    var_ndim: Mapping[str, int],
    time_units: str,
) -> dict[str, tuple[tuple[str, ...], dict[str, Any]]]:
    """`{variable: (dims after the batch dims, attributes)}` of the event record of a solve
    of `model` whose events are `names` (in declaration order), for state variables
    `var_info` (`(name, VarInfo)` pairs) of `var_ndim[name]` axes each, with times in
    `time_units`:

    - `event_count`, dims `()`: how many events happened (int32);
    - `event_time`, dims `("event",)`: their times (NaN padding past `event_count`);
    - `event_type`, dims `("event",)`: which event, an index into `names` listed by the
      CF `flag_values`/`flag_meanings` (int32; -1 padding);
    - `<var>_before_event`, `<var>_after_event`, dims `("event", *var_dims)`: the state
      just before the event and just after its affect, in the variable's units.
    """
    flags = dict(
        # Of event_type's own type (CF): a list of Python integers would be written int64.
        flag_values=np.arange(len(names), dtype=np.int32),
        flag_meanings=" ".join(names),
        long_name="which event (-1: padding past event_count)",
    )
    out: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
        "event_count": ((), dict(long_name="number of events", units="1")),
        "event_time": ((EVENT_DIM,), dict(long_name="event time", units=time_units)),
        "event_type": ((EVENT_DIM,), flags),
    }
    for name, info in var_info:
        var_dims = tuple(info.dims or model.default_dims(name, var_ndim[name]))
        for side in ("before", "after"):
            attrs = var_attrs(info)
            attrs["long_name"] = f"{info.description or name} just {side} the event"
            out[f"{name}_{side}_event"] = ((EVENT_DIM, *var_dims), attrs)
    return out
