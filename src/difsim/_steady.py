r"""Steady states (equilibria) by Newton's method, differentiable by implicit differentiation.

`steady_state` solves $f(x^*, \theta) = 0$ for the model's right-hand side $f$ with
optimistix. Its gradient with respect to the parameters $\theta$ comes from the implicit
function theorem, $\partial x^*/\partial\theta = -(\partial f/\partial x)^{-1}\,
\partial f/\partial\theta$ (optimistix's `ImplicitAdjoint`): one linear solve at the root,
no backpropagation through the Newton iterations.
"""

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float

from difsim._custom_types import RealScalarLike
from difsim._fit_data import FitData, observe_states, residuals
from difsim._model import Model
from difsim._shooting import AbstractProblem
from difsim._state import State
from difsim._transforms import AbstractTransform
from difsim._vector_field import Layout, VectorField, check_rhs


def steady_state(
    model: Model,
    guess: State | Mapping[str, Any] | None = None,
    *,
    t: RealScalarLike = 0.0,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 256,
    throw: bool = True,
) -> State:
    r"""The steady state of `model` nearest (in Newton's sense) to `guess`: the state $x^*$
    with $\mathrm{rhs}(t, x^*) = 0$.

    Works under `jax.jit`, `jax.vmap` (e.g. over a control parameter) and `jax.grad`, which
    differentiates by the implicit function theorem rather than through the iterations.

    **Arguments:**

    - `model`: a [`Model`][]; `rhs` is evaluated at time `t` (irrelevant for autonomous
      models).
    - `guess`: where Newton's method starts: a [`State`][] or a mapping of some variables
      (the rest from the model's initial state). Default: the model's initial state.
    - `rtol`, `atol`: tolerances on the state for the Newton iteration.
    - `max_steps`: most Newton iterations.
    - `throw`: if `True`, a failure to converge raises an error; if `False` the returned
      values are NaN instead (what a fit uses: the step is then rejected).

    **Returns:** a [`State`][] with the same variables (and metadata) as the model's.
    """
    if not isinstance(model, Model):
        raise TypeError(f"steady_state expects a difsim.Model instance, got {type(model).__name__}")
    state0 = model.initial_state()
    if isinstance(guess, State):
        guess = guess.values
    if guess is not None:
        state0 = state0.replace(**dict(guess))
    layout = Layout.of(state0)
    check_rhs(model, layout, "rhs")
    field = VectorField(layout, "rhs")
    time = jnp.asarray(t, layout.dtype)

    def fn(y, m):
        return field(time, y, m)

    sol = optx.root_find(
        fn,
        optx.Newton(rtol=rtol, atol=atol),
        layout.pack(state0.values),
        args=model,
        max_steps=max_steps,
        adjoint=optx.ImplicitAdjoint(),
        throw=throw,
    )
    y = sol.value
    if not throw:
        ok = sol.result == optx.RESULTS.successful
        y = jax.tree.map(lambda v: jnp.where(ok, v, jnp.nan), y)
    return layout.view(y)


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
