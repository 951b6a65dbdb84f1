"""Stop a solve whose right-hand side turns NaN or infinite, at the step where it happens.

Left alone, an adaptive controller rejects a non-finite step, shrinks the step and tries
again: when the vector field itself is non-finite there (a `log` of a variable that reached
zero, a blow-up in finite time) no step size helps, and the solve creeps on with steps
below the resolution of `t` until it has spent `max_steps`. [`NonfiniteGuard`][] wraps the
controller and ends such a solve with diffrax's `RESULTS.nonfinite` (`Status.NONFINITE`).
It also keeps a failed implicit step from poisoning the step size with NaN.
"""

import diffrax as dfx
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, Bool, Int

from difsim._core._wrapped_controller import AbstractWrappedController

# Consecutive non-finite candidates, with no progress in `t` between them, after which the
# field is taken to be non-finite where the solve stands. Each rejection shrinks the step
# (by 5x for diffrax's PID controller): 40 of them shrink it by ~1e28, which no finite field
# needs to become representable.
MAX_NONFINITE_TRIES = 40
# How much a step shrinks when the wrapped controller proposes a non-finite one: the
# factor diffrax's PID controller applies to a rejected step by default (`factormin`).
SHRINK = 0.2
# A non-finite candidate from a step this many ulps of `t` long (or a NaN step) ends the
# solve at once: a step cannot shrink much below the resolution of `t`.
ULPS = 8


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


class NonfiniteGuard(AbstractWrappedController):
    """An adaptive step-size controller that ends the solve with `RESULTS.nonfinite` when
    the solution can no longer be continued with finite values.

    Decisions are the wrapped `controller`'s, untouched, for every step with a finite
    candidate and a finite proposed next step (so a healthy solve is bitwise the same); a
    non-finite proposal becomes the last step times `SHRINK`. A non-finite candidate is never
    accepted; it ends the solve when the wrapped controller would have kept it, when the
    step was already negligible (at most `ULPS` ulps of `t`, or NaN), or when
    `MAX_NONFINITE_TRIES` candidates in a row were non-finite without `t` advancing.
    Works per trajectory under `vmap`.

    **Fields:** `controller`, the wrapped adaptive controller; its tolerances and norm are
    the guard's (implicit solvers read them for their root finds).
    """

    controller: dfx.AbstractAdaptiveStepSizeController

    def wrap(self, direction):
        return NonfiniteGuard(self.controller.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t_next, state = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return t_next, (state, jnp.array(0, jnp.int32))

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        inner_state, tries = state
        keep, next_t0, next_t1, jump, inner_state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, inner_state
        )
        # A failed implicit step can leave the wrapped controller proposing a NaN step
        # (seen with diffrax's PID and Kvaerno5's chord iterations on stiff van der Pol):
        # shrink the step instead, as for any rejection, so NaN never poisons later steps.
        prev_dt = t1 - t0
        poisoned = ~jnp.isfinite(next_t1) & jnp.isfinite(prev_dt)
        next_t1 = jnp.where(poisoned, next_t0 + SHRINK * prev_dt, next_t1)
        finite = _all_finite(y1_candidate)
        tries = _count_tries(finite, keep & (next_t0 > t0), tries)
        dt = jnp.abs(t1 - t0)
        ulp = jnp.finfo(jnp.result_type(dt)).eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        negligible = ~(dt > ULPS * ulp)  # NaN steps too
        # diffrax's PID controller ignores a NaN candidate when scaling the error, so it may
        # keep a non-finite step whose error estimate is finite: that ends the solve too.
        stop = ~finite & (keep | negligible | (tries >= MAX_NONFINITE_TRIES))
        keep = keep & finite
        result = dfx.RESULTS.where(stop, dfx.RESULTS.nonfinite, result)
        return keep, next_t0, next_t1, jump, (inner_state, tries), result


def _count_tries(finite, advanced, tries) -> Int[Array, ""]:
    """Non-finite candidates since `t` last advanced."""
    return jnp.where(finite, jnp.where(advanced, 0, tries), tries + 1).astype(tries.dtype)


def guard_nonfinite(controller: dfx.AbstractStepSizeController) -> dfx.AbstractStepSizeController:
    """`controller` wrapped in a [`NonfiniteGuard`][] when it adapts the step (a fixed step
    runs to its end, and a non-finite result is reported from the saved values)."""
    if isinstance(controller, dfx.AbstractAdaptiveStepSizeController) and not isinstance(
        controller, NonfiniteGuard
    ):
        return NonfiniteGuard(controller)
    return controller
