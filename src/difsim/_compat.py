"""The one place difsim uses a dependency's private API, each use with its reason.

tests/test_compat.py checks that every name used here still exists, so that a release of
the dependency that removes one fails there, by name, rather than somewhere in a sweep.
"""

from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def zarr_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` (of zarr's asynchronous API) on zarr's own event loop, from this
    thread, and return its result.

    Why private: zarr 3 has no public way to run its asynchronous calls from synchronous
    code (a public `zarr.run` is proposed in zarr-python PR #3997). The public synchronous
    API makes one round trip per array, about twice the CPU time of a sweep chunk's writes;
    a loop of difsim's own would not do: zarr's stores on object storage (fsspec's
    asynchronous filesystems) are bound to the loop they were first used on, zarr's.
    """
    from zarr.core.sync import sync

    return sync(coroutine)
