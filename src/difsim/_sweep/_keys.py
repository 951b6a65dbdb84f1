"""Which keys a sweep may name on a model: its scalar parameters, and `"state.<var>"` of its
scalar state variables; [`check_keys`][] names a key that is neither, with what there is."""

import dataclasses
import difflib
from typing import Any

import numpy as np

from difsim._core import Model, state_key, state_var


def sweepable_keys(model: Model | type[Model]) -> tuple[list[str], list[str]]:
    """`(parameters, state keys)` a sweep may name: scalar parameters and `"state.<var>"`
    of scalar state variables."""
    cls = model if isinstance(model, type) else type(model)
    instance = None if isinstance(model, type) else model
    params, states = [], []
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    for name in cls.parameter_names():
        value = getattr(instance, name) if instance is not None else defaults.get(name)
        if value is dataclasses.MISSING or _is_scalar(value):
            params.append(name)
    state = instance.initial_state() if instance is not None else defaults.get("state")
    if state is not None and state is not dataclasses.MISSING:
        states = [state_key(k) for k, v in state.items() if _is_scalar(v)]
    return params, states


def _is_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    try:
        return np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.number)
    except Exception:  # a sub-module or other object
        return False


def check_keys(keys, model: Model | type[Model], what: str = "sweep") -> None:
    """Raise `ValueError` naming the first key that cannot be swept on `model`."""
    cls = model if isinstance(model, type) else type(model)
    params, states = sweepable_keys(model)
    valid = params + states
    for key in keys:
        if key in valid:
            continue
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listing = (
            f"parameters are {', '.join(map(repr, params)) or '(none)'}; state variables "
            f"are swept as {', '.join(map(repr, states)) or '(none)'}"
        )
        if key in cls.parameter_names() or key in _all_state_names(model):
            raise ValueError(
                f"{what} key {key!r}: only scalar parameters and initial values can be "
                f"swept, and {cls.__name__}'s {key!r} is {_described(model, key)} (held "
                f"fixed: every point uses the model's own); {listing}"
            )
        if state_var(key) is None and state_key(key) in states:
            hint = f" (state variables are swept as 'state.{key}')"
        raise ValueError(
            f"{what} key {key!r}: {cls.__name__} has no such {_kind(key)}; {listing}{hint}"
        )


def _described(model: Model | type[Model], key: str) -> str:
    """What the non-scalar value under `key` is: `"a sub-module (MLP)"`, `"an array of
    shape (8,)"`; `"an array or a sub-module"` for a class, whose values are not at hand."""
    if isinstance(model, type):
        return "an array or a sub-module"
    var = state_var(key)
    value = model.initial_state()[var] if var is not None else getattr(model, key)
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array of shape {tuple(value.shape)}"
    return f"a sub-module ({type(value).__name__})"


def _kind(key: str) -> str:
    return "state variable" if state_var(key) is not None else "parameter"


def _all_state_names(model) -> list[str]:
    if isinstance(model, type):
        state = {f.name: f.default for f in dataclasses.fields(model)}.get("state")
    else:
        state = model.initial_state()
    names = getattr(state, "names", ())
    return [state_key(n) for n in names] if isinstance(names, tuple) else []
