"""The step-size controller of [`BDF`][difsim.solvers.BDF]: the solver chooses its step and
order from the error estimates of three orders, which a PID controller (one order, one
estimate) cannot; this controller accepts or rejects by the norm the step reports and
applies the factor it proposes."""

from collections.abc import Callable

import diffrax as dfx
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import PyTree

from difsim.solvers._bdf import NEWTON_FAIL_FACTOR, BDFError


class BDFController(dfx.AbstractAdaptiveStepSizeController):
    """Adaptive steps for [`BDF`][difsim.solvers.BDF], which reports a
    [`BDFError`][difsim.solvers.BDFError] in place of an error vector.

    A step is kept when its error norm is at most 1; the next step is the last times the
    factor the solver proposes (it keeps the size for `k + 1` steps after a change, then
    picks the order and size that promise the longest step), clipped to `dtmax`. The first
    step is diffrax's `PIDController` heuristic for an order-1 method.

    **Fields:**

    - `rtol`, `atol`, `norm`: the error test's weights `atol + rtol |y|` and its norm (the
      solver reads them through its `root_finder`; diffrax fills them in).
    - `dtmin`: a step the solver would shrink below this ends the solve with
      `dt_min_reached`; `dtmax`: the largest step taken.
    """

    rtol: PyTree
    atol: PyTree
    norm: Callable[[PyTree], jnp.ndarray] = optx.rms_norm
    dtmin: float | None = None
    dtmax: float | None = None

    def wrap(self, direction):
        return self

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        pid = dfx.PIDController(
            rtol=self.rtol, atol=self.atol, norm=self.norm, dtmin=self.dtmin, dtmax=self.dtmax
        )
        t_next, _ = pid.init(terms, t0, t1, y0, dt0, args, func, 2)
        return t_next, None

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        if not isinstance(y_error, BDFError):
            raise TypeError(
                "BDFController steps the BDF solver only (its error report is a BDFError); "
                f"got an error estimate of type {type(y_error).__name__}"
            )
        keep = y_error.norm <= 1
        # A guard may have set the report to inf (a non-finite candidate): shrink then too.
        factor = y_error.factor
        shrink = jnp.where(jnp.isfinite(factor) & (factor < 1), factor, NEWTON_FAIL_FACTOR)
        factor = jnp.where(keep & jnp.isfinite(factor), factor, shrink)
        dt = (t1 - t0) * factor
        result = dfx.RESULTS.successful
        if self.dtmax is not None:
            dt = jnp.minimum(dt, self.dtmax)
        if self.dtmin is not None:
            result = dfx.RESULTS.where(dt < self.dtmin, dfx.RESULTS.dt_min_reached, result)
        next_t0 = jnp.where(keep, t1, t0)
        return keep, next_t0, next_t0 + dt, False, state, result
