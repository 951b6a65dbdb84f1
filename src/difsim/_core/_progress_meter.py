"""Progress of a compiled solve in model time: diffrax's progress-meter protocol, reporting
to difsim's progress display ([`difsim._io.progress`][]) rather than a bar of its own.

The meter reaches the host through a callback every `refresh_steps` steps, chosen from the
state size ([`refresh_steps`][]) so that ~20 ms of stepping separate two callbacks. Measured
(experiments/benchmarks/bench_progress.py, one CPU core): a callback costs 0.1-0.4 ms, and
a solve with the meter costs +0.6 % (Gray–Scott 128 × 128) to +1.8 % (64 × 64) over one
without; for a 3-variable ODE the meter's per-step counter alone costs ~15 %, which is why
difsim turns it on by default only for PDE solves. A program that holds a callback cannot
be stored in JAX's persistent compilation cache.

Under `vmap` (a sweep's chunk) the meter follows the slowest lane, as diffrax's does.
"""

import math

import diffrax as dfx
import jax

from difsim._io import forward_fractions

# Steps per callback ≈ _BUDGET / (cost of one step): a step costs ~1.5 µs + ~27 ns per
# state element (tsit5 on one CPU core: Lorenz and a 64 × 64 Gray–Scott), a callback
# ~0.2 ms; _BUDGET = 100 callbacks' worth keeps the meter near 1 % of the solve.
_BUDGET = 0.02  # seconds of stepping between two callbacks
_STEP_FIXED, _STEP_PER_ELEMENT = 1.5e-6, 27e-9


def refresh_steps(n_state: int) -> int:
    """Steps between two progress callbacks for a state of `n_state` elements."""
    return max(1, math.ceil(_BUDGET / (_STEP_FIXED + _STEP_PER_ELEMENT * max(n_state, 1))))


class ModelTimeMeter(dfx.TqdmProgressMeter):
    """A diffrax progress meter whose host side is difsim's progress display.

    **Fields:** `what` (the task's name, e.g. `"simulate(GrayScott)"`), `t0`, `t1` and
    `units` (the model's time span and time units, shown as `t = 412.5 of 2000 s`), and
    diffrax's `refresh_steps`. While a task is receiving fractions (a sweep's chunk), they
    move that task instead of a display of the meter's own.
    """

    what: str = "simulate"
    t0: float = 0.0
    t1: float = 1.0
    units: str | None = None

    # diffrax's TqdmProgressMeter keeps its host-side handles in its own registry (with
    # `vmap` and ordering taken care of) and calls these three on the host.
    def _init_bar(self):  # type: ignore[override]
        return forward_fractions(self.what, self.t0, self.t1, self.units)

    def _step_bar(self, sink, progress) -> None:  # type: ignore[override]
        sink.fraction(float(progress))

    def _close_bar(self, sink) -> None:  # type: ignore[override]
        sink.close()


def reports_model_time(model) -> bool:
    """Whether difsim's runs report progress from inside the solves of `model` by default:
    PDE models (a grid), whose steps are costly and whose runs are long, so the callback
    costs little; ODE solves report only between compiled calls (sweep chunks, fit blocks)
    and stay in JAX's persistent compilation cache."""
    return bool(model.grids())


def solve_meter(model, times, layout) -> ModelTimeMeter:
    """The meter of `simulate(model, times)`: model time from `times.t0` to `times.t1` in the
    model's `time_units`, refreshed by the size of the state (`layout`)."""
    n_state = sum(math.prod(shape) for shape in layout.shapes)
    try:
        t0, t1 = float(times.t0), float(times.t1)
    except jax.errors.ConcretizationTypeError:
        # Times traced (a sweep's chunk): the fractions go to the sweep's display, which
        # counts trajectories, not model time.
        t0, t1 = 0.0, 1.0
    return ModelTimeMeter(
        refresh_steps=refresh_steps(n_state),
        what=f"simulate({type(model).__name__})",
        t0=t0,
        t1=t1,
        units=type(model).time_units,
    )
