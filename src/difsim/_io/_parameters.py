"""A model's array-valued parameters as output variables.

Scalar parameters are global attributes of an output; everything else a model holds as a
parameter (an array field such as a coefficient field on a grid, and the arrays inside a
sub-module: an equinox network's weights and biases, a closure's coefficients) becomes one
data variable per array, **named by its path as Python reads it**: `k` for an array
field, `net.layers[0].weight` for `model.net.layers[0].weight`, `term.w` for a custom
module's field. Its dimensions are a grid's (`x`, `y`, ...) when its shape is the shape of
one of the model's grids, else `<name>_dim0`, `<name>_dim1`, ...; its attributes carry the
parameter's `units` and `long_name` and `difsim_role = "parameter"` (so plots and readers
tell it from results). Grids are described by the `grid` attribute instead; callables
and other non-array leaves (an activation function) are part of the sweep identity, not of
the output. netCDF writes these names as they are (no `/` is ever in one)."""

from typing import Any

import jax
import numpy as np

from difsim._io._meta import ROLE, param_attrs

PARAMETER_ROLE = "parameter"


def _leaves(model: Any, skip: tuple[str, ...] = ()):
    """`(parameter, path, leaf)` of every numeric leaf of the model's parameters (grids
    excluded), in declaration order."""
    grids = [id(g) for g in model.grids()]
    for name in type(model).parameter_names():
        value = getattr(model, name, None)
        if name in skip or id(value) in grids:
            continue
        for path, leaf in jax.tree_util.tree_flatten_with_path(value)[0]:
            if _numeric(leaf):
                yield name, name + jax.tree_util.keystr(path), leaf


def parameter_arrays(
    model: Any, skip: tuple[str, ...] = (), nbatch: int = 0
) -> dict[str, tuple[str, Any]]:
    """`{path: (parameter, array)}` of every numeric array of the model's parameters that is
    not a scalar (a scalar is an attribute): array fields, and the array leaves of
    sub-modules (grids excluded), in declaration order. `skip`: parameter names left out
    (swept ones). `nbatch`: the leading batch axes of a batched model (a vmapped or
    ensemble solution's), not counted as the arrays' own."""
    return {
        path: (name, leaf)
        for name, path, leaf in _leaves(model, skip)
        if path != name or np.ndim(leaf) > nbatch
    }


def batch_ndim(model: Any, batch_shape: tuple[int, ...]) -> int:
    """How many leading axes of the model's parameters are batch axes: `len(batch_shape)`
    when every numeric leaf starts with `batch_shape` (a vmapped or ensemble solution's
    model), else 0 (one model for the whole batch)."""
    n = len(batch_shape)
    shapes = [np.shape(leaf) for _, _, leaf in _leaves(model)]
    return n if n and all(s[:n] == tuple(batch_shape) for s in shapes) else 0


def same_over_batch(values: np.ndarray, nbatch: int) -> bool:
    """Whether `values` (batch axes first) is the same for every batch element."""
    if values.size == 0 or nbatch == 0:
        return True
    first = np.broadcast_to(values[(0,) * nbatch], values.shape)
    return bool(np.array_equal(values, first, equal_nan=values.dtype.kind in "fc"))


def _numeric(leaf: Any) -> bool:
    """An array (or NumPy scalar) of numbers or booleans: not a PRNG key, not an object."""
    dtype = getattr(leaf, "dtype", None)  # a PRNG key's is not a NumPy dtype
    return isinstance(dtype, np.dtype) and dtype.kind in "biufc"


def own_dims(model: Any, path: str, shape: tuple[int, ...]) -> tuple[str, ...]:
    """The dimensions of a parameter array of `shape` (without batch axes): the dims of a
    grid of that shape, else `<path>_dim<i>`."""
    for grid in model.grids():
        if tuple(grid.shape) == tuple(shape):
            return tuple(grid.dims)
    return tuple(f"{path}_dim{i}" for i in range(len(shape)))


def parameter_variable_attrs(model: Any, path: str, parameter: str) -> dict[str, Any]:
    """`units`, `long_name` (the parameter's description, with the path inside a module)
    and `difsim_role = "parameter"` of the output variable of array `path`."""
    attrs = param_attrs(type(model).parameter_info(parameter))
    described = attrs.get("long_name")
    if path != parameter:
        attrs["long_name"] = f"{described}: {path}" if described else path
    attrs.setdefault("long_name", path)
    attrs[ROLE] = PARAMETER_ROLE
    return attrs


def fixed_variables(model: Any, skip: tuple[str, ...] = ()) -> dict[str, tuple]:
    """`{path: (dims, values, attrs)}`: each array of [`parameter_arrays`][] of an unbatched
    `model` as a data variable (NumPy values of their own)."""
    out = {}
    for path, (parameter, leaf) in parameter_arrays(model, skip).items():
        values = np.array(leaf)
        dims = own_dims(model, path, values.shape)
        out[path] = (dims, values, parameter_variable_attrs(model, path, parameter))
    return out
