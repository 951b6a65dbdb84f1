"""`EventRecord`: which events happened in a solve, when, and the state on either side."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from difsim._core._vector_field import Layout


class EventRecord(eqx.Module):
    """The events of one solve, in the order they happened (`Solution.events`).

    Arrays have room for `max_events` events; entries past `count` are padding (NaN
    times and states, `which = -1`). Under `vmap` every array gains the batch axes in
    front, so each trajectory has its own `count`.

    **Fields:**

    - `count`: how many events happened, shape `()`.
    - `times`: their times, shape `(max_events,)`.
    - `which`: which event each was, an index into `names`, shape `(max_events,)`.
    - `before`, `after`: `{name: values}` of the state just before the event and just
      after its affect, each of shape `(max_events, *var_shape)`.
    - `names`: the events' names, in declaration order (static).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds


    class Oscillator(ds.Model):
        state = ds.State(x=1.0, v=0.0)  # x = cos t
        # Neither affect nor terminal: only recorded (a Poincaré section).
        events = (ds.Event(lambda t, s, m: s.x, direction="up", terminal=False, name="up"),)

        def rhs(self, t, s):
            return dict(x=s.v, v=-s.x)


    record = ds.simulate(Oscillator(), t0=0.0, t1=12.0, save="final", rtol=1e-6, atol=1e-6).events
    n = int(record.count)  # x crosses zero upwards at 3π/2 and 7π/2
    assert n == 2 and jnp.allclose(record.times[:n], jnp.array([1.5, 3.5]) * jnp.pi, rtol=1e-4)
    assert record.names == ("up",) and jnp.all(record.which[:n] == 0)
    ```
    """

    count: Int[Array, ""]
    times: Float[Array, " event"]
    which: Int[Array, " event"]
    before: dict[str, Array]
    after: dict[str, Array]
    names: tuple[str, ...] = eqx.field(static=True)

    def of(self, name: str) -> Float[Array, " event"]:
        """The times of the events called `name` (NaN elsewhere), shape `(max_events,)`."""
        if name not in self.names:
            raise ValueError(f"no event called {name!r}; events are {', '.join(self.names)}")
        return jnp.where(self.which == self.names.index(name), self.times, jnp.nan)


class RecordBuffer(eqx.Module):
    """The record while the solve runs, in the solver's (packed) state layout."""

    count: Int[Array, ""]
    times: Float[Array, " event"]
    which: Int[Array, " event"]
    before: PyTree[Array]
    after: PyTree[Array]

    @staticmethod
    def empty(cap: int, y0: PyTree[Array], dtype) -> "RecordBuffer":
        blank = lambda v: jnp.full((cap, *jnp.shape(v)), jnp.nan, v.dtype)  # noqa: E731
        return RecordBuffer(
            jnp.asarray(0, jnp.int32),
            jnp.full(cap, jnp.nan, dtype),
            jnp.full(cap, -1, jnp.int32),
            jax.tree.map(blank, y0),
            jax.tree.map(blank, y0),
        )

    def add(self, apply, t, which, before, after) -> "RecordBuffer":
        """This record with one more event when `apply` (a traced bool)."""
        cap = self.times.shape[0]
        index = jnp.where(apply, self.count, cap)  # out of range: the scatter drops it
        put = lambda buf, v: buf.at[index].set(jnp.asarray(v, buf.dtype), mode="drop")  # noqa: E731
        return RecordBuffer(
            self.count + apply.astype(jnp.int32),
            put(self.times, t),
            put(self.which, which),
            jax.tree.map(put, self.before, before),
            jax.tree.map(put, self.after, after),
        )

    def finish(self, names: tuple[str, ...], layout: Layout) -> EventRecord:
        axis = 1 if layout.packed else 0
        return EventRecord(
            self.count,
            self.times,
            self.which,
            layout.unpack(self.before, axis=axis),
            layout.unpack(self.after, axis=axis),
            names,
        )
