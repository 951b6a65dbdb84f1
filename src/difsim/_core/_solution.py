"""`Solution`: the pytree result of `simulate`."""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from difsim import solvers
from difsim._core._dense import DenseOutput
from difsim._core._event_record import EventRecord
from difsim._core._model import Model
from difsim._core._state import VarInfo
from difsim._io import to_xarray
from difsim._plot import plot
from difsim._status import Status, library_message, max_steps_message


class Solution(eqx.Module):
    """Result of [`simulate`][]: saved times, named states, status and step statistics.

    A pytree: under `jax.vmap` every array gains the batch axes in front (so `status` has
    one code per trajectory). Read a variable as `sol.x` or `sol.ys["x"]`.

    **Fields:**

    - `ts`: save times, shape `(time,)`.
    - `ys`: `{name: values}`, each of shape `(time, *var_shape)`; NaN after a failure or a
      terminating event. At an event time, the state just after the event.
    - `status`: a [`Status`][] code (`0` = success), shape `()`.
    - `num_steps`, `num_accepted_steps`, `num_rejected_steps`: solver statistics.
    - `t_end`, `y_end`: time and state where the solve stopped (`t1`, or where an event or
      a failure stopped it; with `Status.EVENT_LIMIT`, the state just before the event
      over the cap). Only with events or `save="dense"`, else `None`.
    - `events`: the [`EventRecord`][] of the events that happened (times, which, state
      before and after), or `None` for a model without events.
    - `dense`: the solver's interpolant (`save="dense"`), read with [`evaluate`][], or
      `None`.
    - `model`: the model that was solved (its parameters end up in output attributes).
    - `var_info`: static names/units/dims of the state variables, in declaration order.
    - `solver`: static name of the solver used.
    - `result`: diffrax's own outcome index (`diffrax.RESULTS`), shape `()`, or `None`: kept
      beside `status` because several diffrax outcomes share one [`Status`][], and
      [`message`][] quotes diffrax's text for them.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    sol = ds.simulate(ds.models.Lorenz(), jnp.linspace(0.0, 1.0, 11))
    assert sol.ts.shape == (11,) and sol.ys["x"].shape == (11,)  # one row per save time
    assert sol.status == ds.Status.SUCCESS and int(sol.num_steps) > 0
    ```
    """

    ts: Float[Array, " time"]
    ys: dict[str, Array]
    status: Int[Array, ""]
    num_steps: Int[Array, ""]
    num_accepted_steps: Int[Array, ""]
    num_rejected_steps: Int[Array, ""]
    t_end: Float[Array, ""] | None
    y_end: dict[str, Array] | None
    model: Model
    var_info: tuple[tuple[str, VarInfo], ...] = eqx.field(static=True)
    solver: str = eqx.field(static=True)
    result: Int[Array, ""] | None = None
    events: EventRecord | None = None
    dense: DenseOutput | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """State variable names in declaration order."""
        return tuple(name for name, _ in self.var_info)

    @property
    def ok(self) -> Array:
        """`True` where the solve succeeded (or stopped at its terminating event)."""
        return (self.status == Status.SUCCESS) | (self.status == Status.EVENT)

    @property
    def final(self) -> dict[str, Array]:
        """The last saved state, `{name: value}` (NaN for a failed trajectory)."""
        return {
            name: values[..., -1, *[slice(None)] * self._var_ndim(name)]
            for name, values in self.ys.items()
        }

    def _var_ndim(self, name: str) -> int:
        return self.ys[name].ndim - self.ts.ndim

    def message(self) -> str:
        """Human-readable status of an unbatched solution, with diffrax's own words when they
        add to it."""
        status = Status(int(self.status))
        text = status.message
        if status == Status.MAX_STEPS:
            accepted, rejected = int(self.num_accepted_steps), int(self.num_rejected_steps)
            info = solvers.solver_info(self.solver.lower()) if self._registered else None
            text = max_steps_message(info and info.stiff, rejected > accepted)
            text += f" ({accepted} steps accepted, {rejected} rejected)"
        if self.result is None or int(self.result) == 0:
            return text
        own = library_message(dfx.RESULTS, int(self.result))
        return text if not own or own in text else f"{text} (diffrax: {own})"

    @property
    def _registered(self) -> bool:
        return self.solver.lower() in solvers.SOLVERS

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("ys", "var_info"):
            raise AttributeError(name)
        ys = self.ys
        if name in ys:
            return ys[name]
        raise AttributeError(
            f"Solution has no attribute {name!r}; state variables are {', '.join(self.names)}"
        )

    def evaluate(self, t: ArrayLike) -> dict[str, Array]:
        """The state at time(s) `t` from the solver's interpolant (`save="dense"`).

        **Arguments:** `t`, a time or an array of times in `[t0, t1]` (model time units).

        **Returns:** `{name: value}`, each of shape `(*batch, *t.shape, *var_shape)` (batch
        axes of a `vmap`ped solution first). At an event time, the state just after the
        event. The interpolant never extrapolates: a time outside a trajectory's
        `[t0, t_end]` (before `t0`, after `t1`, or past where an event or a failure ended
        the solve) gives NaN there.

        **Raises:** `ValueError` without dense output; and, when `t` and the solution are
        concrete values (not traced by `jit`, `vmap` or `grad`), for a `t` outside
        `[t0, t1]` of every trajectory, a mistake in the call. Traced, where nothing can
        raise on values, such a `t` gives NaN like any other time outside the solve.
        """
        if self.dense is None:
            raise ValueError('Solution.evaluate needs the interpolant: simulate with save="dense"')
        t = jnp.asarray(t, self.dense.t_lo.dtype)
        self._check_span(t)
        return _evaluate(self.dense, t, self.status.ndim)

    def _check_span(self, t) -> None:
        try:
            times = np.asarray(t)
            lo, hi = float(np.min(self.dense.t0)), float(np.max(self.dense.t1))
        except Exception:  # traced: out-of-range times give NaN
            return
        outside = times[(times < lo) | (times > hi)]
        if outside.size:
            raise ValueError(
                f"Solution.evaluate: t = {float(outside.reshape(-1)[0])} lies outside the "
                f"solved span [t0, t1] = [{lo}, {hi}]"
            )

    def to_xarray(self, batch_dims=None, batch_coords=None, times: ArrayLike | None = None):
        """This solution as a labelled `xarray.Dataset`; see [`to_xarray`][difsim.to_xarray].

        `times`: sample the interpolant (`save="dense"`) at these times (1-D); by default
        a dense solution is sampled at 1001 evenly spaced times from `t0` to `t1`.
        """
        solution = self
        if times is not None or self.dense is not None:
            solution = self._sampled(times)
        return to_xarray(solution, batch_dims=batch_dims, batch_coords=batch_coords)

    def _sampled(self, times) -> "Solution":
        """This solution with `ts`/`ys` replaced by the interpolant at `times`."""
        if self.dense is None:
            raise ValueError(
                'to_xarray(times=...) samples the interpolant: simulate with save="dense"'
            )
        if times is None:
            t0, t1 = float(np.min(self.dense.t0)), float(np.max(self.dense.t1))
            times = np.linspace(t0, t1, DENSE_SAMPLES)
        times = np.asarray(times, np.asarray(self.dense.t_lo).dtype)
        if times.ndim != 1:
            raise ValueError(f"times must be a 1-D array of times, got shape {times.shape}")
        ys = self.evaluate(times)
        return eqx.tree_at(lambda s: (s.ts, s.ys), self, (jnp.asarray(times), ys))

    def plot(self, path=None, **kwargs):
        """Plot the trajectories (see [`plot`][difsim.plot]); returns the figure."""
        return plot(self.to_xarray(), path=path, **kwargs)


@eqx.filter_jit
def _evaluate(dense: DenseOutput, t: Array, nbatch: int) -> dict[str, Array]:
    # Compiled (once per shape of `t`): evaluated op by op, the search and the local
    # polynomials would dispatch dozens of small kernels per call.
    evaluate = type(dense).evaluate
    for _ in range(nbatch):  # a vmapped solution: one interpolant per lane
        evaluate = jax.vmap(evaluate, in_axes=(0, None))
    return evaluate(dense, t)


DENSE_SAMPLES = 1001  # times at which `to_xarray` samples a dense solution by default


def nan_like(x: Array) -> Array:
    """An all-NaN array shaped like `x` (used to blank out failed trajectories)."""
    return jnp.full_like(x, jnp.nan)
