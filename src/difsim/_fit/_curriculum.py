"""A curriculum of growing horizons: the first steps of a training fit the data up to an
early time, later ones up to later times, the last stage all of them.

Long horizons make rugged losses (a small change of a network early on moves the whole
trajectory); fitting the start of the data first, then more of it, keeps the iterate in
the valley of the true parameters. Each stage masks the data after its horizon (the shapes,
and so the compiled block of steps, stay the same); the stage of a step is a function of
the step's number alone, so a resumed fit replays the same stages.
"""

import dataclasses
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from difsim._fit._problem import AbstractProblem


class Curriculum(AbstractProblem):
    """`inner` seen in stages: step `i` fits the data up to `horizons[i // per_stage]`
    (the last stage from step `per_stage * (stages - 1)` on, to the end)."""

    inner: AbstractProblem
    horizons: Float[Array, " stages"]
    per_stage: int = eqx.field(static=True)

    @property
    def model(self):
        return self.inner.model

    @property
    def free(self):
        return self.inner.free

    @property
    def transforms(self):
        return self.inner.transforms

    @property
    def data(self):
        return self.inner.data

    @property
    def noise(self):
        return self.inner.noise

    @property
    def extra_names(self):
        return self.inner.extra_names

    def residuals(self, u):
        return self.inner.residuals(u)

    def predict(self, model, coords):
        return self.inner.predict(model, coords)

    def full(self) -> AbstractProblem:
        return self.inner.full()

    def with_adjoint(self, adjoint: str) -> "Curriculum":
        return dataclasses.replace(self, inner=self.inner.with_adjoint(adjoint))

    def stage(self, step):
        return jnp.minimum(step // self.per_stage, self.horizons.shape[0] - 1)

    def final_stage(self, step):
        """Whether step `step` fits all the data (its loss compares with the result's)."""
        return step >= self.per_stage * (self.horizons.shape[0] - 1)

    def at_step(self, step) -> AbstractProblem:
        """The inner problem of step `step` (its minibatch), the data after the stage's
        horizon masked out."""
        problem = self.inner.at_step(step)
        d = problem.data
        seen = d.times <= self.horizons[self.stage(step)]
        mask = d.mask & seen[:, None]  # (n, k), or (E, n, k) for experiments
        return dataclasses.replace(problem, data=dataclasses.replace(d, mask=mask))

    def stages(self) -> np.ndarray:
        """`(stages, 2)`: the first step and the horizon of each stage."""
        h = np.asarray(self.horizons, dtype=float)
        return np.stack([np.arange(len(h)) * float(self.per_stage), h], axis=1)


def with_curriculum(problem: AbstractProblem, curriculum: Any, steps: int, driver, t0) -> Any:
    """`problem` in the stages `curriculum` asks for: a count of stages (even horizons
    from `t0` to the last data time) or the increasing horizons (the last data time
    appended when they end before it); `problem` itself for `None`.

    **Raises:** `ValueError` naming the culprit: a horizon outside the data or not
    increasing, too few steps for the stages, an optimizer that compares steps on one
    loss, a fit without a time horizon."""
    if curriculum is None:
        return problem
    from difsim._fit._drivers import OptaxDriver
    from difsim._fit._experiments import ExperimentsProblem
    from difsim._fit._shooting import MultipleShootingProblem, SingleShooting

    if not isinstance(problem, SingleShooting | MultipleShootingProblem | ExperimentsProblem):
        raise ValueError(
            "curriculum grows the time horizon of a time-series fit; a steady-state or "
            "stochastic-objective fit has none to grow"
        )
    if not isinstance(driver, OptaxDriver):
        raise ValueError(
            f"curriculum needs an optax optimizer (each stage fits other data): {driver.name} "
            "compares its steps on one loss; choose e.g. optimizer='adam'"
        )
    times = np.asarray(problem.data.times, dtype=float)
    horizons = _horizons(curriculum, float(t0), times)
    per_stage = steps // len(horizons)
    if per_stage < 1:
        raise ValueError(
            f"curriculum: {len(horizons)} stages need at least as many steps (steps={steps})"
        )
    return Curriculum(problem, jnp.asarray(horizons, problem.data.times.dtype), per_stage)


def _horizons(curriculum: Any, t0: float, times: np.ndarray) -> list[float]:
    first, last = times.min(), times.max()
    if isinstance(curriculum, bool | str) or not isinstance(curriculum, int | Sequence):
        raise ValueError(
            "curriculum: expected a number of stages (an integer >= 1) or a list of "
            f"increasing horizons, got {curriculum!r}"
        )
    if isinstance(curriculum, int):
        if curriculum < 1:
            raise ValueError(f"curriculum: expected at least 1 stage, got {curriculum}")
        return [t0 + (last - t0) * (i + 1) / curriculum for i in range(curriculum)]
    try:
        horizons = [float(h) for h in curriculum]
    except (TypeError, ValueError):
        raise ValueError(f"curriculum: the horizons must be numbers, got {curriculum!r}") from None
    if not horizons or not np.all(np.isfinite(horizons)):
        raise ValueError(f"curriculum: expected finite horizons, got {curriculum!r}")
    if np.any(np.diff(horizons) <= 0):
        raise ValueError(f"curriculum: the horizons must increase, got {horizons}")
    if horizons[0] < first:
        raise ValueError(
            f"curriculum: horizon {horizons[0]:g} is before the first data time ({first:g}): "
            "its stage would fit no data"
        )
    if horizons[-1] > last:
        raise ValueError(
            f"curriculum: horizon {horizons[-1]:g} is beyond the data (last time {last:g}); "
            "the last stage fits all the data anyway"
        )
    return horizons if horizons[-1] == last else [*horizons, float(last)]


def staged_result(result, stages: np.ndarray):
    """`result` (a `FitResult`) recording the curriculum's `stages`, and saying so."""
    text = ", ".join(f"{h:g} from step {int(s)}" for s, h in stages)
    message = f"{result.message}; curriculum of {len(stages)} stages (horizon {text})"
    return dataclasses.replace(result, curriculum=stages, message=message)
