"""`Solution`: the pytree result of `simulate`."""

from typing import Any

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from difsim import solvers
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
      terminating event.
    - `status`: a [`Status`][] code (`0` = success), shape `()`.
    - `num_steps`, `num_accepted_steps`, `num_rejected_steps`: solver statistics.
    - `t_end`, `y_end`: time and state where the solve stopped (only with an `event`).
    - `model`: the model that was solved (its parameters end up in output attributes).
    - `var_info`: static names/units/dims of the state variables, in declaration order.
    - `solver`: static name of the solver used.
    - `result`: diffrax's own outcome index (`diffrax.RESULTS`), shape `()`, or `None`: kept
      beside `status` because several diffrax outcomes share one [`Status`][], and
      [`message`][] quotes diffrax's text for them.
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

    def to_xarray(self, batch_dims=None, batch_coords=None):
        """This solution as a labelled `xarray.Dataset`; see [`to_xarray`][difsim.to_xarray]."""
        return to_xarray(self, batch_dims=batch_dims, batch_coords=batch_coords)

    def plot(self, path=None, **kwargs):
        """Plot the trajectories (see [`plot`][difsim.plot]); returns the figure."""
        return plot(self.to_xarray(), path=path, **kwargs)


def nan_like(x: Array) -> Array:
    """An all-NaN array shaped like `x` (used to blank out failed trajectories)."""
    return jnp.full_like(x, jnp.nan)
