"""Values of a step computed once and stored: kernel boundaries for XLA:CPU.

XLA fuses elementwise work into the kernels that consume it, and when a cheap elementwise
value feeds several kernels it recomputes it in each of them rather than storing it.
Within an unrolled step every stage feeds every later stage, the new state of each
variable, the carried derivative, the error norm and the finiteness checks, each of them
a kernel of its own (one per output array). Left to itself, XLA recomputes the stage
chain in every one of them: a Tsit5 step of the Lorenz system compiled to 1,067
elementwise operations per lane, against 358 with each value computed once (XLA's
multi-output fusion, which is off on CPU and not per-program), and the step with one
forward-mode tangent to 3,344 against 604.

A conditional is a boundary that fusion does not cross: its operands and its results are
stored. [`computed_once`][] evaluates a function behind one, on whether any lane of the
block is stepping. The step loop only steps while some lane is running, so that is always
true there, but XLA cannot know it, and keeps the conditional; the other branch gives
zeros that are never used. (A conditional whose two branches are both the identity is
folded away by XLA, with no effect, measured.) The values are the same; only where they
are computed changes. Measured on 2 cores, CPU time, `bench_ensemble.py` (docs/benchmarks.md,
"stage boundaries"): the Lorenz engine 1.4x faster, Lorenz-96 4x, the forward-mode gradient
of a Lorenz sweep loss in (σ, β) 2.5x, Robertson with Rodas5P 1.5x.

Only on CPU: other backends fuse differently, and a conditional on a GPU reads its
predicate back to the host.

Why not XLA's own remedy: the backend option `xla_cpu_use_multi_output_fusion` (process-
wide, through `XLA_FLAGS`) also computes shared values once, and took the (σ, β) gradient
from 21 to 12 ms; but the plain Lorenz engine ran 1.15x slower, and at 10⁵ lanes 2.2x
slower, because it merges the writes of each block's results into one fusion that XLA:CPU
does not update in place (a copy of every result array per block: quadratic in the number
of blocks). Measured 2026-11-28, jaxlib 0.10.2.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool


def any_stepping(active: Bool[Array, " lanes"]) -> Bool[Array, ""] | None:
    """The predicate of a step's boundaries, from the mask of the lanes that are stepping:
    `any(active)` on CPU, `None` (no boundaries) on other backends."""
    if jax.default_backend() != "cpu":
        return None
    return jnp.any(active)


def computed_once(live: Bool[Array, ""] | None, fn: Callable, *args: Any, like: Any) -> Any:
    """`fn(*args)`, its arguments and results stored rather than recomputed by each kernel
    that reads them, when `live` is given and true; zeros shaped as `like` (a pytree of
    arrays with the structure, shapes and dtypes of `fn`'s result) when it is false (never,
    inside the step loop); `fn(*args)` as it is when `live` is `None`. (`like` spares a
    second trace of `fn` to learn its result's shape.)"""
    if live is None:
        return fn(*args)

    def zeros(*_):
        return jax.tree.map(lambda x: jnp.zeros(jnp.shape(x), jnp.result_type(x)), like)

    return lax.cond(live, fn, zeros, *args)


def stored(live: Bool[Array, ""] | None, tree: Any) -> Any:
    """`tree`, stored once (see [`computed_once`][])."""
    return computed_once(live, lambda x: x, tree, like=tree)
