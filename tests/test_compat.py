"""difsim._compat, the one module that uses a dependency's private API: each use must still
exist and behave as difsim relies on, so that a release removing it fails here, by name.

The references are the dependencies' public APIs: what zarr's synchronous API reads back.
"""

import asyncio
import importlib

import numpy as np
import zarr

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
