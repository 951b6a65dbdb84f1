"""Terminating events: stop a solve when a condition on the state is met."""

from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from difsim._core._vector_field import Layout


class Event(eqx.Module):
    """Stop the solve when `condition(t, s, model)` crosses zero (or becomes `True`).

    **Arguments:**

    - `condition`: `(t, s, model) -> scalar`, with `s` a [`State`][]. A real value stops
      the solve where it changes sign, located to solver tolerance by Newton's method; a
      boolean stops it at the end of the first step where it is `True`.
    - `direction`: `True` to stop only on a rise through zero, `False` only on a fall,
      `None` (default) for either.

    ```python
    ground = ds.Event(lambda t, s, m: s.height)   # projectile hits the ground
    ```
    """

    condition: Callable
    direction: bool | None = None


class _EventCondition(eqx.Module):
    event: Event
    layout: Layout

    def __call__(self, t, y, args, **kwargs):
        return self.event.condition(t, self.layout.view(y), args)


def to_diffrax_event(event: Event, layout: Layout, rtol, atol) -> dfx.Event:
    """A diffrax `Event` whose root is found with Newton's method at the solve's tolerances."""
    if not isinstance(event, Event):
        if callable(event):
            event = Event(event)
        else:
            raise TypeError(f"event must be a difsim.Event or a callable, got {event!r}")
    if np.ndim(atol) != 0:
        atol = jnp.min(atol)  # one per state variable: the root is a time, take the tightest
    root_finder = optx.Newton(rtol=rtol, atol=atol)
    return dfx.Event(_EventCondition(event, layout), root_finder, direction=event.direction)
