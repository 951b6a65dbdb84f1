"""The `[model]` section of a config: which model, its parameters, initial state and grid."""

import os
from pathlib import Path
from typing import Any

import equinox as eqx
import numpy as np

from difsim._config._experiment import ModelSpec, field_defaults
from difsim._config._imports import import_model_module, load_model_file
from difsim._config._schema import REQUIRED, ConfigError, did_you_mean, given, names_list
from difsim._core import Model, State
from difsim._pde import Grid, grid_from_table
from difsim.models import MODELS


def parse_model(values: dict[str, Any], parsed: dict[str, Any]) -> ModelSpec:
    cls = resolve_model(values["name"])
    defaults = field_defaults(cls)
    names = cls.parameter_names()
    params = values["parameters"]
    for name, value in params.items():
        key = f"model.parameters.{name}"
        if name not in names:
            raise ConfigError(
                f"{cls.__name__} has no parameter {name!r}; its parameters are "
                f"{names_list(names)}{did_you_mean(name, names)}",
                key,
            )
        _check_array_value(value, defaults.get(name), key, "parameter")
    for name in names:
        if defaults.get(name, REQUIRED) is REQUIRED and name not in params:
            raise ConfigError(
                f"{cls.__name__} has no default for {name!r}: give a value",
                f"model.parameters.{name}",
            )
    state0 = defaults.get("state")
    for name, value in values["state"].items():
        key = f"model.state.{name}"
        if not isinstance(state0, State):
            raise ConfigError(f"{cls.__name__} declares no state variables", "model.state")
        if name not in state0.names:
            raise ConfigError(
                f"{cls.__name__} has no state variable {name!r}; its variables are "
                f"{names_list(state0.names)}{did_you_mean(name, state0.names)}",
                key,
            )
        _check_array_value(value, state0[name], key, "state variable")
    grid = dict(values["grid"])
    if grid:
        base = defaults.get("grid")
        if not isinstance(base, Grid):
            raise ConfigError(f"{cls.__name__} has no grid (a field named 'grid')", "model.grid")
        try:
            grid_from_table(base, grid)
        except (TypeError, ValueError) as error:
            raise ConfigError(str(error), "model.grid") from None
    return ModelSpec(values["name"], cls, dict(params), dict(values["state"]), grid)


def model_file(name: str) -> tuple[str, str] | None:
    """`(file, class)` when `[model] name` names a Python file (`"models/heat.py:Heat"`: the
    part before the last `:` ends in `.py` or holds a path separator), else `None`."""
    target, sep, qualname = name.rpartition(":")
    if not sep or not (target.endswith(".py") or "/" in target or os.sep in target):
        return None
    return target, qualname


def resolve_model(name: str) -> type[Model]:
    """The model class for `[model] name`: a key of `difsim.models.MODELS`; `"file.py:Class"`
    (a Python file, run as a module of its own); or `"package.module:Class"` (imported,
    never from the current directory). Either must name a `difsim.Model` subclass."""
    key = "model.name"
    if ":" not in name:
        if name not in MODELS:
            raise ConfigError(
                f"unknown model {name!r}; choose one of {names_list(MODELS)}"
                f'{did_you_mean(name, list(MODELS))}, or give "file.py:Class" or '
                '"package.module:Class"',
                key,
            )
        return MODELS[name]
    file = model_file(name)
    if file is not None:
        module, qualname = load_model_file(Path(file[0]), key), file[1]
        where = f"model file {file[0]!r}"
    else:
        module_name, _, qualname = name.rpartition(":")
        if not module_name or not qualname:
            raise ConfigError(
                f'expected "file.py:Class" or "package.module:Class", got {name!r}', key
            )
        module, where = import_model_module(module_name, qualname, key), f"module {module_name!r}"
    obj = module
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{where} has no attribute {qualname!r}", key) from None
    if not (isinstance(obj, type) and issubclass(obj, Model)):
        raise ConfigError(f"{name!r} is not a difsim.Model subclass (got {obj!r})", key)
    return obj


def _check_array_value(value: Any, default: Any, key: str, what: str) -> None:
    if isinstance(default, eqx.Module):
        raise ConfigError(
            f"this {what} is a {type(default).__name__}, which a config cannot set", key
        )
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false, got {given(value)}", key)
        return
    shape = np.shape(default) if default is not None else None
    expected = "a number" if not shape else f"a number or a list of shape {shape}"
    try:
        array = np.asarray(value, dtype=float)
        ok = not isinstance(value, bool | str) and _all_numbers(value)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"expected {expected}, got {given(value)}", key)
    if not np.all(np.isfinite(array)):
        raise ConfigError(f"expected finite values, got {given(value)}", key)
    if shape is not None and array.shape not in ((), shape):
        raise ConfigError(f"expected {expected}, got shape {array.shape}", key)


def _all_numbers(value: Any) -> bool:
    if isinstance(value, list):
        return all(_all_numbers(v) for v in value)
    return isinstance(value, int | float) and not isinstance(value, bool)
