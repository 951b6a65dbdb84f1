"""Glue between a named-state `Model` and diffrax's array-valued vector fields."""

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from difsim._core._state import State, VarInfo
from difsim._pde import spectrum_shape


class Layout(eqx.Module):
    """How named variables are laid out in the array diffrax integrates.

    When every variable has the same shape (always true for scalar ODE states) they are
    stacked into one array of shape `(n_vars, *shape)`: diffrax then sees exactly what a
    hand-written `jnp.array([...])` state would give, so difsim adds no per-step cost.
    Variables of different shapes stay a dict (a pytree diffrax also accepts).
    """

    info: tuple[tuple[str, VarInfo], ...] = eqx.field(static=True)
    shapes: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    dtype: Any = eqx.field(static=True)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.info)

    @property
    def packed(self) -> bool:
        return len(set(self.shapes)) == 1

    @staticmethod
    def of(state: State, dtype=None) -> "Layout":
        values = [state[name] for name in state.names]
        if dtype is None:
            dtype = jnp.result_type(*values) if values else jnp.result_type(float)
            if not jnp.issubdtype(dtype, jnp.inexact):
                dtype = jnp.result_type(float)
        shapes = tuple(tuple(int(d) for d in jnp.shape(v)) for v in values)
        return Layout(state.info, shapes, jnp.dtype(dtype))

    def pack(self, values: Mapping[str, Any]):
        arrays = [
            jnp.broadcast_to(jnp.asarray(values[name], self.dtype), shape)
            for name, shape in zip(self.names, self.shapes)
        ]
        if self.packed:
            return jnp.stack(arrays)
        return dict(zip(self.names, arrays))

    def unpack(self, y, axis: int = 0) -> dict[str, Any]:
        """Named views of `y`; `axis` is where the variable axis sits (1 for saved `ys`)."""
        if self.packed:
            # `index_in_dim`, not `jnp.take`: take's default out-of-bounds mode adds a
            # NaN-select per variable to every right-hand-side evaluation.
            return {
                name: lax.index_in_dim(y, i, axis=axis, keepdims=False)
                for i, name in enumerate(self.names)
            }
        return dict(y)

    def view(self, y) -> State:
        return State.from_info(self.info, self.unpack(y))


class VectorField(eqx.Module):
    """`(t, y, model) -> dy/dt` for diffrax, calling `model.rhs` (or one split part).

    Holds only static data, so equal layouts give equal (cache-hitting) diffrax terms.
    """

    layout: Layout
    part: str = eqx.field(static=True)  # "rhs", "rhs_nonstiff" or "rhs_stiff"

    def __call__(self, t, y, model):
        derivative = getattr(model, self.part)(t, self.layout.view(y))
        if isinstance(derivative, State):
            derivative = derivative.values
        return self.layout.pack(derivative)


class SpectrumField(eqx.Module):
    """`(t, y, y_hat, model) -> rfftn of model.rhs_nonstiff` for a packed state `(n_vars,
    *grid)`: the `spectrum` of a [`difsim.solvers.SpectralODETerm`][]."""

    layout: Layout

    def __call__(self, t, y, y_hat, model):
        out = model.rhs_nonstiff_spectrum(t, self.layout.view(y), self.layout.view(y_hat))
        if isinstance(out, State):
            out = out.values
        dtype = jnp.result_type(self.layout.dtype, jnp.complex64)
        return jnp.stack(
            [
                jnp.broadcast_to(jnp.asarray(out[n], dtype), y_hat.shape[1:])
                for n in self.layout.names
            ]
        )


def check_rhs(model, layout: Layout, part: str) -> None:
    """Trace `model.<part>` once (no FLOPs) and raise a `ValueError` naming any variable
    whose derivative is missing, unexpected, or of a shape that does not fit."""
    t = jax.ShapeDtypeStruct((), layout.dtype)
    y = {
        name: jax.ShapeDtypeStruct(shape, layout.dtype)
        for name, shape in zip(layout.names, layout.shapes)
    }

    def call(t, values):
        return getattr(model, part)(t, State.from_info(layout.info, values))

    _check_output(model, layout, part, jax.eval_shape(call, t, y), layout.shapes)


def check_spectrum(model, layout: Layout) -> None:
    """As [`check_rhs`][] for `model.rhs_nonstiff_spectrum`, which also needs every state
    variable to be a field on the model's periodic grid."""
    cls = type(model).__name__
    grid = model.spectral_grid()
    for name, shape in zip(layout.names, layout.shapes):
        if shape != grid.shape:
            raise ValueError(
                f"{cls}.rhs_nonstiff_spectrum needs every state variable on the grid "
                f"{grid.shape}, but {name!r} has shape {shape}"
            )
    spectrum = spectrum_shape(grid)
    t = jax.ShapeDtypeStruct((), layout.dtype)
    y = {name: jax.ShapeDtypeStruct(grid.shape, layout.dtype) for name in layout.names}
    cdtype = jnp.result_type(layout.dtype, jnp.complex64)
    y_hat = {name: jax.ShapeDtypeStruct(spectrum, cdtype) for name in layout.names}

    def call(t, values, spectra):
        s, s_hat = (State.from_info(layout.info, v) for v in (values, spectra))
        return model.rhs_nonstiff_spectrum(t, s, s_hat)

    out = jax.eval_shape(call, t, y, y_hat)
    shapes = (spectrum,) * len(layout.names)
    _check_output(model, layout, "rhs_nonstiff_spectrum", out, shapes, "spectrum's shape")


def _check_output(model, layout: Layout, part: str, out, shapes, what: str = "shape") -> None:
    cls = type(model).__name__
    if isinstance(out, State):
        out = out.values
    if not isinstance(out, Mapping):
        # eval_shape turns a returned array into a ShapeDtypeStruct: name what the user wrote.
        got = f"an array of shape {out.shape}" if hasattr(out, "shape") else type(out).__name__
        raise TypeError(
            f"{cls}.{part} must return a dict with one entry per state variable "
            f"({', '.join(layout.names)}), got {got}"
        )
    missing = [name for name in layout.names if name not in out]
    extra = [name for name in out if name not in layout.names]
    if missing:
        raise ValueError(f"{cls}.{part} returned no derivative for state variable {missing[0]!r}")
    if extra:
        raise ValueError(
            f"{cls}.{part} returned {extra[0]!r}, which is not a state variable of {cls} "
            f"(variables: {', '.join(layout.names)})"
        )
    for name, shape in zip(layout.names, shapes):
        got = tuple(getattr(out[name], "shape", np.shape(out[name])))
        try:
            fits = np.broadcast_shapes(got, shape) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"{cls}.{part} returned shape {got} for state variable {name!r}, whose "
                f"{what} is {shape}"
            )
