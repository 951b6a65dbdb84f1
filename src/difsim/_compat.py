"""The one place difsim uses a dependency's private API, each use with its reason.

tests/test_compat.py checks that every name used here still exists, so that a release of
the dependency that removes one fails there, by name, rather than somewhere in a sweep.

- [`zarr_sync`][]: zarr's event loop, for sweeps with an output.
- [`ensure_linear_call_batching`][]: a batching rule for JAX's `linear_call`, added when a
  reverse-mode path of the ensemble engine is first traced (never on import).
- [`jax_backends_started`][]: whether JAX has started its backends, only to warn that
  `tune_xla` came too late.
- [`equinox_checks_as_nan`][]: equinox's runtime checks compiled as NaN, for `difsim
  run`'s compilation cache (the command's own process).
"""

import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
from jax.custom_derivatives import linear_call

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


# ----------------------------------------------------------------- JAX's `linear_call`
# The reverse-mode paths of the ensemble engine (`_ensemble/_solve.py`, `_reverse_jvp`)
# return their tangent map as a `jax.custom_derivatives.linear_call`: pushed forward by
# `jax.jvp`, transposed by `jax.grad` into the discrete adjoint or the checkpointed loops.
# That is the one public way to give a tangent map its own transpose (a `custom_vjp`
# inside a JVP rule has no transpose: "Transpose rule ... for 'custom_vjp_call' not
# implemented", jax 0.10; `custom_transpose` is not public). But `linear_call` has no
# batching rule (jax 0.10), so `jax.vmap(jax.grad(...))` and `jax.jacfwd` through those
# paths would fail. Should one of the three private names move, `jax.grad` and `jax.jvp`
# still pass, only their vmap fails with JAX's own error.


def _internals():
    """JAX's `linear_call` primitive, its table of batching rules and `jaxpr_as_fun`, or
    `None` where this version of JAX lacks one of them."""
    try:
        from jax._src import core
        from jax._src.custom_derivatives import linear_call_p
        from jax._src.interpreters import batching
    except ImportError:
        return None
    table = getattr(batching, "fancy_primitive_batchers", None)
    as_fun = getattr(core, "jaxpr_as_fun", None)
    if not isinstance(table, dict) or as_fun is None:
        return None
    return linear_call_p, table, as_fun


def ensure_linear_call_batching() -> bool:
    """Give `linear_call` a batching rule if JAX has none; returns whether a rule (JAX's
    or this one) is in place."""
    found = _internals()
    if found is None:
        return False
    primitive, table, as_fun = found
    if primitive not in table:
        table[primitive] = lambda *a, **k: _batch_linear_call(primitive, as_fun, *a, **k)
    return True


def _batch_linear_call(primitive, as_fun, axis_data, args, dims, *, callee, transpose_thunk,
                       **params):  # fmt: skip
    """The batched call is another `linear_call`, of the map and of its transpose each
    vmapped. Residuals keep their batching (a residual that is not batched, such as the
    checkpoints of a solve, is not copied per batch element); linear inputs and outputs
    are all batched."""
    if all(d is None for d in dims):
        out = primitive.bind(*args, callee=callee, transpose_thunk=transpose_thunk, **params)
        return out, [None] * len(out)
    size = axis_data.size
    n_fixed = params["num_callee_consts"] + params["num_res"]
    fixed, fixed_axes = args[:n_fixed], list(dims[:n_fixed])
    lin = [
        jnp.broadcast_to(a, (size, *jnp.shape(a))) if d is None else jnp.moveaxis(a, d, 0)
        for a, d in zip(args[n_fixed:], dims[n_fixed:])
    ]
    n_consts = params["num_callee_consts"]

    def forward(fixed, x):
        run = lambda fixed, x: as_fun(callee)(*fixed, *x)  # noqa: E731
        return jax.vmap(run, in_axes=(fixed_axes, 0))(fixed, x)

    def transpose(fixed, ct):
        jaxpr, t_consts = transpose_thunk()
        run = lambda res, ct: as_fun(jaxpr)(*t_consts, *res, *ct)  # noqa: E731
        return jax.vmap(run, in_axes=(fixed_axes[n_consts:], 0))(fixed[n_consts:], list(ct))

    out = linear_call(forward, transpose, list(fixed), lin)
    return out, [0] * len(out)


# ------------------------------------------------------------------------- the rest
def jax_backends_started() -> bool:
    """Whether JAX has started its backends. JAX has no public question for it (asking
    `jax.devices()` would start them), so this reads one private function, only to warn:
    should it move, `tune_xla` reports "set" where it was too late."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started is not None and started())


def equinox_checks_as_nan() -> bool:
    """Compile equinox's runtime checks as NaN-on-failure (no host callback, so JAX's
    persistent cache can store the program) if they are compiled to raise; returns whether
    the mode was changed. equinox reads `EQX_ON_ERROR` once, at its import, into this
    module-level setting and looks it up whenever a check is traced: setting it before any
    tracing is the same as having set `EQX_ON_ERROR=nan` before the import, which `difsim
    run` cannot do (equinox is imported before it parses its arguments). Called only by
    the command, for its own process (tests/test_compile_cache.py checks that the compiled
    solve then holds no callback)."""
    from equinox import _errors

    if getattr(_errors, "EQX_ON_ERROR", None) != "raise":
        return False
    _errors.EQX_ON_ERROR = "nan"
    return True
