"""Events: a condition on the state located by root finding ([`Event`][]), or scheduled
times ([`TimeEvent`][]), at which the state changes (an `affect`), the solve stops, or both.

Declared on a model (`events = (...)`, a class attribute) or passed to `simulate(event=...)`.
Conditions, affects and schedules are functions of `(t, s, model)`, so the model's parameters
reach them as traced values: `jit`, `vmap` and `grad` pass through, event times included.
The solve that runs them is in `_hybrid.py`.
"""

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from difsim._core._state import State

Direction: TypeAlias = Literal["up", "down", "both"] | bool | None
# difsim's words → diffrax's `direction` (True: rising through zero, False: falling).
_DIRECTIONS = {"up": True, "down": False, "both": None}


class AbstractEvent(eqx.Module):
    """What every event has: an `affect` (a new state, or `None`), whether it ends the
    solve (`terminal`), and a `name` (for outputs; `None` takes a default).

    **Example:**

    ```python
    import difsim as ds

    events = (ds.Event(lambda t, s, m: s.x), ds.TimeEvent(every=1.0))
    assert all(isinstance(e, ds.AbstractEvent) for e in events)
    ```
    """

    affect: eqx.AbstractVar[Callable | None]
    terminal: eqx.AbstractVar[bool | Callable]
    name: eqx.AbstractVar[str | None]

    def updates(self, t, s: State, model) -> dict[str, Any]:
        """`{variable: new value}` from the affect (empty without one)."""
        if self.affect is None:
            return {}
        out = self.affect(t, s, model)
        if isinstance(out, State):
            out = out.values
        if not isinstance(out, Mapping):
            raise TypeError(
                f"the affect of event {self.name!r} must return a dict of new values of "
                f"state variables (or a ds.State), got {type(out).__name__}"
            )
        return dict(out)

    def stops(self, t, s: State, model) -> Bool[Array, ""]:
        """Whether the solve ends after this event, given the state `s` after its affect."""
        if callable(self.terminal):
            return jnp.asarray(self.terminal(t, s, model), bool)
        return jnp.asarray(self.terminal)


def _direction(direction: Direction) -> bool | None:
    if isinstance(direction, str):
        if direction not in _DIRECTIONS:
            raise ValueError(
                f"direction must be 'up', 'down' or 'both' (or True, False, None), got "
                f"{direction!r}"
            )
        return _DIRECTIONS[direction]
    if direction is None or isinstance(direction, bool):
        return direction
    raise ValueError(f"direction must be 'up', 'down' or 'both', got {direction!r}")


def _check_callable(value: Any, what: str, signature: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{what} must be a function {signature}, got {value!r}")


class Event(AbstractEvent):
    """An event where `condition(t, s, model)` crosses zero.

    The crossing is found by the solver's step (a sign change between two steps) and then
    located by Newton's method on the solver's interpolant, to the solve's tolerances
    (`rtol`, `atol` in time units); the time is differentiable (implicit function
    theorem). There the `affect` changes the state and the solve restarts from it, or the
    solve stops.

    **Arguments:**

    - `condition`: `(t, s, model) -> scalar`, with `s` a [`State`][]. A real value triggers
      where it changes sign; a boolean one at the end of the first step where it is `True`
      (no root finding: use a real value where the time matters).
    - `affect`: `(t, s, model) -> {name: new value}`, the state just after the event from
      the state `s` just before it; variables left out keep their values. `None`: the
      state does not change.
    - `direction`: `"up"` (only rising through zero), `"down"` (only falling), or
      `"both"`/`None` (default). `True`/`False` (diffrax's spelling) mean up/down.
    - `terminal`: whether the solve stops after the event (after its affect): a bool or
      `(t, s, model) -> bool` of the state after the affect. Default: `True` without an
      affect (the classic terminating event), `False` with one. An event with neither
      affect nor `terminal=True` only records where the condition crosses zero (a
      Poincaré section).
    - `name`: the event's name in outputs (default: the condition's function name, or
      `event<i>` for a lambda).

    ```python
    import jax.numpy as jnp
    import difsim as ds


    class Fall(ds.Model):
        g: float = 9.81
        state = ds.State(h=10.0, v=0.0)
        # No affect: the solve stops where the ball reaches the floor (a terminal event).
        events = (ds.Event(lambda t, s, m: s.h, direction="down", name="floor"),)

        def rhs(self, t, s):
            return dict(h=s.v, v=-self.g * jnp.ones_like(s.v))


    sol = ds.simulate(Fall(), t0=0.0, t1=5.0, save="final", rtol=1e-5, atol=1e-5)
    assert sol.status == ds.Status.EVENT
    assert jnp.isclose(sol.t_end, (2 * 10.0 / 9.81) ** 0.5, rtol=1e-4)  # t = √(2h/g)
    ```
    """

    condition: Callable
    affect: Callable | None
    direction: bool | None
    terminal: bool | Callable
    name: str | None

    def __init__(
        self,
        condition: Callable,
        affect: Callable | None = None,
        *,
        direction: Direction = None,
        terminal: bool | Callable | None = None,
        name: str | None = None,
    ):
        _check_callable(condition, "condition", "(t, s, model) -> scalar")
        if condition is None:
            raise TypeError("an Event needs a condition, a function (t, s, model) -> scalar")
        _check_callable(affect, "affect", "(t, s, model) -> dict of new values")
        self.condition = condition
        self.affect = affect
        self.direction = _direction(direction)
        self.terminal = (affect is None) if terminal is None else terminal
        self.name = name

    def value(self, t, s: State, model) -> Array:
        """The condition at `(t, s)`: a real or boolean scalar."""
        return jnp.asarray(self.condition(t, s, model))


def _as_times(value: Any, what: str) -> Any:
    """A concrete schedule entry as floats (hashable), or the function as given."""
    if value is None or callable(value):
        return value
    array = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"TimeEvent {what} must be finite, got {value!r}")
    return float(array) if array.ndim == 0 else tuple(float(x) for x in array.reshape(-1))


class TimeEvent(AbstractEvent):
    """An event at scheduled times (no root finding): dosing, switching, sampling.

    Give either `times` (a list) or `every` (a period, from `start`, up to `stop`). Each
    may be a number (a list for `times`) or a function `model -> value` of the model's
    parameters (e.g. `every=lambda m: m.tau`, swept or fitted like any parameter). The
    solver steps exactly to each time; times outside `[t0, t1]` are skipped.

    **Arguments:**

    - `times`: the event times, strictly increasing.
    - `every`: the period (> 0); events at `start + k * every`, `k = 0, 1, …`.
    - `start`: the first time of a periodic schedule (default: the solve's `t0`).
    - `stop`: the last time of a periodic schedule (inclusive; default: none).
    - `affect`, `terminal`, `name`: as for [`Event`][] (`terminal` defaults to `False`).

    ```python
    import jax.numpy as jnp
    import difsim as ds


    class Dosed(ds.Model):
        k: float = 1.0
        state = ds.State(x=0.0)
        # One unit added at t = 1 and t = 2: the solver steps to them, no root finding.
        events = (ds.TimeEvent([1.0, 2.0], affect=lambda t, s, m: dict(x=s.x + 1.0)),)

        def rhs(self, t, s):
            return dict(x=-self.k * s.x)


    sol = ds.simulate(Dosed(), t0=0.0, t1=3.0, save="final", rtol=1e-6, atol=1e-6)
    assert jnp.isclose(sol.ys["x"][-1], jnp.exp(-2.0) + jnp.exp(-1.0), rtol=1e-4)
    ```
    """

    times: tuple[float, ...] | Callable | None
    every: float | Callable | None
    start: float | Callable | None
    stop: float | Callable | None
    affect: Callable | None
    terminal: bool | Callable
    name: str | None

    def __init__(
        self,
        times: Any = None,
        *,
        every: float | Callable | None = None,
        start: float | Callable | None = None,
        stop: float | Callable | None = None,
        affect: Callable | None = None,
        terminal: bool | Callable = False,
        name: str | None = None,
    ):
        if (times is None) == (every is None):
            raise ValueError("a TimeEvent takes either times (a list) or every (a period)")
        if times is not None and (start is not None or stop is not None):
            raise ValueError("start and stop belong to a periodic TimeEvent (every=...)")
        _check_callable(affect, "affect", "(t, s, model) -> dict of new values")
        self.times = _as_times(times, "times")
        self.every = _as_times(every, "every")
        self.start, self.stop = _as_times(start, "start"), _as_times(stop, "stop")
        self.affect, self.terminal, self.name = affect, terminal, name
        if isinstance(self.times, float):
            self.times = (self.times,)
        if isinstance(self.times, tuple) and (not self.times or np.any(np.diff(self.times) <= 0)):
            raise ValueError(f"TimeEvent times must be strictly increasing, got {times!r}")
        if isinstance(self.every, float) and not self.every > 0:
            raise ValueError(f"TimeEvent every must be a positive period, got {every!r}")

    def _param(self, value, model, dtype) -> Array | None:
        if value is None:
            return None
        return jnp.asarray(value(model) if callable(value) else value, dtype)

    def time_at(self, k, model, t0) -> Float[Array, ""]:
        """The `k`-th scheduled time (counting from 0), `inf` past the last one."""
        dtype = jnp.result_type(t0)
        if self.every is None:
            times = jnp.atleast_1d(self._param(self.times, model, dtype))
            n = times.shape[0]
            return jnp.where(k < n, times[jnp.clip(k, 0, n - 1)], jnp.inf)
        start = t0 if self.start is None else self._param(self.start, model, dtype)
        t = start + k * self._param(self.every, model, dtype)
        if self.stop is not None:
            t = jnp.where(t <= self._param(self.stop, model, dtype), t, jnp.inf)
        return t

    def first_index(self, model, t0) -> jax.Array:
        """The index of the first scheduled time at or after `t0`."""
        dtype = jnp.result_type(t0)
        if self.every is None:
            times = jnp.atleast_1d(self._param(self.times, model, dtype))
            return jnp.sum(times < t0).astype(jnp.int32)
        if self.start is None:
            return jnp.asarray(0, jnp.int32)
        start, every = self._param(self.start, model, dtype), self._param(self.every, model, dtype)
        return jnp.maximum(0, jnp.ceil((t0 - start) / every)).astype(jnp.int32)
