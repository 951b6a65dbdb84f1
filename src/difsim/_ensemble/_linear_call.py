"""vmap of JAX's `linear_call`, the one place difsim reaches into JAX's internals.

The reverse-mode paths of the engine (`_solve.py`, `_reverse_jvp`) return their tangent
map as a `jax.custom_derivatives.linear_call`: pushed forward by `jax.jvp`, transposed by
`jax.grad` into the discrete adjoint or the checkpointed loops. That is the one public
way to give a tangent map its own transpose — a `custom_vjp` inside a JVP rule has no
transpose (`NotImplementedError: Transpose rule ... for 'custom_vjp_call'`, jax 0.10), and
`custom_transpose` is not public. But `linear_call` has no batching rule (jax 0.10), so
`jax.vmap(jax.grad(...))` and `jax.jacfwd` through those paths would fail.

[`ensure_batching`][] supplies one, registered into JAX's table of batching rules only
when JAX has none of its own, and only when a reverse-mode path is first traced: never on
`import difsim` (tests/test_import_side_effects.py). It uses three private names of JAX
(`jax._src.core.jaxpr_as_fun`, `jax._src.custom_derivatives.linear_call_p`,
`jax._src.interpreters.batching.fancy_primitive_batchers`); should one move, the engine
still differentiates with `jax.grad` and `jax.jvp`, only their vmap fails with JAX's own
error, and tests/test_ensemble_linear_call.py fails naming what moved.
"""

import jax
import jax.numpy as jnp
from jax.custom_derivatives import linear_call


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


def ensure_batching() -> bool:
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
