"""difsim._compat, the one module that uses a dependency's private API: each use must still
exist and behave as difsim relies on, so that a release removing it fails here, by name.

The references are the dependencies' public APIs: what zarr's synchronous API reads back;
for the batching rule of JAX's `linear_call`, the explicit matrix of a small linear map (the
engine's own `vmap(grad)` and `jacfwd` through it are in tests/test_ensemble_discrete.py).
"""

import asyncio
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import zarr
from jax.custom_derivatives import linear_call

from difsim import _compat
from difsim._compat import zarr_sync


def test_zarrs_private_sync_still_exists():
    module = importlib.import_module("zarr.core.sync")
    assert callable(getattr(module, "sync", None)), (
        f"zarr {zarr.__version__} no longer has zarr.core.sync.sync: difsim._compat.zarr_sync "
        "needs another way to run zarr's coroutines (a public zarr.run?)"
    )


def test_zarr_sync_runs_concurrent_writes_on_zarrs_loop():
    group = zarr.open_group(zarr.storage.MemoryStore(), mode="w", zarr_format=3)
    arrays = [group.create_array(f"a{i}", shape=(4,), chunks=(2,), dtype="f8") for i in range(3)]

    async def write():
        # Each write awaits zarr's own loop; gathered, they run at once.
        await asyncio.gather(
            *(a.async_array.setitem(slice(None), np.arange(4.0) + i) for i, a in enumerate(arrays))
        )
        return "done"

    assert zarr_sync(write()) == "done"
    for i, a in enumerate(arrays):  # read back through zarr's public synchronous API
        np.testing.assert_array_equal(a[:], np.arange(4.0) + i)


A = jnp.array([[1.0, 2.0, 0.5], [-3.0, 4.0, 1.5]])


def _apply(scale, x):
    """`scale * A @ x` as a `linear_call` in `x` whose transpose is given by hand."""
    push = lambda res, t: res * (A @ t)  # noqa: E731
    pull = lambda res, ct: res * (A.T @ ct)  # noqa: E731
    _compat.ensure_linear_call_batching()
    return linear_call(push, pull, scale, x)


def test_the_internals_it_relies_on_are_where_it_expects():
    # Fails, naming the cause, if a JAX upgrade moved one of the three private names.
    assert _compat._internals() is not None, (
        "jax._src: linear_call_p, batching.fancy_primitive_batchers or core.jaxpr_as_fun moved"
    )
    assert _compat.ensure_linear_call_batching()


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


def test_the_jax_and_equinox_settings_it_reads_still_exist():
    import equinox

    bridge = importlib.import_module("jax._src.xla_bridge")
    assert callable(getattr(bridge, "backends_are_initialized", None)), (
        f"jax {jax.__version__}: jax._src.xla_bridge.backends_are_initialized moved: "
        "difsim._compat.jax_backends_started cannot tell that tune_xla came too late"
    )
    assert bridge.backends_are_initialized() is _compat.jax_backends_started()
    errors = importlib.import_module("equinox._errors")
    assert getattr(errors, "EQX_ON_ERROR", None) in ("raise", "nan", "breakpoint"), (
        f"equinox {equinox.__version__}: equinox._errors.EQX_ON_ERROR moved: "
        "difsim._compat.equinox_checks_as_nan cannot make difsim run's programs cacheable"
    )
