"""The starts of a multistart fit: the guess and perturbations of it."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import check_seed


def multistart_spec(multistart) -> tuple[int, jax.Array, float]:
    """`(n, key, scale)` from `fit`'s `multistart` argument (`n`, `(n, key)` or
    `(n, key, scale)`; `key` a `jax.random.key` or an integer seed, default 0; scale 0.3),
    checked.

    **Raises:** `TypeError` for another form or key, `ValueError` for a count below 1, a
    seed outside `[0, 2**63)` or a scale that is not finite and positive.
    """
    key, scale = 0, 0.3
    if isinstance(multistart, int) and not isinstance(multistart, bool):
        n = multistart
    elif isinstance(multistart, tuple) and len(multistart) in (2, 3):
        n, key = multistart[0], multistart[1]
        if len(multistart) == 3:
            scale = multistart[2]
    else:
        raise TypeError(f"multistart must be n, (n, key) or (n, key, scale), got {multistart!r}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"multistart needs a positive number of starts, got {n!r}")
    if isinstance(scale, bool) or np.ndim(scale) or np.asarray(scale).dtype.kind not in "iuf":
        raise TypeError(f"multistart's scale must be a number, got {scale!r}")
    if not (math.isfinite(float(scale)) and float(scale) > 0):
        raise ValueError(f"multistart's scale must be finite and > 0, got {scale!r}")
    return n, _key(key), float(scale)


def _key(key) -> jax.Array:
    """A PRNG key from `multistart`'s key: a key as is (typed, or a legacy `PRNGKey`'s
    uint32 data), an integer seed checked."""
    if isinstance(key, jax.Array) and (
        jnp.issubdtype(key.dtype, jax.dtypes.prng_key) or key.dtype == jnp.uint32
    ):
        return key
    if isinstance(key, int | np.integer):
        return jax.random.key(check_seed(key, "multistart's seed"))
    raise TypeError(
        f"multistart's key must be a jax.random.key(...) or an integer seed, got {key!r}"
    )


def perturbed_starts(u0, n: int, key, scale: float) -> jax.Array:
    """The guess and `n - 1` perturbations of it, `(n, p)`: normal with standard deviation
    `scale` in unconstrained coordinates, relative for values of magnitude above 1."""
    noise = jax.random.normal(key, (n - 1, u0.shape[0]), u0.dtype)
    spread = scale * jnp.maximum(jnp.abs(u0), 1.0)
    return jnp.concatenate([u0[None], u0[None] + spread[None] * noise])
