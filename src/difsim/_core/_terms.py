"""The diffrax terms of a solve: the model's right-hand side (split for IMEX solvers) and,
for a stochastic model, its diffusion against a Brownian path."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp

from difsim import solvers
from difsim._core._model import Model
from difsim._core._sde import sde_terms
from difsim._core._sde_steps import LatticeStepSize, sde_controller
from difsim._core._vector_field import Layout, SpectrumField, VectorField


def model_terms(
    model: Model, layout: Layout, settings, key: jax.Array | None, t0, t1, dt0
) -> dfx.AbstractTerm:
    """One `ODETerm`; for an IMEX solver `MultiTerm(non-stiff, stiff)` with a spectral
    non-stiff part when the model gives one; for a stochastic model (a `key`) the drift and
    the diffusion, `MultiTerm(ODETerm, NoiseTerm)` (see [`sde_terms`][]). `settings`: the
    solve's `SolverSettings`."""
    if key is not None:
        return sde_terms(model, layout, key, t0, t1, dt0, settings)
    if not settings.imex:
        return dfx.ODETerm(VectorField(layout, "rhs"))
    nonstiff = VectorField(layout, "rhs_nonstiff")
    explicit = dfx.ODETerm(nonstiff)
    if model.has_spectrum():
        explicit = solvers.SpectralODETerm(nonstiff, SpectrumField(layout))
    return dfx.MultiTerm(explicit, dfx.ODETerm(VectorField(layout, "rhs_stiff")))


def check_stiff_term(model: Model, layout: Layout, solver, t0, dt0) -> None:
    """Raise a `ValueError` naming the model, `rhs_stiff` and the variable if a
    linear-implicit `solver` ([`difsim.solvers.AbstractLinearImplicit`][]) would get a
    stiff part that is not affine in the state: before the solve, on concrete values (the
    solver checks again inside the solve, where a failure is a status, not a message)."""
    if not isinstance(solver, solvers.AbstractLinearImplicit):
        return
    stiff = VectorField(layout, "rhs_stiff")
    y0 = layout.unpack(layout.pack(model.initial_state().values))
    # The first step's ends, as the solver's own check sees them (t0 + dt0); t0 alone if
    # the step is unknown or traced (a vmap over dt0), so that the check still runs.
    concrete = dt0 is not None and not isinstance(dt0, jax.core.Tracer)
    t1 = t0 + dt0 if concrete else t0
    solver.check_stiff_term(
        lambda t, y, m: layout.unpack(stiff(t, layout.pack(y), m)), t0, t1, y0, model,
        name=f"{type(model).__name__}.rhs_stiff",
    )  # fmt: skip


def traced_tolerances(controller, dtype):
    """`controller` with a PID controller's Python-float `rtol`/`atol` as arrays of
    `dtype`. A float leaf is part of the static configuration of the compiled solve
    (`eqx.filter_jit`), so every other tolerance compiled a new program (Lorenz: about 1 s
    each, a work-precision loop or a test of convergence orders once per tolerance); an
    array is an argument, and the program is reused (0.004 s). The settings keep the
    floats: sweeps hash them."""
    if type(controller) not in (dfx.PIDController, solvers.BDFController):
        return controller

    def traced(tol):
        return jnp.asarray(tol, dtype) if isinstance(tol, int | float) else tol

    return eqx.tree_at(
        lambda c: (c.rtol, c.atol), controller, (traced(controller.rtol), traced(controller.atol))
    )


def solve_controller(
    settings,
    key: jax.Array | None,
    ts,
    final_only: bool,
    t0=None,
    restarts: bool = False,
    t1=None,
):
    """The step-size controller of a solve on `[t0, t1]`: the settings', made to step to
    the save times `ts` for a stochastic model (`key`), and never below what its Brownian
    tree resolves (see [`sde_controller`][]); a fixed step of a stochastic solve that
    events restart (`restarts`) stays on the lattice `t0 + k·dt0` of the whole solve
    ([`LatticeStepSize`][])."""
    if key is None:
        return settings.controller
    if restarts and isinstance(settings.controller, dfx.ConstantStepSize):
        return LatticeStepSize(t0)
    return sde_controller(settings, ts, final_only, t0, t1)
