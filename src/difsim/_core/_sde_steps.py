"""Fixed steps of a stochastic solve that events restart: one step lattice for the whole solve.

An SDE solved with a fixed step saves on its steps (`t0 + k·dt0`), never between them:
interpolating within a step would drop the noise inside it. A solve with events that change
the state is several diffrax solves, one from each event to the next (`_hybrid`), and
diffrax's `ConstantStepSize` spreads each one's steps evenly over its own span, so after
the first event every step (and every save) would be off the lattice. [`LatticeStepSize`][]
steps to the lattice points of the whole solve instead: the step an event cuts short is
followed by the rest of its lattice step, and saves on the lattice stay simulated values.

`brownian="steps"` draws the increment of lattice step `k` from the key folded with `k`: a
restart part-way through a step would draw that step's increment a second time (no longer
a Brownian path), so such solves are refused ([`check_sde_plan`][]).
"""

import diffrax as dfx
import jax.numpy as jnp
import numpy as np

from difsim._core._custom_types import RealScalarLike

# Times within this fraction of a step of a lattice point are on it (rounding of t0 + k·dt).
_ON_LATTICE = 1e-9


class LatticeStepSize(dfx.AbstractStepSizeController):
    """Fixed steps of `dt0` that end on the lattice `origin + k·dt0`, from any start time
    (diffrax clips the last step to the end of the solve).

    **Fields:** `origin`, the lattice's start (the whole solve's `t0`).
    """

    origin: RealScalarLike

    def wrap(self, direction):
        return self

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        if dt0 is None:
            raise ValueError("LatticeStepSize needs the step dt0")
        return self._next(t0, dt0), dt0

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, dt):
        return True, t1, self._next(t1, dt), False, dt, dfx.RESULTS.successful

    def _next(self, t, dt):
        """The first lattice point after `t` (a `t` within rounding of one counts as on it)."""
        k = (t - self.origin) / dt
        n = jnp.floor(k + _ON_LATTICE * jnp.maximum(1.0, jnp.abs(k))) + 1
        return (self.origin + n * dt).astype(jnp.result_type(t))


def restarts(plan) -> bool:
    """Whether the events of `plan` (an `EventPlan`, or `None`) restart the solve: an
    event that is not terminal (a time event, an affect that goes on)."""
    return plan is not None and not all(e.terminal is True for e in plan.events)


def check_sde_plan(key, settings, plan, times, name: str) -> None:
    """Raise for what a stochastic solve (one with a `key`) of model `name` cannot do:
    dense output (`plan`: its `EventPlan`), and with `brownian="steps"` (in `settings`)
    anything that would draw an increment twice: events that restart the solve, or an end
    off the lattice `t0 + k·dt0` (`times`: the `SaveSpec`; diffrax would spread the steps
    evenly, off the lattice)."""
    if key is None:
        return
    if plan is not None and plan.dense:
        raise ValueError(
            f"{name} is stochastic: save='dense' would keep the solver's interpolant between "
            "steps, which is not a sample of the process (it drops the noise within each "
            "step); give save times instead (a number of times or a list of them, config key "
            "[time] save), which the solve steps to"
        )
    if settings.brownian != "steps":
        return
    if restarts(plan):
        which = ", ".join(repr(e.name) for e in plan.events if e.terminal is not True)
        raise ValueError(
            f"{name} has events that restart the solve ({which}); brownian='steps' draws one "
            "increment per step of the lattice t0 + k·dt0, and a restart between lattice "
            "points would draw one twice: use brownian='tree' (the default)"
        )
    try:
        span = float(np.asarray(times.t1)) - float(np.asarray(times.t0))
        dt = float(np.asarray(settings.dt0))
    except Exception:  # traced (jit/vmap): checked where the times entered
        return
    k = span / dt
    if abs(k - round(k)) > _ON_LATTICE * max(1.0, abs(k)):
        raise ValueError(
            f"brownian='steps' needs t1 - t0 = {span:g} to be a whole number of steps dt0 = "
            f"{dt:g}: choose a dt0 dividing it, or brownian='tree'"
        )
