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
    check_index_one,
    check_key,
    check_rhs,
    check_saves,
    check_sde_plan,
    levy_area,
    sde_solver_settings,
    solver_settings,
    state_var,
)
from difsim._ensemble._adjoint import AbstractEnsembleAdjoint, make_adjoint
from difsim._ensemble._field import node, with_point
from difsim._ensemble._loop import Plan
from difsim._ensemble._sde_loop import KEY_DATA, SDEPlan
from difsim._ensemble._select import controller_for, method_for, sde_method_for, unsupported
from difsim._ensemble._solve import Config, default_block, default_sde_block, solve_jit
from difsim._status import SolveError, Status


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
    controller: Any = None,
    max_steps: int | None = None,
    block_size: int | None = None,
    adjoint: str | AbstractEnsembleAdjoint = "auto",
    keys: ArrayLike | None = None,
    brownian: str | None = None,
    event: Any = None,
    throw: bool = False,
) -> Solution:
    """Solve many trajectories of `model` at once with the ensemble engine.

    Lane `i` is `model` with every `points[key][i]` put in place: `key` is a parameter
    name or `"state.<var>"` (an initial value). The result equals
    `jax.vmap(ds.simulate)` over the same models (same steps, same error control, to
    rounding) and is several times faster: see "The ensemble engine" in `docs/sweeps.md`.

    **Arguments:** as [`simulate`][], plus
    - `points`: `{key: values}`, each of shape `(lanes, *value_shape)` with the same
      number of lanes. A sub-module of the model (an equinox network, a closure) is
      shared by every lane and cannot be a key; its arrays are differentiated like any
      parameter's.
    - `block_size`: lanes integrated together (default on a CPU: 256 for a few scalar
      state variables, fewer for larger states, about 2,048 state entries per block;
      every lane on a GPU).
    - `adjoint`: how derivatives pass through the solve: `"auto"` (default: forward mode
      for a few differentiated scalars, the discrete adjoint above), `"forward"` (one
      batched forward pass carrying a tangent per differentiated scalar: cheapest for a
      few parameters or per-lane values), `"discrete"` (reverse mode by a discrete
      adjoint of the engine's steps: bounded memory, cost independent of the number of
      parameters), `"checkpoint"` (reverse mode by JAX through checkpointed step loops),
      or an adjoint object. See "Gradients" in `docs/sweeps.md`.

    - `keys`: for a stochastic model (one with `diffusion`), each lane's PRNG key,
      `(lanes,)` (e.g. `jax.random.split(jax.random.key(0), lanes)`, or their key data):
      lane `i` integrates the path `simulate(..., key=keys[i], brownian="steps")` does.
    - `brownian`: for a stochastic model, `"steps"` (required: the engine draws each fixed
      step's increment from the lane's key; see "Brownian paths" in `docs/stochastic.md`).

    - `controller`: as [`simulate`][]'s, where the engine can follow it: the default, or
      an integral-only `diffrax.PIDController` without `dtmin`/`dtmax` or its own norm
      (anything else is refused, naming what the engine does instead).
    - `event`: refused (the engine does not locate events): `jax.vmap(ds.simulate)` or
      `ds.sweep(..., engine="diffrax")` solve models with events.
    - `throw`: `True` raises [`SolveError`][difsim.SolveError] when any lane failed,
      naming how many and the first one with its status; default `False`, unlike
      `simulate`: an ensemble reports each lane's failure in `status` (`(lanes,)`), and a
      sweep keeps the other lanes. Under `jax.jit` or `jax.vmap` the check is compiled
      into the outputs (equinox's runtime error, the same message).

    `solver` is one of `"tsit5"` (default), `"dopri5"`, `"bosh3"`, `"dopri8"`, or
    `"rodas5p"` for stiff models (a Rosenbrock method: one Jacobian and LU per lane and
    step, for small systems), or the solver instance, with the adaptive PID controller.
    A stochastic model takes fixed steps `dt0` with `"euler"` (Euler–Maruyama, Itô),
    `"heun"` or `"euler_heun"` (Stratonovich), or for additive noise `"shark"` (its
    default) or `"sra1"`.

    **Returns:** a [`Solution`][] whose every array has the lanes as leading axis (as
    under `jax.vmap`): `ys[var]` is `(lanes, time, *var_shape)`, `status` is `(lanes,)`.
    `jax.grad`, `jax.jvp`, `jax.jacfwd`, `jax.jacrev` and `jax.vmap` pass through with
    respect to the model's parameters and the swept values.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    rho = jnp.linspace(20.0, 30.0, 64)  # 64 lanes, one per value
    ens = ds.simulate_ensemble(ds.models.Lorenz(), {"rho": rho}, t0=0.0, t1=1.0, save="final")
    one = ds.simulate(ds.models.Lorenz(rho=rho[5]), t0=0.0, t1=1.0, save="final")
    assert ens.ys["x"].shape == (64, 1) and jnp.allclose(ens.ys["x"][5], one.ys["x"], rtol=1e-3)
    ```
    """
    if not isinstance(model, Model):
        raise TypeError(
            f"simulate_ensemble expects a difsim.Model instance, got {type(model).__name__}"
        )
    if event is not None:
        raise ValueError(
            "simulate_ensemble: event= is not supported (the ensemble engine does not "
            "locate events); use jax.vmap(ds.simulate) or ds.sweep(..., engine='diffrax')"
        )
    if not isinstance(throw, bool):
        raise TypeError(f"throw must be True or False, got {throw!r}")
    times = SaveSpec(t, t0=t0, t1=t1, save=save)
    given = dict(solver=solver, rtol=rtol, atol=atol, dt0=dt0, max_steps=max_steps)
    if controller is not None:
        given["controller"] = controller
    settings, keys = _stochastic(model, times, given, keys, brownian)
    if settings is None:
        settings = solver_settings(model, **given)
    if (reason := unsupported(settings, model)) is not None:
        raise ValueError(f"simulate_ensemble: {reason}; use jax.vmap(ds.simulate) instead")
    if block_size is not None and (
        isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1
    ):
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    adjoint = make_adjoint(adjoint)
    # Traced once (no FLOPs): the engine calls `rhs` without simulate's checks, so a Python
    # `if` on the state or a missing derivative is named here, not as a raw JAX error.
    layout = Layout.of(model.initial_state())
    check_rhs(model, layout, "rhs")
    if layout.algebraic:  # a DAE: its constraints must determine its algebraic variables
        check_index_one(model, layout, times.t0, layout.pack(model.initial_state().values))
    lanes = None if keys is None else keys.shape[0]
    points = check_points(model, points, lanes)
    sol = run_ensemble(model, points, times, settings, block_size, adjoint, keys)
    return _raise_if_any_failed(sol, type(model).__name__) if throw else sol


def _raise_if_any_failed(sol: Solution, name: str) -> Solution:
    """`sol`, after raising [`SolveError`][difsim.SolveError] if a lane failed (an eager
    call), or with the same check guarding every output (under a trace)."""
    good = (sol.status == Status.SUCCESS) | (sol.status == Status.EVENT)
    try:
        status = np.asarray(sol.status)
    except jax.errors.TracerArrayConversionError:
        message = f"simulate_ensemble({name}): a lane failed; throw=False reports each status"
        bad = ~jnp.all(good)
        return jax.tree.map(lambda x: eqx.error_if(x, bad, message), sol)
    failed = np.flatnonzero(~np.asarray(good))
    if failed.size == 0:
        return sol
    first = Status(int(status[failed[0]]))
    raise SolveError(
        f"simulate_ensemble({name}) failed in {failed.size:,} of {status.size:,} lanes; the "
        f"first, lane {failed[0]}, [{first.name}]: {first.message} (throw=False returns "
        "every lane's status)",
        status=first,
        solution=sol,
    )


def _stochastic(model: Model, times: SaveSpec, given: dict, keys, brownian):
    """`(settings, key data)` of a stochastic model's ensemble solve (each lane's key
    checked as `simulate` checks one); `(None, None)` for an ODE."""
    name = type(model).__name__
    if not model.is_stochastic():
        if keys is not None or brownian is not None:
            raise ValueError(f"{name} has no noise (no diffusion method): remove keys/brownian")
        return None, None
    if keys is None:
        raise ValueError(
            f"{name} is stochastic: give each lane's PRNG key, keys=jax.random.split("
            "jax.random.key(0), lanes), and brownian='steps'"
        )
    keys = jnp.asarray(keys) if not _typed(keys) else keys
    if not _typed(keys):
        if keys.dtype != jnp.uint32 or keys.ndim != 2:
            raise TypeError(
                f"keys must be PRNG keys of shape (lanes,) (jax.random.split) or their key "
                f"data (lanes, 2) uint32, got {keys.dtype} of shape {keys.shape}"
            )
        keys = jax.random.wrap_key_data(keys)
    if keys.ndim != 1 or keys.shape[0] < 1:
        raise ValueError(f"keys must hold one key per lane, shape (lanes,), got {keys.shape}")
    check_key(model, keys[0], brownian)
    layout = Layout.of(model.initial_state())
    settings = sde_solver_settings(model, layout, controller=None, brownian=brownian, **given)
    if settings.brownian != "steps":
        raise ValueError(
            f"simulate_ensemble: {name} is stochastic; the ensemble engine draws each fixed "
            "step's increment from the lane's key: pass brownian='steps' (and dt0)"
        )
    check_saves(settings, times)
    check_sde_plan(keys[0], settings, None, times, name)
    return settings, jax.random.key_data(keys)


def _typed(keys) -> bool:
    dtype = getattr(keys, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


def check_points(
    model: Model, points: Mapping[str, ArrayLike], lanes: int | None = None
) -> dict[str, jax.Array]:
    """`points` as arrays, checked: known keys, one common number of lanes (at least 1;
    `lanes` when given, and then `points` may be empty), each value's shape that of what it
    replaces."""
    if points is None and lanes is not None:
        points = {}
    if not isinstance(points, Mapping) or not (points or lanes):
        raise ValueError("points must be a non-empty mapping {key: values (lanes, ...)}")
    state = model.initial_state().values
    out = {}
    for key, values in points.items():
        var = state_var(key)
        if var is None and key not in model.parameter_names():
            raise ValueError(
                f"points: {key!r} is neither a parameter of {type(model).__name__} "
                "nor 'state.<var>'"
            )
        target = state[var] if var is not None else getattr(model, key)
        if var is None and not eqx.is_array_like(target):
            raise ValueError(
                f"points: {type(model).__name__}'s {key!r} is a sub-module "
                f"({type(target).__name__}), not a number or an array: only those vary over "
                "the lanes; a network or other module is shared by every lane"
            )
        if var is not None and var not in state:
            raise ValueError(f"points: {type(model).__name__} has no state variable {var!r}")
        arr = jnp.asarray(values)
        if arr.ndim == 0 or arr.shape[1:] != np.shape(target):
            raise ValueError(
                f"points[{key!r}] must have shape (lanes, *{np.shape(target)}), got {arr.shape}"
            )
        if lanes is not None and arr.shape[0] != lanes:
            raise ValueError(
                f"points[{key!r}] has {arr.shape[0]} lanes, the others (keys included) {lanes}"
            )
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
    keys: jax.Array | None = None,
    lanes: int | None = None,
) -> Solution:
    """The ensemble solve, everything already checked (what sweeps call under `jit`).
    `keys`: each lane's PRNG key data, `(lanes, *key_shape)` uint32, for a stochastic
    model; `lanes`: their number when `points` is empty (an ODE's copies of the model as
    it is)."""
    # The swept values replace the model's own: no tangent (no wasted forward direction)
    # for a parameter that every lane overrides.
    model = with_point(model, {k: jax.lax.stop_gradient(node(k)(model)) for k in points})
    state = model.initial_state()
    # In declaration order (the order of `state.info`): `with_point` rebuilds the values'
    # dict, in sorted order, when it puts an initial value in place.
    values = [jnp.asarray(state[name]) for name in state.names]
    dtype = jnp.result_type(*values)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    plan = _plan(model, settings, times.final_only)
    size = sum(int(np.size(v)) for v in values)
    dyn, static = eqx.partition(model, eqx.is_array)
    if keys is not None:
        n = keys.shape[0]
    else:
        n = next(iter(points.values())).shape[0] if points else lanes
    dt0 = None if settings.dt0 is None else float(settings.dt0)
    block = default_sde_block(n, size) if keys is not None else default_block(n, size)
    # The static part flattened: hashable (its `State` holds a dict), so `solve_jit` can
    # key its compiled programs on the configuration.
    leaves, treedef = jax.tree.flatten(static)
    shapes = tuple(np.shape(v) for v in values)
    cfg = Config(
        (treedef, tuple(leaves)), state.info, shapes, jnp.dtype(dtype), plan,
        block_size or block, dt0, adjoint or make_adjoint("auto"),
        block_size or default_block(n, size, reverse=True), n,
    )  # fmt: skip
    ts = times.save_times()
    t0, t1 = jnp.asarray(times.t0, dtype), jnp.asarray(times.t1, dtype)
    ts = None if ts is None else jnp.asarray(ts, dtype)
    lanes = points if keys is None else {**points, KEY_DATA: keys}
    ys, stats = solve_jit(cfg, dyn, lanes, (t0, t1, ts))
    out_ts = jnp.broadcast_to(t1, (n, 1)) if ts is None else jnp.broadcast_to(ts, (n, ts.shape[0]))
    # `filter_vmap`: a network's activation (or any callable or static leaf) is not an
    # array and passes through unbatched; every array gets the lanes axis, as under
    # `jax.vmap(ds.simulate)`.
    models = eqx.filter_vmap(lambda p: with_point(model, p), axis_size=n)(points)
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


def _plan(model: Model, settings: SolverSettings, final_only: bool) -> Plan | SDEPlan:
    """The static plan of a block solve: adaptive Runge–Kutta or Rosenbrock steps for an
    ODE, fixed SDE steps for a stochastic model."""
    if model.is_stochastic():
        return SDEPlan(
            sde_method_for(settings), Layout.of(model.initial_state()), type(model).noise,
            levy_area(settings.solver), settings.max_steps, final_only,
        )  # fmt: skip
    method = method_for(settings)
    return Plan(method, controller_for(settings, method), settings.max_steps, final_only)
