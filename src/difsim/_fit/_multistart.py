"""The starts of a multistart fit: the guess and perturbations of it."""

import jax
import jax.numpy as jnp


def multistart_spec(multistart) -> tuple[int, jax.Array, float]:
    """`(n, key, scale)` from `fit`'s `multistart` argument (`n`, `(n, key)` or
    `(n, key, scale)`; default key 0, scale 0.3), checked."""
    key, scale = jax.random.key(0), 0.3
    if isinstance(multistart, int) and not isinstance(multistart, bool):
        n = multistart
    elif isinstance(multistart, tuple) and len(multistart) in (2, 3):
        n, key = multistart[0], multistart[1]
        if len(multistart) == 3:
            scale = float(multistart[2])
    else:
        raise TypeError(f"multistart must be n, (n, key) or (n, key, scale), got {multistart!r}")
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"multistart needs a positive number of starts, got {n!r}")
    return n, key, scale


def perturbed_starts(u0, n: int, key, scale: float) -> jax.Array:
    """The guess and `n - 1` perturbations of it, `(n, p)`: normal with standard deviation
    `scale` in unconstrained coordinates, relative for values of magnitude above 1."""
    noise = jax.random.normal(key, (n - 1, u0.shape[0]), u0.dtype)
    spread = scale * jnp.maximum(jnp.abs(u0), 1.0)
    return jnp.concatenate([u0[None], u0[None] + spread[None] * noise])
