"""`[fit.network.<field>]` of experiment configs: a network to build for a model field."""

from types import SimpleNamespace
from typing import Any

from difsim._config._experiment import field_defaults
from difsim._config._schema import ConfigError, did_you_mean, given, names_list
from difsim._fit import ACTIVATIONS, NETWORK_KEYS, network_sizes


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
            _check_network_key(f"{key}.{name}", name, value)
        try:
            network_sizes(defaults, field, spec)
        except ValueError as e:
            raise ConfigError(str(e), key) from None


def _check_network_key(key: str, name: str, value: Any) -> None:
    if name not in NETWORK_KEYS:
        raise ConfigError(
            f"unknown key {name!r}; a network takes {names_list(list(NETWORK_KEYS))}"
            f"{did_you_mean(name, list(NETWORK_KEYS))}",
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
