"""`difsim._ensemble._linear_call`: the batching rule for JAX's `linear_call`, the one use
of JAX internals, checked on a small linear map against its explicit matrix (the engine's
own `vmap(grad)` and `jacfwd` through it are in tests/test_ensemble_discrete.py)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import linear_call

from difsim._ensemble import _linear_call

A = jnp.array([[1.0, 2.0, 0.5], [-3.0, 4.0, 1.5]])


def _apply(scale, x):
    """`scale * A @ x` as a `linear_call` in `x` whose transpose is given by hand."""
    push = lambda res, t: res * (A @ t)  # noqa: E731
    pull = lambda res, ct: res * (A.T @ ct)  # noqa: E731
    _linear_call.ensure_batching()
    return linear_call(push, pull, scale, x)


def test_the_internals_it_relies_on_are_where_it_expects():
    # Fails, naming the cause, if a JAX upgrade moved one of the three private names.
    assert _linear_call._internals() is not None, (
        "jax._src: linear_call_p, batching.fancy_primitive_batchers or core.jaxpr_as_fun moved"
    )
    assert _linear_call.ensure_batching()


def test_vmap_of_the_map_and_of_its_transpose_match_the_matrix():
    xs = jnp.arange(12.0).reshape(4, 3) / 7
    scales = jnp.array([1.0, -2.0, 0.5, 3.0])
    # Batched inputs and batched residuals; then an unbatched residual.
    out = jax.vmap(_apply)(scales, xs)
    np.testing.assert_allclose(out, scales[:, None] * (xs @ A.T), rtol=1e-14)
    out = jax.vmap(_apply, in_axes=(None, 0))(2.0, xs)
    np.testing.assert_allclose(out, 2.0 * xs @ A.T, rtol=1e-14)
    # The transpose under vmap: the gradient of a weighted sum, per batch element.
    w = jnp.array([0.3, -1.1])
    grads = jax.vmap(jax.grad(lambda s, x: w @ _apply(s, x), argnums=1))(scales, xs)
    np.testing.assert_allclose(grads, scales[:, None] * (A.T @ w)[None, :], rtol=1e-14)
