"""The right-hand side of a block of trajectories in structure-of-arrays layout.

Every state variable of a block is one array of shape `(lanes, *var_shape)`: for the
scalar variables of an ODE that is one contiguous vector of lanes, so each arithmetic
operation of the model's `rhs` becomes one vectorised loop over lanes, and the
Runge–Kutta stages that combine them fuse into a few passes over memory. Array-valued
variables keep the lanes in front too: with the lanes last, every `roll`/`concatenate` of
the model came with transposes (JAX's batching rule for `concatenate` moves the batch
axis to the front; Lorenz-96 ran 2.5x slower, bench_ensemble.py). What array states need
instead is smaller blocks of lanes (`_solve.default_block`): a block of 256 Lorenz-96
lanes (40 entries each) overflowed the cache and ran 2.8x slower than one of 32.
"""

from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from difsim._core import Layout, Model, State, VarInfo, consistent_state, state_var
from difsim._ensemble._boundary import any_stepping, computed_once, stored

# `{var: (lanes, *var_shape)}` — a block's state, derivative or stage.
Lanes = dict[str, Float[Array, "*shape lanes"]]


def per_lane(v, like):
    """`v`, of shape `(lanes,)`, shaped to broadcast against `like`, `(lanes, *shape)`
    (explicitly: the suite forbids implicit rank promotion)."""
    return jnp.reshape(v, jnp.shape(v) + (1,) * (jnp.ndim(like) - 1))


def node(key: str) -> Callable[[Model], Any]:
    """Where sweep key `key` (a parameter or `"state.<var>"`) lives in a model."""
    if (var := state_var(key)) is not None:
        return lambda m: m.state.values[var]
    return lambda m: getattr(m, key)


def with_point(model: Model, point: Mapping[str, Any]) -> Model:
    """`model` with the values of one point put in place (no `__init__` re-run: the
    values may be tracers)."""
    keys = tuple(point)
    if not keys:
        return model
    nodes = [node(k) for k in keys]
    return eqx.tree_at(lambda m: [f(m) for f in nodes], model, [point[k] for k in keys])


class BatchField(eqx.Module):
    """`(t, y, points) -> dy/dt` for a block of lanes.

    `t`: `(lanes,)`; `y`: [`Lanes`][]; `points`: `{key: (lanes, *point_shape)}`, the swept
    values of each lane. The model's `rhs` is written for one trajectory: it is mapped
    over the first axis of everything, which for elementwise models is the identity on
    the program (each scalar operation simply acts on a lane vector).
    """

    model: Model
    info: tuple[tuple[str, VarInfo], ...] = eqx.field(static=True)
    shapes: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    dtype: Any = eqx.field(static=True)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.info)

    def one(self, t, y, point):
        """The derivative of one trajectory (unbatched), as `{var: var_shape}`."""
        m = with_point(self.model, point)
        out = m.rhs(t, State.from_info(self.info, y))
        if isinstance(out, State):
            out = out.values
        return {
            name: jnp.broadcast_to(jnp.asarray(out[name], self.dtype), shape)
            for name, shape in zip(self.names, self.shapes)
        }

    def __call__(self, t, y: Lanes, points) -> Lanes:
        return jax.vmap(self.one)(t, y, points)

    def diffusion_one(self, t, y, point, dim: int | None):
        """The diffusion of one trajectory of a stochastic model: `{var: var_shape}`
        (diagonal noise, `dim=None`) or `{var: (*var_shape, dim)}` (general noise), zero
        for the variables `diffusion` leaves out (as the diffrax engine's
        `DiffusionField`)."""
        out = with_point(self.model, point).diffusion(t, State.from_info(self.info, y))
        if isinstance(out, State):
            out = out.values
        tail = () if dim is None else (dim,)
        return {
            name: jnp.zeros(shape + tail, self.dtype)
            if name not in out
            else jnp.broadcast_to(jnp.asarray(out[name], self.dtype), shape + tail)
            for name, shape in zip(self.names, self.shapes)
        }

    def initial(self, points, lanes: int | None = None) -> Lanes:
        """Each lane's initial state, `{var: (lanes, *var_shape)}` (`lanes`: their number,
        needed when `points` is empty: Monte Carlo paths of the model as it is)."""

        def one(point):
            values = with_point(self.model, point).initial_state().values
            return {
                name: jnp.broadcast_to(jnp.asarray(values[name], self.dtype), shape)
                for name, shape in zip(self.names, self.shapes)
            }

        return jax.vmap(one, axis_size=lanes)(points)

    @property
    def algebraic(self) -> bool:
        """Whether the model is differential-algebraic (has algebraic variables)."""
        return any(info.algebraic for _, info in self.info)

    def consistent(self, t0, y0: Lanes, points, rtol: float, atol: float):
        """`(y0, ok)`: each lane's state with its algebraic variables solved from the
        constraints at `t0` (as one trajectory's, `difsim._core._dae.consistent_state`),
        and whether that converged, `(lanes,)`."""
        layout = Layout(self.info, self.shapes, self.dtype)

        def one(y, point):
            m = with_point(self.model, point)
            packed, ok = consistent_state(m, layout, t0, layout.pack(y), rtol=rtol, atol=atol)
            return layout.unpack(packed), ok

        return jax.vmap(one)(y0, points)


class BlockRHS(eqx.Module):
    """The right-hand side of one block with its lanes' points bound: what a method's
    `step` calls. Besides `f(t, y)` it gives what implicit and Rosenbrock methods need:
    the state flattened per lane (`ravel`/`unravel`, variables in declaration order, each
    raveled) and each lane's Jacobian over it.

    `live`: inside the step loop, whether any lane of the block is stepping (on CPU;
    `None` elsewhere and outside the loop). Given, each evaluation is computed once, its
    inputs and results stored, and so is each value passed to `stored` (`_boundary.py`).
    """

    field: BatchField
    points: dict[str, Any]
    live: Bool[Array, ""] | None = None

    def __call__(self, t, y: Lanes) -> Lanes:
        # The derivative has the state's structure, shapes and dtype.
        return computed_once(
            self.live, lambda t, y, p: self.field(t, y, p), t, y, self.points, like=y
        )

    def stepping(self, active: Bool[Array, " lanes"]) -> "BlockRHS":
        """This right-hand side inside a step taken by the lanes `active`."""
        return BlockRHS(self.field, self.points, any_stepping(active))

    def stored(self, tree):
        """`tree`, computed once and stored within a step ([`computed_once`][])."""
        return stored(self.live, tree)

    def mass_diagonal(self) -> np.ndarray | None:
        """The diagonal of a differential-algebraic model's mass matrix over one lane's
        flattened state (1: differential entry, 0: algebraic), or `None` for an ODE."""
        if not self.field.algebraic:
            return None
        return np.concatenate([
            np.full(int(np.prod(shape, dtype=int)), 0.0 if info.algebraic else 1.0)
            for (_, info), shape in zip(self.field.info, self.field.shapes)
        ])  # fmt: skip

    @property
    def size(self) -> int:
        """Entries of one lane's state."""
        return sum(int(np.prod(s, dtype=int)) for s in self.field.shapes)

    # The flattened state and the Jacobians keep the lanes LAST: linear algebra over
    # small per-lane systems is then elementwise over lane vectors.

    def ravel(self, y: Lanes) -> Float[Array, "size lanes"]:
        return jax.vmap(self._ravel1, out_axes=-1)(y)

    def unravel(self, v: Float[Array, "size lanes"]) -> Lanes:
        return jax.vmap(self._unravel1, in_axes=-1)(v)

    def jacobian(self, t, y: Lanes) -> Float[Array, "size size lanes"]:
        """`∂f_i/∂y_j` of every lane (forward-mode, one column per state entry)."""

        def one(t, y, point):
            g = lambda v: self._ravel1(self.field.one(t, self._unravel1(v), point))  # noqa: E731
            return jax.jacfwd(g)(self._ravel1(y))

        return jax.vmap(one, out_axes=-1)(t, y, self.points)

    def time_derivative(self, t, y: Lanes) -> Lanes:
        """`∂f/∂t` of every lane (zero for autonomous models, where XLA drops it)."""

        def one(t, y, point):
            return jax.jvp(lambda t: self.field.one(t, y, point), (t,), (jnp.ones_like(t),))[1]

        return jax.vmap(one)(t, y, self.points)

    def _ravel1(self, y):
        return jnp.concatenate([jnp.ravel(y[name]) for name in self.field.names])

    def _unravel1(self, v):
        out, start = {}, 0
        for name, shape in zip(self.field.names, self.field.shapes):
            n = int(np.prod(shape, dtype=int))
            out[name] = v[start : start + n].reshape(shape)
            start += n
        return out
