r"""The free variables of a fit: named scalars, arrays and sub-modules of a model.

A free variable is named by a path: a parameter (`"k"`), an initial value (`"state.x"`),
or a part of a parameter that is a module or a sequence (`"net"`, `"net.layers[0].weight"`,
`"net.layers.0"`). Its values are the floating-point array leaves under that path, in
`jax.tree` order; a network's activation function, integer leaves and static fields stay
fixed. A fit packs every free variable, ravelled, into one unconstrained vector
$u \in \mathbb{R}^p$; a transform acts on each of its values elementwise.
"""

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import Model, state_var
from difsim._fit._transforms import AbstractTransform, as_transform

_STEP = re.compile(r"\[(-?\d+)\]|\.?([A-Za-z_]\w*|\d+)")


def path_steps(name: str) -> tuple[str | int, ...]:
    """`"net.layers[0].weight"` → `("net", "layers", 0, "weight")` (`"layers.0"` also
    indexes); `ValueError` for text that is not such a path."""
    steps: list[str | int] = []
    pos = 0
    while pos < len(name):
        match = _STEP.match(name, pos)
        if match is None or (pos == 0 and name[0] in ".["):
            raise ValueError(
                f"free variable {name!r} is not a path like 'k', 'net' or 'net.layers[0].weight'"
            )
        index, attr = match.groups()
        steps.append(int(index) if index is not None else int(attr) if attr.isdigit() else attr)
        pos = match.end()
    return tuple(steps)


def resolve(model: Model, name: str) -> Any:
    """The value at path `name` in `model` (an initial value for `"state.<var>"`),
    `ValueError` naming the step that does not exist or is static."""
    if (var := state_var(name)) is not None:
        return model.initial_state()[var]
    steps = path_steps(name)
    value: Any = model
    for depth, step in enumerate(steps):
        where = ".".join(str(s) for s in steps[:depth]) or type(model).__name__
        value = _step(value, step, where, name)
    return value


def _step(value: Any, step: str | int, where: str, name: str) -> Any:
    kind = type(value).__name__
    if isinstance(step, int):
        if not isinstance(value, list | tuple) or not -len(value) <= step < len(value):
            raise ValueError(f"free variable {name!r}: {where} ({kind}) has no item [{step}]")
        return value[step]
    fields = {}
    if dataclasses.is_dataclass(value):
        fields = {f.name: f for f in dataclasses.fields(value)}
    if step not in fields:
        known = ", ".join(f for f in fields if not fields[f].metadata.get("static")) or "none"
        raise ValueError(
            f"free variable {name!r}: {where} ({kind}) has no field {step!r} (its fields: {known})"
        )
    if fields[step].metadata.get("static", False):
        raise ValueError(
            f"free variable {name!r}: {where}.{step} is a static field of {kind}, part of the "
            "model's structure, not a value that can be fitted"
        )
    return getattr(value, step)


def leaves(value: Any) -> list[jax.Array]:
    """The floating-point array leaves of `value`, in `jax.tree` order."""
    return jax.tree.leaves(eqx.filter(value, eqx.is_inexact_array))


def check_fittable(value: Any, name: str, cls: str) -> None:
    """Raise unless `value` holds floating-point values to fit (not an integer, a bool,
    a function, or a module of those)."""
    if isinstance(value, bool | int) or (
        hasattr(value, "dtype") and not jnp.issubdtype(value.dtype, jnp.inexact)
    ):
        what = type(value).__name__ if not hasattr(value, "dtype") else str(value.dtype)
        raise ValueError(
            f"free variable {name!r} of {cls} is an integer or boolean ({what}): only "
            "floating-point values can be fitted; fix it, or declare it `name: float = ...`"
        )
    if not leaves(value):
        raise ValueError(
            f"free variable {name!r} of {cls} ({type(value).__name__}) holds no "
            "floating-point arrays to fit"
        )


def flat_size(value: Any) -> int:
    """How many values `value` contributes to the fit's vector."""
    return sum(int(np.size(leaf)) for leaf in leaves(value))


def flatten(value: Any) -> jax.Array:
    """Every floating-point value of `value`, ravelled into one 1-D array."""
    return jnp.concatenate([jnp.ravel(leaf) for leaf in leaves(value)])


def unflatten(template: Any, flat: jax.Array) -> Any:
    """`template` with its floating-point leaves replaced by consecutive pieces of `flat`
    (the inverse of [`flatten`][]); scalars and arrays keep their shapes."""
    dynamic, static = eqx.partition(template, eqx.is_inexact_array)
    parts, treedef = jax.tree.flatten(dynamic)
    pieces, offset = [], 0
    for leaf in parts:
        size = int(np.size(leaf))
        pieces.append(jnp.reshape(flat[offset : offset + size], np.shape(leaf)))
        offset += size
    return eqx.combine(jax.tree.unflatten(treedef, pieces), static)


def with_values(model: Model, values: dict[str, Any]) -> Model:
    """`model` with the value at each path of `values` replaced (initial values and
    top-level parameters by `Model.replace`, deeper paths by `eqx.tree_at`)."""
    direct = {k: v for k, v in values.items() if state_var(k) is not None or "." not in k
              and "[" not in k}  # fmt: skip
    model = model.replace(**direct) if direct else model
    deep = [(path_steps(k), v) for k, v in values.items() if k not in direct]
    if not deep:
        return model

    def where(m):
        return tuple(_walk(m, steps) for steps, _ in deep)

    return eqx.tree_at(where, model, tuple(v for _, v in deep))


def _walk(value: Any, steps: tuple[str | int, ...]) -> Any:
    for step in steps:
        value = value[step] if isinstance(step, int) else getattr(value, step)
    return value


def overlapping(names: list[str]) -> tuple[str, str] | None:
    """A pair of free paths one of which lies inside the other (`"net"` and
    `"net.layers[0].weight"`), or `None`."""
    paths = [(n, path_steps(n) if state_var(n) is None else ("state", n)) for n in names]
    for i, (a, pa) in enumerate(paths):
        for b, pb in paths[i + 1 :]:
            short, long = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
            if long[: len(short)] == short:
                return (a, b)
    return None


def describe_value(value: Any) -> str:
    """`"87 values (MLP)"`, `"shape (8,)"`: a free variable's kind for summaries."""
    if isinstance(value, jax.Array | np.ndarray) and np.ndim(value) > 0:
        return f"shape {tuple(np.shape(value))}"
    return f"{flat_size(value)} values ({type(value).__name__})"


def free_transforms(model: Model, free, control) -> dict[str, AbstractTransform]:
    """`{name: transform}` of `fit`'s `free` argument (a mapping or a list of names),
    every name checked against `model` (a parameter or a path into one, or
    `"state.<var>"`; not the steady-state fit's `control`; no path inside another)."""
    cls = type(model).__name__
    if isinstance(free, str):
        free = [free]
    if isinstance(free, Mapping):
        items = list(free.items())
    elif isinstance(free, Sequence):
        items = [(name, None) for name in free]
    else:
        raise TypeError(
            f"free must be a mapping {{name: transform}} or a list of names, got {free!r}"
        )
    if not items:
        raise ValueError("free is empty: name at least one parameter or 'state.<var>' to fit")
    out = {}
    for name, spec in items:
        if not isinstance(name, str):
            raise TypeError(f"free parameter names must be strings, got {name!r}")
        _check_name(model, name, control)
        if name == control:
            raise ValueError(f"{name!r} is the control parameter of the data; it cannot be free")
        check_fittable(resolve(model, name), name, cls)
        out[name] = as_transform(spec, name)
    if (pair := overlapping(list(out))) is not None:
        raise ValueError(
            f"free names both {pair[0]!r} and {pair[1]!r}, one inside the other: name each "
            "value once"
        )
    return out


def _check_name(model: Model, name: str, control) -> None:
    """Raise unless `name` starts at a parameter of `model` or names a state variable."""
    cls = type(model).__name__
    params = model.parameter_names()
    states = model.initial_state().names
    if (var := state_var(name)) is not None:
        if var not in states:
            raise ValueError(
                f"free names unknown state variable {name!r}; {cls}'s state variables "
                f"are {', '.join(states)} (write them as 'state.<var>')"
            )
        if control is not None:
            raise ValueError(
                f"free names {name!r}, but in a steady-state fit the initial state is only "
                "the root finder's guess: it cannot be fitted"
            )
        return
    head = path_steps(name)[0]
    if head not in params:
        raise ValueError(
            f"free names unknown parameter {head!r}; {cls}'s parameters are "
            f"{', '.join(params)}, and initial values are 'state.<var>' with variables "
            f"{', '.join(states)}"
        )


def initial_values(model: Model, transforms) -> list[np.ndarray]:
    """The free variables' values in `model` (the fit's start), each ravelled `(n,)` and
    checked to lie inside its transform's range."""
    values = []
    for name, transform in transforms.items():
        flat = np.asarray(flatten(resolve(model, name)))
        inside = np.asarray(transform.contains(flat))
        if not np.all(inside):
            kind = type(transform).__name__
            if flat.size == 1:
                raise ValueError(
                    f"initial value {name} = {float(flat[0]):g} lies outside the range "
                    f"{transform.describe()} of its transform {kind}; start from a value "
                    "inside it"
                )
            bad = np.flatnonzero(~inside)
            raise ValueError(
                f"{bad.size} of the {flat.size} initial values of {name} lie outside the "
                f"range {transform.describe()} of its transform {kind} (the first: "
                f"{float(flat[bad[0]]):g} at flat index {int(bad[0])}); start from values "
                "inside it"
            )
        values.append(flat)
    return values


def plain_value(value):
    """A free variable's value for JSON: a float, nested lists for an array, `{path:
    lists}` for a module's arrays."""
    if isinstance(value, float):
        return value
    if isinstance(value, eqx.Module):
        dyn = eqx.filter(value, eqx.is_inexact_array)
        flat = jax.tree_util.tree_flatten_with_path(dyn)[0]
        return {jax.tree_util.keystr(p): np.asarray(v).tolist() for p, v in flat}
    return np.asarray(value).tolist()


def stderr_spread(value, stderr) -> str:
    """`"median 0.012"`: the typical standard error of an array's values (`"n/a"` for a
    module, or where none is finite)."""
    errors = np.asarray(flatten(stderr)) if isinstance(stderr, eqx.Module) else np.ravel(stderr)
    finite = errors[np.isfinite(errors)]
    return f"median {np.median(finite):.3g}" if finite.size else "n/a"
