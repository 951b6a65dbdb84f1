"""`[fit.network.<field>]` of experiment configs: a network to build for a model field."""

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from difsim._config._experiment import field_defaults
from difsim._config._imports import import_model_module, load_model_file
from difsim._config._model import model_file
from difsim._config._schema import ConfigError, did_you_mean, given, names_list
from difsim._fit import ACTIVATIONS, NETWORK_KEYS, network_sizes

# A network's keys besides those that build it: `reference`, the true term it is drawn
# against ("function", "file.py:function" or "package.module:function"); `units`, those of
# its output (for the outputs' learned term).
OUTPUT_KEYS = ("reference", "units")


def check_networks(networks: dict[str, Any], cls: type, params: list[str]) -> None:
    """`[fit.network.<field>]`: a parameter of the model, known keys with valid values,
    and sizes that are given or come from the field's default `eqx.nn.MLP`."""
    defaults = SimpleNamespace(**field_defaults(cls))
    for field, spec in networks.items():
        key = f"fit.network.{field}"
        if field not in params:
            raise ConfigError(
                f"{cls.__name__} has no parameter {field!r} to hold a network; its parameters "
                f"are {names_list(params)}{did_you_mean(field, params)}",
                key,
            )
        if not isinstance(spec, dict):
            raise ConfigError(
                f'expected a table (width = 32, depth = 2, activation = "tanh", seed = 0), '
                f"got {given(spec)}",
                key,
            )
        for name, value in spec.items():
            if name == "reference":
                resolve_reference(value, f"{key}.reference", cls)
            elif name == "units":
                if not isinstance(value, str):
                    raise ConfigError(f'expected a string ("m/s^2"), got {given(value)}',
                                      f"{key}.units")  # fmt: skip
            else:
                _check_network_key(f"{key}.{name}", name, value)
        try:
            network_sizes(defaults, field, spec)
        except ValueError as e:
            raise ConfigError(str(e), key) from None


def _check_network_key(key: str, name: str, value: Any) -> None:
    if name not in NETWORK_KEYS:
        known = [*NETWORK_KEYS, *OUTPUT_KEYS]
        raise ConfigError(
            f"unknown key {name!r}; a network takes {names_list(known)}{did_you_mean(name, known)}",
            key,
        )
    if name == "activation":
        if value not in ACTIVATIONS:
            raise ConfigError(
                f"unknown activation {given(value)}; choose one of "
                f"{names_list(list(ACTIVATIONS))}{did_you_mean(str(value), list(ACTIVATIONS))}",
                key,
            )
        return
    least = 0 if name in ("depth", "seed") else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"expected an integer >= {least}, got {given(value)}", key)


def resolve_reference(name: Any, key: str, cls: type) -> Callable:
    """The function `reference` names: the true term a network is drawn against, called
    as the network is (one input array → its output array). `"function"`: a function of
    the module defining the model `cls` (its file, for `[model] name = "file.py:Class"`);
    `"file.py:function"` (a Python file, relative to the config's folder) or
    `"package.module:function"`: as `[model] name` finds a class.

    **Raises:** [`ConfigError`][] under `key`.
    """
    if not isinstance(name, str) or not name.strip(":"):
        raise ConfigError(
            f'expected "function" (of the model\'s file), "file.py:function" or '
            f'"package.module:function", got {given(name)}',
            key,
        )
    if ":" not in name:
        module, qualname = sys.modules[cls.__module__], name
        where = f"the file of {cls.__name__} ({getattr(module, '__file__', cls.__module__)})"
    elif (file := model_file(name)) is not None:
        module, qualname = load_model_file(Path(file[0]), key), file[1]
        where = f"file {file[0]!r}"
    else:
        module_name, _, qualname = name.rpartition(":")
        module, where = import_model_module(module_name, qualname, key), f"module {module_name!r}"
    obj = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"{where} has no function {qualname!r}", key)
    if not callable(obj) or isinstance(obj, type):
        raise ConfigError(
            f"{name!r} is a {'class' if isinstance(obj, type) else type(obj).__name__}, "
            "not a function of the network's input",
            key,
        )
    return obj


def network_references(networks: Mapping[str, Mapping[str, Any]], model: Any) -> dict:
    """`{field: function}` of the networks that declare a `reference`, each called on
    zeros shaped as its network's input in `model` (holding the networks, before a fit):
    it must return as many values as the network.

    **Raises:** [`ConfigError`][] under `fit.network.<field>.reference`.
    """
    out = {}
    for field, spec in networks.items():
        if "reference" not in spec:
            continue
        key = f"fit.network.{field}.reference"
        out[field] = resolve_reference(spec["reference"], key, type(model))
        _check_reference(out[field], getattr(model, field), spec["reference"], key)
    return out


def label_terms(dataset, networks: Mapping[str, Mapping[str, Any]]):
    """`dataset` (a fit's) with the `units` each network declares on its learned and
    reference term."""
    for field, spec in networks.items():
        for name in (f"learned_{field}", f"reference_{field}"):
            if "units" in spec and name in dataset:
                dataset[name].attrs["units"] = spec["units"]
    return dataset


def _check_reference(reference: Callable, network: Any, name: str, key: str) -> None:
    import jax.numpy as jnp
    import numpy as np

    size = getattr(network, "in_size", None)
    if not isinstance(size, int):
        return
    x = jnp.zeros((size,))
    try:
        got = np.size(reference(x))
    except Exception as e:  # the user's function may fail in any way
        raise ConfigError(
            f"{name} fails on the network's input (zeros of shape ({size},)): "
            f"{type(e).__name__}: {e}",
            key,
        ) from e
    want = np.size(network(x))
    if got != want:
        raise ConfigError(
            f"{name} returns {got} value(s) for one input, the network {want}; it must "
            "return what the network does",
            key,
        )


def resolve_references(out: dict, folder: Path, overrides: Mapping, absolute: Callable) -> None:
    """`[fit.network.<field>] reference = "file.py:function"` of the raw config `out`: the
    file made `absolute` (relative to `folder`, or the current directory for an override),
    as `resolve_paths` does for the other paths."""
    networks = out.get("fit", {}).get("network") if isinstance(out.get("fit"), dict) else None
    if not isinstance(networks, dict):
        return
    networks = out["fit"]["network"] = dict(networks)  # the caller's tables stay as given
    for field, spec in list(networks.items()):
        value = spec.get("reference") if isinstance(spec, dict) else None
        file = model_file(value) if isinstance(value, str) else None
        if file is not None:
            key = f"fit.network.{field}.reference"
            typed = any(key == k or key.startswith(k + ".") for k in overrides)
            base = Path.cwd() if typed else folder
            networks[field] = {**spec, "reference": f"{absolute(file[0], base)}:{file[1]}"}
