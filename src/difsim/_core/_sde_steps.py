"""The steps of a stochastic solve: adaptive ones never below what the Brownian tree
resolves, fixed ones on one step lattice for the whole solve.

An adaptive SDE solve integrates against a Brownian tree that is exact down to a sixteenth
of the shortest step its controller may take ([`solve_dtmin`][]); [`FloorStepSize`][] keeps
the controller from stepping below that (a step it would need below ends the solve with
`Status.DT_MIN`), and [`sde_controller`][] also makes it step to every save time.

An SDE solved with a fixed step saves on its steps (`t0 + k·dt0`, checked by
[`check_saves`][]), never between them: interpolating within a step would drop the noise
inside it. A solve with events that change the state is several diffrax solves, one from
each event to the next (`_hybrid`), and diffrax's `ConstantStepSize` spreads each one's
steps evenly over its own span, so after the first event every step (and every save)
would be off the lattice. [`LatticeStepSize`][]
steps to the lattice points of the whole solve instead: the step an event cuts short is
followed by the rest of its lattice step, and saves on the lattice stay simulated values.

`brownian="steps"` draws the increment of lattice step `k` from the key folded with `k`: a
restart part-way through a step would draw that step's increment a second time (no longer
a Brownian path), so such solves are refused ([`check_sde_plan`][]).
"""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from difsim._core._brownian import adaptive_dtmin
from difsim._core._custom_types import RealScalarLike
from difsim._core._solver_settings import SolverSettings
from difsim._core._wrapped_controller import AbstractWrappedController

# Times within this fraction of a step of a lattice point are on it (rounding of t0 + k·dt).
_ON_LATTICE = 1e-9


def check_saves(settings: SolverSettings, times) -> None:
    """With fixed steps, raise unless every save time of `times` (a `SaveSpec`) lies on the
    steps `t0 + k·dt0` (skipped for traced times: a sweep checks once, where they enter)."""
    if settings.fixed_step and (ts := times.host_save_times()) is not None:
        _check_lattice(ts, times.t0, settings.dt0)


def _check_lattice(ts, t0, dt0) -> None:
    """Raise unless every save time is `t0 + k·dt0`: between steps diffrax interpolates
    linearly, which for an SDE drops the noise inside the step (a variance too small)."""
    try:
        dtype = np.result_type(np.asarray(ts).dtype, np.float32)  # the times' precision
        k = (np.asarray(ts, np.float64) - float(t0)) / float(dt0)
    except Exception:  # traced (jit/vmap): the caller's times were checked where they entered
        return
    # To the rounding of the run's precision (0.2 / 0.01 is 20.0000006 in float32).
    tol = max(1e-9, 64 * float(np.finfo(dtype).eps))
    off = np.abs(k - np.rint(k)) > tol * np.maximum(1.0, np.abs(k))
    if np.any(off):
        t = float(np.asarray(ts)[np.argmax(off)])
        raise ValueError(
            f"save time {t:g} is not on the steps t0 + k·dt0 (dt0 = {float(dt0):g}): with fixed "
            "steps an SDE's saved values must be simulated, not interpolated between steps "
            "(that would drop the noise within a step). Choose dt0 dividing the save spacing"
        )


def sde_controller(settings: SolverSettings, ts, final_only: bool, t0, t1):
    """The controller of an SDE solve on `[t0, t1]` saving at `ts`: an adaptive one steps
    to every save time (`ClipStepSizeController(step_ts=ts)`), so saved values are
    simulated, never interpolated within a step (which for an SDE drops the noise inside
    it), and never below the shortest step its Brownian tree resolves ([`solve_dtmin`][];
    [`FloorStepSize`][])."""
    controller = settings.controller
    if not isinstance(controller, dfx.ClipStepSizeController):
        return controller
    floor = FloorStepSize(controller.controller, solve_dtmin(settings, t0, t1))
    controller = eqx.tree_at(lambda c: c.controller, controller, floor)
    if final_only:
        return controller
    return eqx.tree_at(lambda c: c.step_ts, controller, ts, is_leaf=lambda x: x is None)


def solve_dtmin(settings: SolverSettings, t0, t1):
    """The shortest step of an adaptive SDE solve of `settings` on `[t0, t1]` (times in the
    state's precision): the controller's own `dtmin` if it has one, else
    `(t1 - t0) / (8 · max_steps)`, never below what the times' precision resolves (see
    `_brownian.adaptive_dtmin`). `None` for fixed steps."""
    if settings.fixed_step:
        return None
    inner = getattr(settings.controller, "controller", settings.controller)
    own = getattr(inner, "dtmin", None)
    return adaptive_dtmin(t0, t1, settings.max_steps, jnp.result_type(t0), own)


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


class FloorStepSize(AbstractWrappedController):
    """An adaptive `controller` that never steps below `dtmin`, the shortest step the
    Brownian tree of the solve resolves (see `_brownian`).

    - The first step, and the step after an accepted one, is at least `dtmin`: after an
      accepted step the controller never proposes a shorter one, except after a step cut
      short by a save time or `t1` (what `ClipStepSizeController` and diffrax do), whose
      successor is lengthened to `dtmin` and then tested as usual.
    - A rejected step whose retry would be shorter than `dtmin` ends the solve with
      `dt_min_reached` (`Status.DT_MIN`): the error test asks for a step the tree cannot
      resolve, and a shorter one would integrate a path that is not Brownian.

    Unlike `PIDController(dtmin=..., force_dtmin=...)`, which tests the proposal before the
    save times cut it (every step cut short would fail) or accepts any step at `dtmin`
    whatever its error.

    **Fields:** `controller`, the adaptive controller wrapped; `dtmin`, in the solve's
    time units.
    """

    controller: dfx.AbstractAdaptiveStepSizeController
    dtmin: RealScalarLike

    def wrap(self, direction):
        return FloorStepSize(self.controller.wrap(direction), self.dtmin)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        if dt0 is not None:
            dt0 = jnp.maximum(dt0, self.dtmin)
        t_next, state = self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
        return jnp.maximum(t_next, t0 + self.dtmin).astype(jnp.result_type(t_next)), state

    def adapt_step_size(self, t0, t1, y0, y1_candidate, args, y_error, error_order, state):
        keep, next_t0, next_t1, jump, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, state
        )
        short = next_t1 - next_t0 < self.dtmin
        failed = short & ~keep & dfx.is_okay(result)
        result = dfx.RESULTS.where(failed, dfx.RESULTS.dt_min_reached, result)
        longer = (next_t0 + self.dtmin).astype(jnp.result_type(next_t1))
        return keep, next_t0, jnp.where(keep & short, longer, next_t1), jump, state, result
