"""Glue between a named-state `Model` and diffrax's array-valued vector fields."""

import os
import traceback
from collections import OrderedDict
from collections.abc import Hashable, Mapping
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
    def algebraic(self) -> tuple[str, ...]:
        """Names of the algebraic variables of a differential-algebraic model (else `()`)."""
        return tuple(name for name, info in self.info if info.algebraic)

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
    whose derivative is missing, unexpected, or of a shape that does not fit; a `TypeError`
    for complex derivatives of a real state, or Python control flow on traced values.

    A model that passed is not traced again for the same [`_check_key`][] (new parameter
    values of the same shapes: an eager `simulate` in a loop skips a ~1.5 ms trace)."""
    key = _check_key(model, layout, part)
    if key is not None and key in _CHECKED:
        _CHECKED.move_to_end(key)
        return
    _trace_rhs(model, layout, part)
    if key is not None:
        _CHECKED[key] = None
        if len(_CHECKED) > _CHECKED_MAX:
            _CHECKED.popitem(last=False)


# Keys of the checks passed, most recent last (failures are never kept: each call raises).
_CHECKED: OrderedDict[Hashable, None] = OrderedDict()
_CHECKED_MAX = 256


def _check_key(model, layout: Layout, part: str) -> Hashable | None:
    """What the check's trace sees, as a hashable key: the model's class, its tree
    structure (static fields included), each array leaf's shape and dtype (the trace makes
    them abstract) and every other leaf's type and value (the trace sees those), the state's
    layout and the method. `None` where some part does not hash (then nothing is kept).
    Not in it: the method's code, so a method replaced on a class that already passed is not
    checked again (a notebook that redefines the class makes a new class, which is). Kept
    here rather than in `_sweep._memo`'s `LRU`, which sits above this layer."""
    leaves, treedef = jax.tree.flatten(model)
    seen = tuple(
        (x.shape, x.dtype, getattr(x, "weak_type", False)) if eqx.is_array(x) else (type(x), x)
        for x in leaves
    )
    key = (type(model), treedef, seen, layout.info, layout.shapes, layout.dtype, part)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _trace_rhs(model, layout: Layout, part: str) -> None:
    """[`check_rhs`][]'s trace and checks."""
    t = jax.ShapeDtypeStruct((), layout.dtype)
    y = {
        name: jax.ShapeDtypeStruct(shape, layout.dtype)
        for name, shape in zip(layout.names, layout.shapes)
    }

    def call(model, t, values):
        return getattr(model, part)(t, State.from_info(layout.info, values))

    try:
        # The model's arrays abstract too, as in the compiled solve: a Python `if` on a
        # parameter fails here, by name, rather than deep inside the solver.
        out = eqx.filter_eval_shape(call, model, t, y)
    except _TRACER_ERRORS as error:
        raise traced_value_error(model, part, error) from error
    _check_output(model, layout, part, out, layout.shapes)
    _check_real(model, layout, part, out)


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

    def call(model, t, values, spectra):
        s, s_hat = (State.from_info(layout.info, v) for v in (values, spectra))
        return model.rhs_nonstiff_spectrum(t, s, s_hat)

    try:
        out = eqx.filter_eval_shape(call, model, t, y, y_hat)
    except _TRACER_ERRORS as error:
        raise traced_value_error(model, "rhs_nonstiff_spectrum", error) from error
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
    if missing or extra:
        raise ValueError(_keys_message(f"{cls}.{part}", cls, missing, extra, layout.names))
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


def _keys_message(where: str, cls: str, missing: list, extra: list, names) -> str:
    """What is wrong with the keys an rhs returned: every missing and every extra one."""
    quoted = lambda keys: ", ".join(repr(k) for k in keys)  # noqa: E731
    problems = []
    if missing:
        problems.append(
            f"no derivative for state variable{'s' if len(missing) > 1 else ''} {quoted(missing)}"
        )
    if extra:
        problems.append(
            f"{quoted(extra)}, which {'are' if len(extra) > 1 else 'is'} not a state variable "
            f"of {cls}"
        )
    hint = ""
    if len(missing) == 1 and len(extra) == 1:
        hint = f" (is {extra[0]!r} meant to be {missing[0]!r}?)"
    return (
        f"{where} returned {' and '.join(problems)}{hint}; it must return one entry per "
        f"state variable ({', '.join(names)})"
    )


def _check_real(model, layout: Layout, part: str, out) -> None:
    """A complex derivative of a real state would be cast to real, silently dropping its
    imaginary part: refuse it."""
    if jnp.issubdtype(layout.dtype, jnp.complexfloating):
        return
    cls = type(model).__name__
    values = out.values if isinstance(out, State) else out
    for name in layout.names:
        dtype = getattr(values[name], "dtype", None)
        dtype = np.result_type(values[name]) if dtype is None else dtype
        if jnp.issubdtype(dtype, jnp.complexfloating):
            raise TypeError(
                f"{cls}.{part} returned complex values ({dtype}) for state variable {name!r}, "
                f"whose state is real ({layout.dtype}): they would be cast to real, dropping "
                "the imaginary part. Return real values (split a complex quantity into two "
                "real variables, or take jnp.real where the imaginary part is rounding), or "
                f"make the initial state complex (e.g. {name}=1.0 + 0j) to integrate in "
                "complex arithmetic"
            )


# JAX's errors for Python control flow or conversions on traced values, most specific
# first, each with what the user wrote and what to write instead.
_TRACED_ADVICE = (
    (
        jax.errors.TracerBoolConversionError,
        "a Python `if`, `while`, `and`/`or`/`not` or `bool()` on a value that depends on "
        "the state, the time or a parameter",
        "choose values with jnp.where(condition, a, b), or branches with jax.lax.cond",
    ),
    (
        jax.errors.TracerIntegerConversionError,
        "`int()`, `range()` or a Python index computed from a traced value",
        "use jax.numpy indexing (x[i] with an array i), jnp.take, or jax.lax.fori_loop",
    ),
    (
        jax.errors.TracerArrayConversionError,
        "NumPy (`np.*`) on a traced value",
        "use jax.numpy (`jnp.*`) inside the model",
    ),
    (
        jax.errors.ConcretizationTypeError,
        "a Python value (`float()`, a shape, a loop bound) computed from a traced value",
        "keep values as JAX arrays (jnp.where, jax.lax.cond, jax.lax.fori_loop)",
    ),
)
_TRACER_ERRORS = tuple(kind for kind, _, _ in _TRACED_ADVICE)


def traced_value_error(model, part: str, error: Exception) -> TypeError:
    """A difsim error for a JAX tracer error raised while tracing `model.<part>`: names the
    model, the method, the user's line, what it does and what to write instead."""
    what, advice = next((w, a) for kind, w, a in _TRACED_ADVICE if isinstance(error, kind))
    line = _user_line(error)
    return TypeError(
        f"{type(model).__name__}.{part} uses {what}{line}. difsim compiles the model with "
        "JAX, which traces these values without knowing them, so Python cannot decide on "
        f"them: {advice}"
    )


def _user_line(error: Exception) -> str:
    """` (file.py, line 12: `if s.x > 0:`)` for the innermost frame outside JAX, or `""`."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if f"{os.sep}jax{os.sep}" not in frame.filename and "jaxlib" not in frame.filename:
            code = f": `{frame.line.strip()}`" if frame.line else ""
            return f" ({frame.filename}, line {frame.lineno}{code})"
    return ""
