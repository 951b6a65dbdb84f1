"""Networks declared by name: what a config's `[fit.network.<field>]` builds.

An `eqx.nn.MLP` from its sizes, an activation named in [`ACTIVATIONS`][] and a seed, put
in place of a model's field. Written for configs; in Python, build any equinox module and
pass the model holding it to [`fit`][].
"""

from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from difsim._core import Model


def rbf(x):
    r"""The Gaussian radial basis function $e^{-x^2}$ (the activation of the universal
    differential equations of Rackauckas et al. 2020)."""
    return jnp.exp(-(x**2))


ACTIVATIONS: dict[str, Callable] = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,
    "softplus": jax.nn.softplus,
    "sigmoid": jax.nn.sigmoid,
    "swish": jax.nn.swish,
    "rbf": rbf,
    "identity": lambda x: x,
}
NETWORK_KEYS = ("width", "depth", "activation", "seed", "in_size", "out_size")


def network_sizes(model_or_cls: Any, field: str, spec: Mapping[str, Any]) -> tuple[int, int]:
    """`(in_size, out_size)` of the network for `field`: from `spec`, else from the
    field's current (or default) value, which must then be an `eqx.nn.MLP`."""
    current = getattr(model_or_cls, field, None)
    sizes = []
    for key in ("in_size", "out_size"):
        if key in spec:
            sizes.append(int(spec[key]))
        elif isinstance(current, eqx.nn.MLP):
            sizes.append(int(getattr(current, key)))
        else:
            raise ValueError(
                f"network {field!r}: give {key} (the field holds no eqx.nn.MLP to take it from)"
            )
    return sizes[0], sizes[1]


def make_network(in_size: int, out_size: int, spec: Mapping[str, Any]) -> eqx.nn.MLP:
    """An `eqx.nn.MLP` with `spec`'s `width` (default 32), `depth` (hidden layers,
    default 2), `activation` (a name of [`ACTIVATIONS`][], default `"tanh"`) and `seed`
    (of its initial weights, default 0); linear output."""
    return eqx.nn.MLP(
        in_size,
        out_size,
        int(spec.get("width", 32)),
        int(spec.get("depth", 2)),
        activation=ACTIVATIONS[spec.get("activation", "tanh")],
        key=jax.random.key(int(spec.get("seed", 0))),
    )


def with_networks(model: Model, networks: Mapping[str, Mapping[str, Any]]) -> Model:
    """`model` with each field of `networks` replaced by the network its spec declares."""
    built = {}
    for field, spec in networks.items():
        built[field] = make_network(*network_sizes(model, field, spec), spec)
    return model.replace(**built) if built else model
