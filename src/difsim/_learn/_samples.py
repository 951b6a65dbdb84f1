"""The samples [`discover`][] regresses on: state variables from a solution, a dataset, a
mapping or an array, and the learned term's values there."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim._core import Solution, State


def sample_columns(states: Any, names: Sequence[str] | None, xp=np) -> dict[str, Any]:
    """`{variable: values}` from `states`, every array flattened to one value per sample
    (NumPy float64 with `xp=np`; left as given with `xp=jnp`, so tracers pass)."""
    if isinstance(states, Solution):
        found, default = states.ys, states.names
    elif isinstance(states, xr.Dataset):
        found = {name: states[name].values for name in states.data_vars}
        default = tuple(
            name
            for name, var in states.data_vars.items()
            if var.ndim > 0 and np.issubdtype(var.dtype, np.floating)
        )
    elif isinstance(states, Mapping | State):
        found, default = states, tuple(states)
    else:
        return _array_columns(states, names, xp)
    chosen = tuple(default if names is None else names)
    missing = [name for name in chosen if name not in found]
    if missing:
        raise ValueError(
            f"discover: the states have no variable {missing[0]!r}; they have "
            f"{', '.join(map(str, found))}"
        )
    columns = {name: xp.asarray(found[name]) for name in chosen}
    return _flat(columns, xp)


def _array_columns(states: Any, names: Sequence[str] | None, xp) -> dict[str, Any]:
    array = xp.asarray(states)
    if array.ndim not in (1, 2):
        raise ValueError(
            f"discover: states given as an array must have shape (samples, variables), got "
            f"shape {tuple(array.shape)}"
        )
    count = array.shape[-1]
    chosen = tuple(f"x{i}" for i in range(count)) if names is None else tuple(names)
    if len(chosen) != count:
        raise ValueError(
            f"discover: {len(chosen)} names ({', '.join(chosen)}) for {count} state columns "
            f"(states of shape {tuple(array.shape)})"
        )
    return {name: array[..., i] for i, name in enumerate(chosen)}


def _flat(columns: dict[str, Any], xp) -> dict[str, Any]:
    shapes = {name: tuple(value.shape) for name, value in columns.items()}
    if len(set(shapes.values())) > 1:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"discover: the state variables differ in shape: {listed}")
    if xp is jnp:  # `predict`: keep the samples' shape
        return columns
    return {name: value.reshape(-1) for name, value in columns.items()}


def checked_columns(columns: dict[str, Any]) -> dict[str, np.ndarray]:
    """The columns in float64, refusing none, empty or non-finite ones (named)."""
    if not columns:
        raise ValueError("discover: no state variables given (states or names is empty)")
    out = {}
    for name, value in columns.items():
        value = np.asarray(value, dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(value))
        if bad.size:
            raise ValueError(
                f"discover: state variable {name!r} holds {value[bad[0]]} at sample "
                f"{bad[0]} ({bad.size} non-finite values): drop those samples (e.g. a "
                "failed solve's NaN) before discovery"
            )
        out[name] = value
    if next(iter(out.values())).size == 0:
        raise ValueError("discover: the states hold no samples")
    return out


def learned_values(
    learned: Any, field: str | None, columns: dict[str, np.ndarray]
) -> tuple[np.ndarray, tuple[str, ...] | None]:
    """The learned term at the samples, shape `(samples, targets)`, and the target names
    when `learned` gives them (a dict output)."""
    if field is not None:
        learned = _field(learned, field)
    x = np.stack(list(columns.values()), axis=-1)
    if isinstance(learned, eqx.Module) and callable(learned):
        values = eqx.filter_vmap(learned)(jnp.asarray(x))  # a network: one sample a call
    elif callable(learned):
        values = learned(x)
    elif isinstance(learned, eqx.Module):
        raise TypeError(_field_hint(learned))
    else:
        values = learned
    return _as_targets(values, x.shape[0])


def _field(model: Any, path: str) -> Callable:
    value = model
    for part in path.split("."):
        if not hasattr(value, part):
            raise ValueError(
                f"discover: {type(model).__name__} has no field {path!r}. "
                + _field_hint(model, listing_only=True)
            )
        value = getattr(value, part)
    if not callable(value):
        raise TypeError(
            f"discover: field {path!r} of {type(model).__name__} is a "
            f"{type(value).__name__}, not a callable network"
        )
    return value


def _field_hint(model: Any, listing_only: bool = False) -> str:
    networks = [
        name
        for name in getattr(model, "__dataclass_fields__", {})
        if isinstance(getattr(model, name, None), eqx.Module) and callable(getattr(model, name))
    ]
    found = f"its callable fields are {', '.join(networks)}" if networks else "it has none"
    if listing_only:
        return f"Name the network's field ({found})."
    return (
        f"discover: {type(model).__name__} is not callable: give field='<name>', the field "
        f"holding the learned network ({found})"
    )


def _as_targets(values: Any, count: int) -> tuple[np.ndarray, tuple[str, ...] | None]:
    names = None
    if isinstance(values, Mapping):
        names = tuple(str(name) for name in values)
        values = [np.asarray(value, dtype=np.float64).reshape(-1) for value in values.values()]
        lengths = {value.size for value in values}
        if len(lengths) > 1:
            raise ValueError(f"discover: the learned term's outputs differ in length {lengths}")
        values = np.stack(values, axis=-1) if values else np.zeros((count, 0))
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != count:
        raise ValueError(
            f"discover: the learned term has shape {values.shape}, expected ({count}, "
            "targets): one row per state sample"
        )
    if values.shape[1] == 0:
        raise ValueError("discover: the learned term has no outputs (0 targets)")
    return values, names


def target_names(
    given: Sequence[str] | None, found: tuple[str, ...] | None, count: int, variables: tuple
) -> tuple[str, ...]:
    """The targets' names: given, from a dict output, `d_<variable>` when there is one
    target per variable, else `y0, y1, ...`."""
    if given is not None:
        names = tuple(given)
        if len(names) != count:
            raise ValueError(
                f"discover: {len(names)} target names ({', '.join(names)}) for a learned "
                f"term with {count} outputs"
            )
        return names
    if found is not None:
        return found
    if count == len(variables):
        return tuple(f"d_{name}" for name in variables)
    return tuple(f"y{i}" for i in range(count))


def check_finite(values: np.ndarray, labels: Sequence[str], what: str) -> None:
    """Refuse a non-finite column of `values`, naming it."""
    bad = ~np.isfinite(values)
    if bad.any():
        column = int(np.flatnonzero(bad.any(axis=0))[0])
        row = int(np.flatnonzero(bad[:, column])[0])
        raise ValueError(
            f"discover: {what} {labels[column]!r} is {values[row, column]} at sample {row}: "
            "every value must be finite"
        )
