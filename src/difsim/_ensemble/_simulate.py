"""The public entry point of the ensemble engine."""

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from difsim._core import (
    Layout,
    Model,
    RealScalarLike,
    SaveLike,
    SaveSpec,
    Solution,
    SolverSettings,
    Times,
    check_rhs,
    solver_settings,
    state_var,
)
from difsim._ensemble._adjoint import AbstractEnsembleAdjoint, make_adjoint
from difsim._ensemble._field import node, with_point
from difsim._ensemble._loop import Plan
from difsim._ensemble._select import controller_for, method_for, unsupported
from difsim._ensemble._solve import Config, default_block, solve


def simulate_ensemble(
    model: Model,
    points: Mapping[str, ArrayLike],
    t: Times | None = None,
    *,
    t0: RealScalarLike | None = None,
    t1: RealScalarLike | None = None,
    save: SaveLike = None,
    solver: str | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0: RealScalarLike | None = None,
    max_steps: int | None = None,
    block_size: int | None = None,
    adjoint: str | AbstractEnsembleAdjoint = "auto",
) -> Solution:
    """Solve many trajectories of `model` at once with the ensemble engine.

    Lane `i` is `model` with every `points[key][i]` put in place: `key` is a parameter
    name or `"state.<var>"` (an initial value). The result equals
    `jax.vmap(ds.simulate)` over the same models (same steps, same error control, to
    rounding) and is several times faster: see "The ensemble engine" in `docs/sweeps.md`.

    **Arguments:** as [`simulate`][], plus
    - `points`: `{key: values}`, each of shape `(lanes, *value_shape)` with the same
      number of lanes.
    - `block_size`: lanes integrated together (default on a CPU: 256 for a few scalar
      state variables, fewer for larger states, about 2,048 state entries per block;
      every lane on a GPU).
    - `adjoint`: how derivatives pass through the solve: `"auto"` (default: forward mode
      for at most 6 differentiated scalars, reverse mode above), `"forward"` (one batched
      forward pass carrying a tangent per differentiated scalar: cheapest for a few
      parameters or per-lane values), `"checkpoint"` (reverse mode with checkpointed step
      loops, bounded memory, cost independent of the number of parameters: for many
      parameters). See "Gradients" in `docs/sweeps.md`.

    `solver` is one of `"tsit5"` (default), `"dopri5"`, `"bosh3"`, `"dopri8"`, or
    `"rodas5p"` for stiff models (a Rosenbrock method: one Jacobian and LU per lane and
    step, for small systems), or the solver instance, with the adaptive PID controller.

    **Returns:** a [`Solution`][] whose every array has the lanes as leading axis (as
    under `jax.vmap`): `ys[var]` is `(lanes, time, *var_shape)`, `status` is `(lanes,)`.
    `jax.grad`, `jax.jvp`, `jax.jacfwd`, `jax.jacrev` and `jax.vmap` pass through with
    respect to the model's parameters and the swept values.
    """
    if not isinstance(model, Model):
        raise TypeError(
            f"simulate_ensemble expects a difsim.Model instance, got {type(model).__name__}"
        )
    times = SaveSpec(t, t0=t0, t1=t1, save=save)
    settings = solver_settings(
        model, solver=solver, rtol=rtol, atol=atol, dt0=dt0, max_steps=max_steps
    )
    if (reason := unsupported(settings, model)) is not None:
        raise ValueError(f"simulate_ensemble: {reason}; use jax.vmap(ds.simulate) instead")
    if block_size is not None and (
        isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1
    ):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    adjoint = make_adjoint(adjoint)
    # Traced once (no FLOPs): the engine calls `rhs` without simulate's checks, so a Python
    # `if` on the state or a missing derivative is named here, not as a raw JAX error.
    check_rhs(model, Layout.of(model.initial_state()), "rhs")
    return run_ensemble(model, check_points(model, points), times, settings, block_size, adjoint)


def check_points(model: Model, points: Mapping[str, ArrayLike]) -> dict[str, jax.Array]:
    """`points` as arrays, checked: known keys, one common number of lanes (at least 1),
    each value's shape that of what it replaces."""
    if not isinstance(points, Mapping) or not points:
        raise ValueError("points must be a non-empty mapping {key: values (lanes, ...)}")
    state = model.initial_state().values
    out, lanes = {}, None
    for key, values in points.items():
        var = state_var(key)
        if var is None and key not in model.parameter_names():
            raise ValueError(
                f"points: {key!r} is neither a parameter of {type(model).__name__} "
                "nor 'state.<var>'"
            )
        target = state[var] if var is not None else getattr(model, key)
        if var is not None and var not in state:
            raise ValueError(f"points: {type(model).__name__} has no state variable {var!r}")
        arr = jnp.asarray(values)
        if arr.ndim == 0 or arr.shape[1:] != np.shape(target):
            raise ValueError(
                f"points[{key!r}] must have shape (lanes, *{np.shape(target)}), got {arr.shape}"
            )
        if lanes is not None and arr.shape[0] != lanes:
            raise ValueError(f"points[{key!r}] has {arr.shape[0]} lanes, the others {lanes}")
        lanes = arr.shape[0]
        out[key] = (
            arr.astype(jnp.result_type(target, float))
            if jnp.issubdtype(arr.dtype, jnp.integer)
            else arr
        )
    return out


def run_ensemble(
    model: Model,
    points: dict[str, Any],
    times: SaveSpec,
    settings: SolverSettings,
    block_size: int | None = None,
    adjoint: AbstractEnsembleAdjoint | None = None,
) -> Solution:
    """The ensemble solve, everything already checked (what sweeps call under `jit`)."""
    method = method_for(settings)
    # The swept values replace the model's own: no tangent (no wasted forward direction)
    # for a parameter that every lane overrides.
    model = with_point(model, {k: jax.lax.stop_gradient(node(k)(model)) for k in points})
    state = model.initial_state()
    values = [jnp.asarray(v) for v in state.values.values()]
    dtype = jnp.result_type(*values)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    plan = Plan(method, controller_for(settings, method), settings.max_steps, times.final_only)
    size = sum(int(np.size(v)) for v in values)
    dyn, static = eqx.partition(model, eqx.is_array)
    n = next(iter(points.values())).shape[0]
    dt0 = None if settings.dt0 is None else float(settings.dt0)
    cfg = Config(
        static, state.info, tuple(np.shape(v) for v in values), jnp.dtype(dtype), plan,
        block_size or default_block(n, size), dt0, adjoint or make_adjoint("auto"),
        block_size or default_block(n, size, reverse=True),
    )  # fmt: skip
    ts = times.save_times()
    t0, t1 = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
    ts = None if ts is None else jnp.asarray(ts, dtype)
    ys, stats = solve(cfg, dyn, points, (t0, t1, ts))
    out_ts = jnp.broadcast_to(t1, (n, 1)) if ts is None else jnp.broadcast_to(ts, (n, ts.shape[0]))
    models = jax.vmap(lambda p: with_point(model, p))(points)
    return Solution(
        ts=out_ts,
        ys=ys,
        status=stats["status"],
        num_steps=stats["num_steps"],
        num_accepted_steps=stats["num_accepted_steps"],
        num_rejected_steps=stats["num_rejected_steps"],
        t_end=None,
        y_end=None,
        model=models,
        var_info=state.info,
        solver=type(settings.solver).__name__,
        result=None,
    )
