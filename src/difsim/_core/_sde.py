"""Solving a model with noise: its PRNG key, its solver settings and its diffrax terms.

`simulate` hands a stochastic model (one that defines `diffusion`) to this module: the key
is checked ([`check_key`][]); the solver, step control and tolerances are resolved against
the noise ([`sde_solver_settings`][]: calculus, additive or not); and the drift and the
diffusion become `MultiTerm(ODETerm(drift), NoiseTerm(diffusion, Brownian motion))`
([`sde_terms`][]). The Brownian motion is a `diffrax.VirtualBrownianTree` built from the
key: the same key gives the same path whatever the solver or its steps (adaptive ones
included), so reverse-mode gradients through a fixed key are exact. The tree resolves the
shortest step the solve may take ([`path_tol`][]); an adaptive solve's controller is kept
from stepping below it (`_sde_steps.sde_controller`).
"""

from typing import Any

import diffrax as dfx
import jax
import jax.numpy as jnp

from difsim import solvers
from difsim._core._brownian import (
    BROWNIAN,
    BrownianPath,
    StepBrownianPath,
    adaptive_tol,
    fixed_step_tol,
    levy_area,
)
from difsim._core._model import Model
from difsim._core._noise import (
    DiffusionField,
    Noise,
    NoiseTerm,
    brownian_shape,
    check_noise,
    is_additive,
)
from difsim._core._sde_steps import check_saves, solve_dtmin
from difsim._core._solver_defaults import (
    X64_HINT,
    atol_origin,
    check_atol_scale,
    check_attainable,
    check_tolerance,
    model_solver_defaults,
)
from difsim._core._solver_settings import SolverSettings, check_max_steps
from difsim._core._vector_field import Layout, VectorField

# Defaults of SDE solves where the caller and the model leave them unset. Looser than the
# ODE defaults (1e-6): an adaptive SDE step's error estimate carries the noise, so tight
# tolerances buy steps, not accuracy of statistics (DifferentialEquations.jl uses 1e-2).
SDE_DEFAULTS: dict[str, Any] = dict(rtol=1e-3, atol=1e-3, max_steps=16_384)


def check_key(model: Model, key: Any, brownian: str | None = None) -> jax.Array | None:
    """`key` as a typed PRNG key, checked against the model: a stochastic model needs one,
    a deterministic model takes none.

    **Raises:** `ValueError`/`TypeError` naming the model and saying what to pass.
    """
    name = type(model).__name__
    if not model.is_stochastic():
        if brownian is not None:
            raise ValueError(f"{name} has no noise (no diffusion method): remove brownian=...")
        if key is not None:
            raise ValueError(
                f"{name} has no noise (no diffusion method), so simulate takes no key; remove "
                "key=..., or give the model a diffusion(self, t, s) to make it an SDE"
            )
        return None
    if key is None:
        raise ValueError(
            f"{name} is stochastic (it defines diffusion), so simulate needs a PRNG key for "
            "its Brownian path: pass key=jax.random.key(0) (the same key gives the same path)"
        )
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        typed = key
    elif dtype == jnp.uint32 and jnp.shape(key)[-1:] == (2,):  # a raw key (jax.random.PRNGKey)
        typed = jax.random.wrap_key_data(key)
    else:
        raise TypeError(
            f"key must be a JAX PRNG key such as jax.random.key(0), got {type(key).__name__}"
            + (f" of dtype {dtype}" if dtype is not None else "")
        )
    if jnp.shape(typed) != ():
        raise ValueError(
            f"key holds {jnp.shape(typed)} keys; simulate takes one key (one path). For many "
            "paths, jax.vmap over keys or use ds.sweep(..., samples=n, seed=s)"
        )
    return typed


def sde_settings(model, layout, solver, given: dict[str, Any], adjoint, brownian, times):
    """`simulate`'s settings of a stochastic model: `solver` as is when it is already a
    [`SolverSettings`][] (a sweep's, resolved once), else [`sde_solver_settings`][] of the
    `given` keywords; the adjoint checked (no backsolve), and with fixed steps the save
    times checked to lie on the steps (`times`: the solve's `SaveSpec`)."""
    settings = _settings(model, layout, solver, given, adjoint, brownian)
    check_saves(settings, times)
    return settings


def _settings(model, layout, solver, given, adjoint, brownian) -> SolverSettings:
    if isinstance(adjoint, dfx.BacksolveAdjoint):
        raise ValueError(
            "adjoint='backsolve' does not support stochastic models; use 'checkpoint' "
            "(reverse mode through the fixed-key Brownian path is exact) or 'forward'"
        )
    if not isinstance(solver, SolverSettings):
        return sde_solver_settings(model, layout, solver=solver, brownian=brownian, **given)
    clash = [k for k, v in {**given, "brownian": brownian}.items() if v is not None]
    if clash:
        raise ValueError(f"solver is a SolverSettings, which holds {clash[0]}: leave it out")
    return solver


def sde_solver_settings(
    model: Model,
    layout: Layout,
    *,
    solver: str | dfx.AbstractSolver | None,
    controller: str | dfx.AbstractStepSizeController | None,
    dt0,
    rtol,
    atol,
    max_steps: int | None,
    brownian: str | None = None,
    root_tol: float | None = None,
    dtype=None,
    x64: str = X64_HINT,
) -> SolverSettings:
    """The [`SolverSettings`][] of a stochastic model: the caller's values win, then the
    model's `solver_defaults`, then the SDE defaults: ShARK (adaptive, PID) for additive
    noise, else Euler–Maruyama (Itô) or Heun (Stratonovich) with a fixed step `dt0`;
    tolerances 1e-3. `brownian`: `"tree"` (default) or `"steps"` (fixed steps only; see
    `_brownian`). `dtype`: the run's precision, whose floor `rtol` must clear (default the
    layout's; `x64` says how to turn float64 on).

    **Raises:** `ValueError` for a solver that is not an SDE solver, that converges to the
    other calculus (for noise that is not additive), that needs additive noise, an adaptive
    controller for a solver without an error estimate, a fixed step without `dt0`, or an
    `rtol` below what the precision delivers.
    """
    if root_tol is not None:
        raise ValueError(
            f"root_tol={root_tol!r} sets the nonlinear solves of implicit ODE solvers; "
            f"{type(model).__name__} is stochastic and its SDE solvers have none: leave it out"
        )
    noise = check_noise(model, layout)
    additive = is_additive(model, layout, noise)
    given = dict(solver=solver, controller=controller, dt0=dt0, rtol=rtol, atol=atol)
    values = _resolve(model, given, max_steps, noise, additive)
    dtype = jnp.finfo(layout.dtype if dtype is None else dtype).dtype
    check_attainable(type(model), values["rtol"], rtol is not None, dtype, x64)
    name = type(model).__name__
    solver_obj = _solver(values["solver"], name, noise, additive)
    controller_obj = _controller(values, solver_obj, name, additive)
    if values["controller"] == "pid":  # an error test, which an atol as large as the state voids
        label, note = atol_origin(type(model), atol is not None)
        state = model.initial_state().items()
        check_atol_scale(values["atol"], state, name, label, rtol=values["rtol"], note=note)
    brownian = _brownian(brownian, controller_obj)
    return SolverSettings(
        solver=solver_obj,
        controller=controller_obj,
        dt0=values["dt0"],
        rtol=values["rtol"],
        atol=values["atol"],
        max_steps=check_max_steps(values["max_steps"]),
        solver_requested=values["solver"],
        controller_requested=values["controller"],
        brownian=brownian,
    )


def path_tol(settings: SolverSettings, t0, t1, dt0):
    """The tolerance of the Brownian tree of a solve of `settings` on `[t0, t1]`: a leaf at
    most a quarter of a fixed step `dt0` ([`fixed_step_tol`][]), a sixteenth of an
    adaptive solve's shortest step ([`solve_dtmin`][], [`adaptive_tol`][])."""
    dtmin = solve_dtmin(settings, t0, t1)
    if dtmin is not None:
        return adaptive_tol(t0, t1, dtmin)
    return fixed_step_tol(t0, t1, jnp.inf if dt0 is None else dt0)


def _brownian(brownian: str | None, controller) -> str:
    if brownian is None:
        return "tree"
    if brownian not in BROWNIAN:
        raise ValueError(f"brownian must be 'tree' or 'steps', got {brownian!r}")
    if brownian == "steps" and isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
        raise ValueError(
            "brownian='steps' draws one increment per fixed step, so it needs fixed steps "
            "(a dt0 and a fixed-step controller); adaptive steps need brownian='tree'"
        )
    return brownian


def _resolve(model, given, max_steps, noise: Noise, additive: bool) -> dict[str, Any]:
    for key in ("rtol", "atol"):
        check_tolerance(key, given[key])
    defaults = model_solver_defaults(type(model))
    own = given["solver"] is None or given["solver"] == defaults.get("solver")
    out = {}
    for key, value in {**given, "max_steps": max_steps}.items():
        if value is None and (own or key not in ("dt0", "controller")):
            value = defaults.get(key)
        out[key] = SDE_DEFAULTS.get(key) if value is None else value
    if out["solver"] is None:
        out["solver"] = solvers.default_sde_solver(noise.calculus, additive)
    if isinstance(out["solver"], str):
        out["solver"] = out["solver"].lower()
    if out["controller"] is None and not isinstance(out["solver"], dfx.AbstractSolver):
        info = solvers.sde_solver_info(out["solver"])
        adaptive = info is not None and info.adaptive and out["dt0"] is None
        out["controller"] = "pid" if adaptive else "constant"
    return out


def _solver(solver, name: str, noise: Noise, additive: bool) -> dfx.AbstractSolver:
    """The solver object, checked against the noise (calculus, additivity)."""
    if isinstance(solver, dfx.AbstractSolver):
        info = solvers.sde_solver_info(solver)
        calculus = _calculus_of(solver)
        obj = solver
    else:
        info = solvers.sde_solver_info(solver)
        if info is None:
            names = ", ".join(repr(k) for k in solvers.SDE_SOLVERS)
            ode = isinstance(solver, str) and solver in solvers.SOLVERS
            hint = " (an ODE solver)" if ode else ""
            raise ValueError(
                f"{name} is stochastic: solver {solver!r}{hint} is not an SDE solver; "
                f"choose one of {names}"
            )
        calculus, obj = info.calculus, info.cls()
    label = solver if isinstance(solver, str) else type(solver).__name__
    if info is not None and info.additive_only and not additive:
        raise ValueError(
            f"solver {label!r} needs additive noise (a diffusion that does not depend on the "
            f"state), but {name}.diffusion depends on the state; use "
            f"{solvers.default_sde_solver(noise.calculus, False)!r} or another general solver"
        )
    if calculus is not None and calculus != noise.calculus and not additive:
        wanted = [k for k, i in solvers.SDE_SOLVERS.items() if i.calculus == noise.calculus]
        raise ValueError(
            f"solver {label!r} converges to the {_word(calculus)} solution, but {name} declares "
            f"{_word(noise.calculus)} noise that depends on the state (where the two differ); "
            f"use one of {', '.join(map(repr, wanted))}, or declare "
            f"noise = ds.Noise(calculus={calculus!r}) if that is what the model means"
        )
    return obj


def _calculus_of(solver: dfx.AbstractSolver) -> str | None:
    if isinstance(solver, dfx.AbstractItoSolver):
        return "ito"
    if isinstance(solver, dfx.AbstractStratonovichSolver):
        return "stratonovich"
    return None


def _word(calculus: str) -> str:
    return "Itô" if calculus == "ito" else "Stratonovich"


def _clip(controller, additive: bool) -> dfx.ClipStepSizeController:
    """An adaptive SDE controller wrapped to step to the save times (set per solve by
    [`step_controller`][]) and, for noise that is not additive (possibly non-commutative),
    to revisit rejected steps: otherwise a step rejected *because* of its Brownian sample
    biases the solution (Foster & Jelinčič, arXiv:2311.14201)."""
    if isinstance(controller, dfx.ClipStepSizeController):
        return controller
    return dfx.ClipStepSizeController(controller, store_rejected_steps=None if additive else 100)


def _controller(values: dict[str, Any], solver: dfx.AbstractSolver, name: str, additive: bool):
    controller, dt0 = values["controller"], values["dt0"]
    info = solvers.sde_solver_info(solver)
    label = info.name if info is not None else type(solver).__name__
    if isinstance(controller, dfx.AbstractStepSizeController):
        adaptive = isinstance(controller, dfx.AbstractAdaptiveStepSizeController)
        if adaptive and info is not None and not info.adaptive:
            raise ValueError(
                f"SDE solver {label!r} has no error estimate: it cannot adapt its steps"
            )
        return _clip(controller, additive) if adaptive else controller
    if controller == "pid":
        if info is not None and not info.adaptive:
            adaptive = [k for k, i in solvers.SDE_SOLVERS.items() if i.adaptive]
            raise ValueError(
                f"SDE solver {label!r} has no embedded error estimate, so it cannot use "
                f"controller='pid'; give a fixed step dt0, or an adaptive solver "
                f"({', '.join(map(repr, adaptive))})"
            )
        return _clip(dfx.PIDController(rtol=values["rtol"], atol=values["atol"]), additive)
    if controller == "constant":
        if dt0 is None:
            raise ValueError(
                f"solving {name} with {label!r} takes fixed steps: give the step dt0 (config "
                f"key [solver] dt0), e.g. dt0=1e-3, or an adaptive solver (additive noise: "
                f"'shark'; commutative Stratonovich noise: 'heun', 'spark')"
            )
        return dfx.ConstantStepSize()
    raise ValueError(f"unknown step-size controller {controller!r}; choose 'pid' or 'constant'")


def sde_terms(
    model: Model, layout: Layout, key: jax.Array, t0, t1, dt0, settings: SolverSettings
) -> dfx.MultiTerm:
    """`MultiTerm(ODETerm(drift), NoiseTerm(diffusion, tree))` of a stochastic model solved
    with `settings`, with a `VirtualBrownianTree` over `[t0, t1]` resolving the solve's
    shortest step ([`path_tol`][]) and generating the Lévy area its solver needs (or, for
    `brownian="steps"`, a [`StepBrownianPath`][] of step `dt0`).

    One key is one path for all solvers that need the same Lévy area ([`levy_area`][]: the
    tree draws Lévy areas jointly with the increments, so the two kinds of tree differ);
    increments alone cost about a third of increments with space-time Lévy area.
    """
    noise = type(model).noise
    shape, levy = brownian_shape(layout, noise), levy_area(settings.solver)
    if settings.brownian == "steps":
        tree = StepBrownianPath(t0, t1, dt0, key, shape, levy)
    else:
        tol = path_tol(settings, t0, t1, dt0)
        tree = dfx.VirtualBrownianTree(t0, t1, tol=tol, shape=shape, key=key, levy_area=levy)
    diffusion = NoiseTerm(DiffusionField(layout, noise.dim), tree)
    return dfx.MultiTerm(dfx.ODETerm(VectorField(layout, "rhs")), diffusion)


def brownian_path(
    model: Model,
    key,
    t0,
    t1,
    *,
    solver: str | dfx.AbstractSolver | None = None,
    dt0=None,
    controller: str | dfx.AbstractStepSizeController | None = None,
    max_steps: int | None = None,
) -> BrownianPath:
    """The Brownian path `simulate(model, t0=t0, t1=t1, key=key, solver=solver, dt0=dt0,
    controller=controller, max_steps=max_steps)` integrates against: `path.evaluate(ta,
    tb)` gives `W(tb) - W(ta)`, shaped like the state (diagonal noise; a dict for variables
    of different shapes) or `(dim,)` (general noise). For checks against exact solutions,
    e.g. geometric Brownian motion.

    ```python
    import jax
    import jax.numpy as jnp
    import difsim as ds


    class Walk(ds.Model):
        sigma: float = 0.5
        state = ds.State(x=0.0)
        noise = ds.Noise()

        def rhs(self, t, s):
            return dict(x=0.0 * s.x)

        def diffusion(self, t, s):
            return dict(x=self.sigma + 0.0 * s.x)


    key = jax.random.key(1)
    w = ds.brownian_path(Walk(), key, 0.0, 1.0, solver="euler", dt0=1e-2).evaluate(0.0, 1.0)
    sol = ds.simulate(Walk(), t0=0.0, t1=1.0, save="final", key=key, solver="euler", dt0=1e-2)
    assert jnp.allclose(sol.ys["x"][-1], 0.5 * w[0], rtol=1e-5)  # dx = σ dW: x(1) = σ W(1)
    ```

    The tree is exact down to `path.resolution` (at most a quarter of a fixed step; for an
    adaptive solve `(t1 - t0) / (128 · max_steps)` by default): a shorter increment is
    refused. A larger `max_steps` gives a finer tree of the same Brownian motion (equal to
    the coarser tree's at the ends of its leaves).
    """
    key = check_key(model, key)
    layout = Layout.of(model.initial_state())
    given = dict(rtol=None, atol=None, max_steps=max_steps, controller=controller)
    settings = sde_solver_settings(model, layout, solver=solver, dt0=dt0, **given)
    dtype = jnp.finfo(layout.dtype).dtype
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    dt0 = None if settings.dt0 is None else jnp.asarray(settings.dt0, dtype)
    path = sde_terms(model, layout, key, t0, t1, dt0, settings).terms[1].control
    return BrownianPath(path, path_tol(settings, t0, t1, dt0))


def noise_summary(model: Model) -> dict[str, str]:
    """Attributes describing a stochastic model's noise, for outputs (empty otherwise)."""
    if not model.is_stochastic():
        return {}
    noise = type(model).noise
    return {"noise": noise.describe(), "calculus": noise.calculus} | (
        {} if noise.diagonal else {"noise_dim": str(noise.dim)}
    )
