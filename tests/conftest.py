"""Strict settings for the whole suite: float64, no silent rank promotion, 8 CPU devices."""

import os

# Must be set before jax initialises its backends: sharding tests need several devices.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("MPLBACKEND", "Agg")
# Test files run in parallel processes (pytest-xdist): on a GPU, let them share its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# `difsim run` turns JAX's persistent compilation cache on (in ~/.cache) for its process and
# compiles equinox's checks as NaN: tests that call the CLI in-process or as a subprocess
# must do neither (tests/test_compile_cache.py turns it on in its own subprocesses).
os.environ.setdefault("DIFSIM_COMPILE_CACHE", "off")
# Outputs record when they were made (CF `history`). A fixed moment (the reproducible-builds
# convention, see difsim._io._cf) lets tests compare files of runs made at different times
# byte for byte; tests of the clock itself remove it.
os.environ.setdefault("SOURCE_DATE_EPOCH", "1767225600")  # 2026-01-01T00:00:00Z

import jax  # noqa: E402
import pytest  # noqa: E402

import difsim  # noqa: E402

# The suite runs as `difsim run` does, with XLA:CPU's loop option (`difsim.tune_xla`): the
# engine's loops compile to single kernels, which is also what keeps the suite's CPU time
# down. `import difsim` alone leaves XLA_FLAGS alone (tests/test_xla.py).
difsim.tune_xla()

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")


@pytest.fixture
def getkey():
    """A function returning fresh PRNG keys, deterministic per test."""
    key = jax.random.key(5678)

    def _getkey():
        nonlocal key
        key, sub = jax.random.split(key)
        return sub

    return _getkey


@pytest.fixture(autouse=True, scope="module")
def _clear_jax_caches():
    # Compiled executables pile up over a long single-process run until XLA hits the
    # memory-map limit (STYLE.md item 12): drop them after every test module.
    yield
    jax.clear_caches()
