"""Dense output: the solver's own interpolant over the whole solve, stitched across events.

diffrax keeps, for every accepted step `[t_lo, t_hi]`, the data of a local interpolating
polynomial (`SaveAt(dense=True)`). A solve with events is several diffrax solves, one per
stretch between events; their steps are copied one after another into one buffer, so one
search over the step starts finds the step holding any time. At an event time the step
after the event is found (the state just after the event: right-continuous, like the saved
series).
"""

from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float, Int, PyTree

from difsim._core._vector_field import Layout


class DenseOutput(eqx.Module):
    """The interpolant of one solve, for [`Solution.evaluate`][difsim.Solution.evaluate].

    **Fields:**

    - `t_lo`, `t_hi`: start and end of each stored step, shape `(max_steps,)` (`inf`
      past `count`); at an event, the last step before it may end after the event time
      (its polynomial is valid up to the event).
    - `infos`: the solver's dense info per step (leading axis `max_steps`).
    - `count`: how many steps are stored.
    - `t0`, `t1`: the requested span; `t_end`: where the solve ended (`t1`, or where an
      event or a failure stopped it); `y_end` the state there (after the last affect).
    - `interpolation_cls`: the solver's local interpolation (static).
    - `layout`: how named variables are laid out in the solver's state (static).
    """

    t_lo: Float[Array, " step"]
    t_hi: Float[Array, " step"]
    infos: PyTree[Array]
    count: Int[Array, ""]
    t0: Float[Array, ""]
    t1: Float[Array, ""]
    t_end: Float[Array, ""]
    y_end: PyTree[Array]
    interpolation_cls: Callable = eqx.field(static=True)
    layout: Layout

    def evaluate_packed(self, t: Float[Array, ""]) -> PyTree[Array]:
        """The solver's state at one time `t` in `[t0, t_end]` (NaN outside)."""
        starts = jnp.where(jnp.arange(self.t_lo.shape[0]) < self.count, self.t_lo, jnp.inf)
        k = jnp.searchsorted(starts, t, side="right") - 1
        k = jnp.clip(k, 0, jnp.maximum(self.count - 1, 0))
        info = jax.tree.map(lambda x: x[k], self.infos)
        local = self.interpolation_cls(t0=self.t_lo[k], t1=self.t_hi[k], **info)
        y = local.evaluate(t)
        # At `t_end` the state after the last affect (the step before it ends earlier, or
        # there is none when the solve stopped at once).
        at_end = (t == self.t_end) | (self.count == 0)
        inside = (t >= self.t0) & (t <= self.t_end)
        return jax.tree.map(
            lambda a, b: jnp.where(inside, jnp.where(at_end, b, a), jnp.nan), y, self.y_end
        )

    def evaluate(self, t: Float[Array, "*shape"]) -> dict[str, Array]:
        """`{name: value}` at times `t` (any shape): each of shape `(*t.shape, *var_shape)`."""
        t = jnp.asarray(t, self.t_lo.dtype)
        flat = jax.vmap(self.evaluate_packed)(t.reshape(-1))
        named = self.layout.unpack(flat, axis=1)
        return {k: v.reshape(*t.shape, *v.shape[1:]) for k, v in named.items()}


class DenseBuffer(eqx.Module):
    """The steps stored so far, while the solve runs (part of its loop's carry)."""

    t_lo: Float[Array, " step"]
    t_hi: Float[Array, " step"]
    infos: PyTree[Array]
    count: Int[Array, ""]

    @staticmethod
    def empty(info_struct: PyTree[Any], max_steps: int, dtype) -> "DenseBuffer":
        """Room for `max_steps` steps whose dense info has the shapes of `info_struct`."""
        full = lambda s: jnp.full((max_steps, *s.shape), jnp.inf, s.dtype)  # noqa: E731
        return DenseBuffer(
            jnp.full(max_steps, jnp.inf, dtype),
            jnp.full(max_steps, jnp.inf, dtype),
            jax.tree.map(full, info_struct),
            jnp.asarray(0, jnp.int32),
        )

    def append(self, interp: dfx.DenseInterpolation, write) -> "DenseBuffer":
        """These steps followed by the steps of one solve's `interp` (when `write`)."""
        size = self.t_lo.shape[0]
        n = jnp.where(write, interp.ts_size - 1, 0).astype(jnp.int32)
        slot = jnp.arange(interp.ts.shape[0] - 1)
        # Past `n`, or past the buffer's end: an out-of-range index, which the scatter drops.
        index = jnp.where(slot < n, self.count + slot, size)
        put = lambda buf, new: buf.at[index].set(new.astype(buf.dtype), mode="drop")  # noqa: E731
        return DenseBuffer(
            put(self.t_lo, interp.ts[:-1]),
            put(self.t_hi, interp.ts[1:]),
            jax.tree.map(put, self.infos, interp.infos),
            self.count + n,
        )

    def finish(self, t0, t1, t_end, y_end, interpolation_cls, layout: Layout) -> DenseOutput:
        return DenseOutput(
            self.t_lo, self.t_hi, self.infos, self.count, t0, t1, t_end, y_end,
            interpolation_cls, layout,
        )  # fmt: skip


def info_struct(solver: dfx.AbstractSolver, terms, t0, t1, y0, args) -> PyTree[Any]:
    """The shapes of `solver`'s dense info for one step (traced only, nothing runs)."""
    solver = _with_concrete_tolerances(solver)

    def step_info():
        state = solver.init(terms, t0, t1, y0, args)
        return solver.step(terms, t0, t1, y0, args, state, False)[2]

    return eqx.filter_eval_shape(step_info)


def _with_concrete_tolerances(solver: dfx.AbstractSolver) -> dfx.AbstractSolver:
    """`solver` with numbers in place of its root finder's tolerance placeholders.

    A named implicit solver's root finder takes its tolerances from the step-size controller
    (`diffrax.with_stepsize_controller_tols`), which `diffeqsolve` fills in: a step taken
    outside it, as here, would divide by the placeholder. Only the shapes of the step's
    output are read, so any number will do."""
    if not isinstance(solver, dfx.AbstractImplicitSolver):
        return solver
    finder = solver.root_finder
    numeric = lambda x: isinstance(x, (int, float)) or eqx.is_array(x)  # noqa: E731
    names = [a for a in ("rtol", "atol") if hasattr(finder, a) and not numeric(getattr(finder, a))]
    if hasattr(finder, "norm") and not callable(finder.norm):
        names.append("norm")
    values = tuple(optx.rms_norm if a == "norm" else 1.0 for a in names)
    get = lambda s: tuple(getattr(s.root_finder, a) for a in names)  # noqa: E731
    return eqx.tree_at(get, solver, values) if names else solver
