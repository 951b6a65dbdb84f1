"""`EventPlan`: the events of one solve (the model's, then `simulate`'s), checked once where
they enter: names, conditions that return scalars, affects that return state variables."""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from difsim._core._event import AbstractEvent, Event, TimeEvent
from difsim._core._state import State
from difsim._core._vector_field import Layout

DEFAULT_MAX_EVENTS = 100


class EventPlan(eqx.Module):
    """What a solve with events (or dense output) needs to know about them.

    **Fields:** `events` (in declaration order: the model's, then `simulate`'s), `names`
    (unique, static), `max_events` (the cap; one more event ends the solve with
    `Status.EVENT_LIMIT`), `dense` (keep the interpolant), `root_finder` (locates the
    crossings of [`Event`][] conditions in time).
    """

    events: tuple[AbstractEvent, ...]
    names: tuple[str, ...] = eqx.field(static=True)
    max_events: int = eqx.field(static=True)
    dense: bool = eqx.field(static=True)
    root_finder: optx.AbstractRootFinder

    @property
    def root(self) -> tuple[int, ...]:
        """Indices of the events located by root finding."""
        return tuple(i for i, e in enumerate(self.events) if isinstance(e, Event))

    @property
    def timed(self) -> tuple[int, ...]:
        """Indices of the scheduled events."""
        return tuple(i for i, e in enumerate(self.events) if isinstance(e, TimeEvent))


def _as_events(given: Any) -> list[AbstractEvent]:
    if given is None:
        return []
    if isinstance(given, AbstractEvent):
        return [given]
    if callable(given):
        return [Event(given)]
    if isinstance(given, Sequence) and not isinstance(given, str):
        return [e for item in given for e in _as_events(item)]
    raise TypeError(
        f"event must be a difsim.Event or a callable (t, s, model) -> scalar, a "
        f"difsim.TimeEvent, or a list of them, got {given!r}"
    )


def _name(event: AbstractEvent, i: int) -> str:
    if event.name is not None:
        return event.name
    fn = getattr(event, "condition", None)
    label = getattr(fn, "__name__", "<lambda>")
    return label if label.isidentifier() else f"event{i}"


def _names(events: Sequence[AbstractEvent]) -> tuple[str, ...]:
    return tuple(_name(e, i) for i, e in enumerate(events))


def _class_cap(cls: type) -> int:
    return getattr(cls, "max_events", DEFAULT_MAX_EVENTS)


def declared_events(cls: type) -> tuple[tuple[str, ...], int]:
    """`(names, max_events)` of the events model class `cls` declares, as a solve of one of
    its models without `simulate(event=...)` records them: the names in declaration order
    (`()` for a model without events) and the cap on events per solve."""
    return _names(_as_events(list(getattr(cls, "events", ())))), int(_class_cap(cls))


def plan_events(
    model, event: Any, layout: Layout, rtol, atol, max_events: int | None, dense: bool
) -> EventPlan | None:
    """The checked [`EventPlan`][] of a solve of `model` with `simulate`'s `event`, or `None`
    when there are no events and no dense output (a plain diffrax solve).

    **Raises:** `TypeError`/`ValueError` naming the event and the culprit.
    """
    declared = getattr(type(model), "events", ())
    events = _as_events(list(declared)) + _as_events(event)
    if not events and not dense:
        return None
    names = _names(events)
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"two events are called {name!r}: give them distinct names")
    events = tuple(
        eqx.tree_at(lambda e: e.name, e, n, is_leaf=lambda x: x is None)
        for e, n in zip(events, names)
    )
    if max_events is None:
        max_events = _class_cap(type(model))
    max_events = check_max_events(max_events)
    for e in events:
        _check_event(e, model, layout)
    if np.ndim(atol) != 0:
        atol = jnp.min(atol)  # one per state variable: the root is a time, take the tightest
    return EventPlan(events, names, int(max_events), dense, optx.Newton(rtol=rtol, atol=atol))


def _check_event(event: AbstractEvent, model, layout: Layout) -> None:
    """Trace the event's condition and affect once (no FLOPs) and raise on a wrong shape,
    type or variable name."""
    cls = type(model).__name__
    t = jax.ShapeDtypeStruct((), layout.dtype)
    y = {n: jax.ShapeDtypeStruct(s, layout.dtype) for n, s in zip(layout.names, layout.shapes)}
    state = lambda values: State.from_info(layout.info, values)  # noqa: E731
    if isinstance(event, Event):
        out = jax.eval_shape(lambda t, v: _condition_value(event, cls, t, state(v), model), t, y)
        if out.shape != () or not (
            jnp.issubdtype(out.dtype, jnp.floating) or jnp.issubdtype(out.dtype, jnp.bool_)
        ):
            raise ValueError(
                f"the condition of event {event.name!r} ({cls}) must return a real or "
                f"boolean scalar, got {out.dtype} of shape {out.shape}"
            )
    out = jax.eval_shape(lambda t, v: event.updates(t, state(v), model), t, y)
    for var, value in out.items():
        if var not in layout.names:
            raise ValueError(
                f"the affect of event {event.name!r} returned {var!r}, which is not a state "
                f"variable of {cls} (variables: {', '.join(layout.names)})"
            )
        shape = dict(zip(layout.names, layout.shapes))[var]
        got = tuple(value.shape)
        if not _fits(got, shape):
            raise ValueError(
                f"the affect of event {event.name!r} returned shape {got} for state variable "
                f"{var!r}, whose shape is {shape}"
            )
    if callable(event.terminal):
        out = jax.eval_shape(lambda t, v: event.stops(t, state(v), model), t, y)
        if out.shape != ():
            raise ValueError(
                f"terminal of event {event.name!r} must return one bool, got shape {out.shape}"
            )


def _condition_value(event: Event, cls: str, t, s: State, model):
    """The condition's value at `(t, s)`, after checking that it is one number (a dict, a
    tuple or `None` would reach JAX as an error naming neither event nor model)."""
    out = event.condition(t, s, model)
    if not isinstance(out, jax.Array | np.ndarray | np.generic | float | int | bool):
        got = "None" if out is None else f"a {type(out).__name__}"
        raise TypeError(
            f"the condition of event {event.name!r} ({cls}) returned {got}; it must return "
            "one real (or boolean) scalar, e.g. lambda t, s, m: s.h (the event is where h "
            "crosses zero)"
        )
    return jnp.asarray(out)


def _fits(got: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a value of shape `got` broadcasts to `shape` (and no further)."""
    try:
        return np.broadcast_shapes(got, shape) == shape
    except ValueError:
        return False


def check_max_events(max_events: Any) -> int | None:
    """`None`, or `max_events` as a positive `int` (what [`simulate`][] and sweeps take).

    **Raises:** `TypeError` (not an integer, a bool included) or `ValueError` (below 1),
    naming `max_events`.
    """
    if max_events is None:
        return None
    if isinstance(max_events, bool) or not isinstance(max_events, int | np.integer):
        raise TypeError(f"max_events must be a positive integer, got {max_events!r}")
    if max_events < 1:
        raise ValueError(f"max_events must be at least 1, got {max_events}")
    return int(max_events)
