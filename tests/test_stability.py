"""The fixed-step stability (CFL) check: estimate vs the exact spectral radius, and the
refused steps really are unstable."""

import jax
import numpy as np
import pytest

import difsim as ds
from difsim._core._stability import STABILITY_INTERVAL, _spectral_radius
from difsim._core._vector_field import Layout, VectorField

from .pde_helpers import Heat1D

N = 32
RHO = 4.0 / (1.0 / N) ** 2  # largest |eigenvalue| of the periodic 3-point Laplacian, D = 1


def test_spectral_radius_estimate():
    model = Heat1D()
    state = model.initial_state()
    layout = Layout.of(state)
    # A start vector with every Fourier mode, not the model's single sine mode.
    y0 = layout.pack(state.values)
    rho = float(_spectral_radius(VectorField(layout, "rhs"), 0.0, y0, model))
    assert abs(rho - RHO) / RHO < 0.02


@pytest.mark.parametrize("solver", ["euler", "heun", "tsit5"])
def test_stable_step_runs_and_unstable_step_is_refused(solver):
    cls = {"euler": "Euler", "heun": "Heun", "tsit5": "Tsit5"}[solver]
    beta = next(b for c, b in STABILITY_INTERVAL.items() if c.__name__ == cls)
    limit = beta / RHO
    kw = dict(t0=0.0, t1=200 * limit, save="final", solver=solver, controller="constant")
    sol = ds.simulate(Heat1D(), dt0=0.95 * limit, **kw)
    # The sine mode decays at the semi-discrete rate 4 sin²(π/N)/dx².
    lam = 4 * np.sin(np.pi / N) ** 2 * N**2
    assert abs(float(sol.ys["u"][-1].max()) - np.exp(-lam * kw["t1"])) < 1e-3
    with pytest.raises(ValueError, match=rf"dt0 = .* is unstable for {cls}") as info:
        ds.simulate(Heat1D(), dt0=1.5 * limit, **kw)
    suggested = float(str(info.value).split("Use dt0 <= ")[1].split(",")[0])
    assert abs(suggested - limit) / limit < 0.03


def test_refused_steps_are_really_unstable():
    # Under jit the check cannot run (traced step): the solve itself shows the instability,
    # started from a state with every mode so round-off cannot hide it.
    limit = 2.0 / RHO
    y0 = np.random.default_rng(0).standard_normal(N)

    @jax.jit
    def final(dt):
        model = Heat1D().replace(**{"state.u": y0})
        sol = ds.simulate(
            model, t0=0.0, t1=200 * limit, dt0=dt, save="final", solver="euler",
            controller="constant", throw=False, max_steps=1000,
        )  # fmt: skip
        return sol.ys["u"][-1]

    assert np.max(np.abs(final(0.99 * limit))) < 10
    assert not np.max(np.abs(final(1.2 * limit))) < 1e3


def test_adaptive_and_traced_solves_are_not_checked():
    # An adaptive controller finds its own stable steps: no refusal whatever dt0.
    sol = ds.simulate(Heat1D(), t0=0.0, t1=0.01, dt0=1.0, solver="tsit5", controller="pid")
    assert sol.status == ds.Status.SUCCESS
