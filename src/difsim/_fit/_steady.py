"""Fitting to equilibria: data point `i` is the steady state at control value `i`."""

import equinox as eqx
import jax
from jaxtyping import Array, Float

from difsim._core import Model, steady_state
from difsim._fit._data import FitData, observe_states, residuals
from difsim._fit._problem import AbstractProblem
from difsim._fit._transforms import AbstractTransform


class SteadyStateProblem(AbstractProblem):
    """Fit equilibria: data point `i` is the steady state reached when the model's
    parameter `control` equals `data.times[i]` (the data coordinate holds those values)."""

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple[AbstractTransform, ...]
    data: FitData
    noise: str = eqx.field(static=True)
    control: str = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    atol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)

    def _states(self, model: Model, values: Float[Array, " c"]) -> dict[str, Array]:
        def one(c):
            s = steady_state(
                model.replace(**{self.control: c}),
                rtol=self.rtol,
                atol=self.atol,
                max_steps=self.max_steps,
                throw=False,
            )
            return s.values

        return jax.vmap(one)(values)

    def residuals(self, u):
        model = self.model_from(u)
        return residuals(self.predict(model, self.data.times), self.data, self.noise)

    def predict(self, model, coords):
        ys = self._states(model, coords)
        return observe_states(ys, model.initial_state().info, self.data.targets)
