"""The diffrax terms of a solve: the model's right-hand side (split for IMEX solvers) and,
for a stochastic model, its diffusion against a Brownian path."""

import diffrax as dfx
import jax

from difsim import solvers
from difsim._core._model import Model
from difsim._core._sde import sde_terms, step_controller
from difsim._core._vector_field import Layout, SpectrumField, VectorField


def model_terms(
    model: Model, layout: Layout, settings, key: jax.Array | None, t0, t1, dt0
) -> dfx.AbstractTerm:
    """One `ODETerm`; for an IMEX solver `MultiTerm(non-stiff, stiff)` with a spectral
    non-stiff part when the model gives one; for a stochastic model (a `key`) the drift and
    the diffusion, `MultiTerm(ODETerm, NoiseTerm)` (see [`sde_terms`][]). `settings`: the
    solve's `SolverSettings`."""
    if key is not None:
        return sde_terms(model, layout, key, t0, t1, dt0, settings.solver, settings.brownian)
    if not settings.imex:
        return dfx.ODETerm(VectorField(layout, "rhs"))
    nonstiff = VectorField(layout, "rhs_nonstiff")
    explicit = dfx.ODETerm(nonstiff)
    if model.has_spectrum():
        explicit = solvers.SpectralODETerm(nonstiff, SpectrumField(layout))
    return dfx.MultiTerm(explicit, dfx.ODETerm(VectorField(layout, "rhs_stiff")))


def solve_controller(settings, key: jax.Array | None, ts, final_only: bool):
    """The step-size controller of a solve: the settings', made to step to the save
    times `ts` for a stochastic model (`key`; see [`step_controller`][])."""
    if key is None:
        return settings.controller
    return step_controller(settings.controller, ts, final_only)
