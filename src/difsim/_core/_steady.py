r"""Steady states (equilibria) by Newton's method, differentiable by implicit differentiation.

`steady_state` solves $f(x^*, \theta) = 0$ for the model's right-hand side $f$ with
optimistix. Its gradient with respect to the parameters $\theta$ comes from the implicit
function theorem, $\partial x^*/\partial\theta = -(\partial f/\partial x)^{-1}\,
\partial f/\partial\theta$ (optimistix's `ImplicitAdjoint`): one linear solve at the root,
no backpropagation through the Newton iterations.
"""

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Int

from difsim._core._custom_types import RealScalarLike
from difsim._core._model import Model
from difsim._core._solver_defaults import check_tolerance
from difsim._core._state import State
from difsim._core._throw import checked_outputs, concrete_status
from difsim._core._vector_field import Layout, VectorField, check_rhs
from difsim._status import (
    SolveError,
    Status,
    library_message,
    optimistix_status,
    result_index,
    status_from_optimistix,
)


def steady_state(
    model: Model,
    guess: State | Mapping[str, Any] | None = None,
    *,
    t: RealScalarLike = 0.0,
    rtol: float | None = None,
    atol: float | None = None,
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
    - `rtol`, `atol`: tolerances on the state for the Newton iteration. Default 1e-10 in
      float64 and 1e-5 in float32 (where 1e-10 cannot be met); an `rtol` below what the
      state's precision can deliver is refused, as `simulate` refuses it.
    - `max_steps`: most Newton iterations.
    - `throw`: if `True`, a failure to converge raises an error naming its [`Status`][]
      and quoting optimistix; if `False` the returned values are NaN instead (what a fit
      uses: the step is then rejected).

    **Returns:** a [`State`][] with the same variables (and metadata) as the model's.

    **Example:**

    ```python
    import jax
    import jax.numpy as jnp

    import difsim as ds

    lv = ds.models.LotkaVolterra()  # prey grows at alpha, predators die at gamma
    eq = ds.steady_state(lv, {"prey": 30.0, "predator": 20.0})
    assert jnp.allclose(eq["prey"], lv.gamma / lv.delta)  # the coexistence equilibrium
    assert jnp.allclose(eq["predator"], lv.alpha / lv.beta)


    # Its derivative by the implicit function theorem: d(prey*)/d(gamma) = 1/delta.
    def prey_at(gamma):
        model = ds.models.LotkaVolterra(gamma=gamma)
        return ds.steady_state(model, {"prey": 30.0, "predator": 20.0})["prey"]


    assert jnp.allclose(jax.grad(prey_at)(0.8), 1 / lv.delta, rtol=1e-4)
    ```
    """
    state, status, result = solve_steady_state(
        model, guess, t=t, rtol=rtol, atol=atol, max_steps=max_steps
    )
    if throw:
        name = type(model).__name__
        # One message per optimistix outcome, indexed by its own index: the Status and
        # optimistix's own words, so the error loses nothing of the library's.
        messages = []
        for index in range(len(optx.RESULTS)):
            s = optimistix_status(index)
            quote = library_message(optx.RESULTS, index)
            messages.append(f"steady_state({name}) failed [{s.name}]: {s.message} ({quote})")
        failed = status != Status.SUCCESS
        code = concrete_status(status)
        if code is not None and not code.ok:  # eager: difsim's own error, and its status
            raise SolveError(messages[int(result)], status=code).with_traceback(None) from None
        if code is None:
            status, values = checked_outputs(
                (status, state.values), failed, result, messages=tuple(messages)
            )
            state = State.from_info(state.info, values)
    return state


def solve_steady_state(
    model: Model,
    guess: State | Mapping[str, Any] | None = None,
    *,
    t: RealScalarLike = 0.0,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 256,
) -> tuple[State, Int[Array, ""], Int[Array, ""]]:
    """[`steady_state`][] that never raises, and says how it went.

    **Returns:** `(state, status, result)`: the steady state (NaN where the solve failed),
    its [`Status`][] code (`SUCCESS`, `NEWTON_MAX_STEPS`, `NEWTON_DIVERGED`,
    `LINEAR_SOLVER` or `NONFINITE`) and optimistix's own result index (for
    `library_message`). Each of shape `()`, or batched under `vmap`.
    """
    if not isinstance(model, Model):
        raise TypeError(f"steady_state expects a difsim.Model instance, got {type(model).__name__}")
    state0 = model.initial_state()
    if isinstance(guess, State):
        guess = guess.values
    if guess is not None:
        state0 = state0.replace(**dict(guess))
    layout = Layout.of(state0)
    rtol, atol = _tolerances(rtol, atol, layout.dtype)
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
        throw=False,
    )
    # A "successful" iteration can still end on a non-finite state (a NaN right-hand side
    # that passes the convergence test): call it what it is, as simulate does.
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(v)) for v in jax.tree.leaves(sol.value)]))
    result = optx.RESULTS.where(finite, sol.result, optx.RESULTS.nonfinite)
    status = status_from_optimistix(result)
    ok = status == Status.SUCCESS
    y = jax.tree.map(lambda v: jnp.where(ok, v, jnp.nan), sol.value)
    return layout.view(y), status, result_index(result)


def _tolerances(rtol, atol, dtype) -> tuple[float, float]:
    """`(rtol, atol)`, defaults by precision: 1e-10 in float64, 1e-5 in float32 (its
    attainable relative error is about 6e-7), and an `rtol` it cannot meet refused."""
    default = 1e-10 if jnp.finfo(dtype).bits >= 64 else 1e-5
    rtol = default if rtol is None else rtol
    atol = default if atol is None else atol
    check_tolerance("rtol", rtol, "steady_state rtol", dtype=dtype)
    check_tolerance("atol", atol, "steady_state atol")
    return rtol, atol
