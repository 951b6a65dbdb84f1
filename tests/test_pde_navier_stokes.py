"""NavierStokes2D against the Taylor–Green vortex, a hand-computed Jacobian, an independent
tight-tolerance solve (ETDRK4's temporal order) and the energy budget dE/dt = -2νZ."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim.models import MODELS, NavierStokes2D

N = 32
GRID = ds.Grid.periodic((N, N), (2 * np.pi, 2 * np.pi))
# Every ETDRK4 solve below saves at these times (multiples of every step used, so no save
# falls inside a step) and goes through one jitted function: the model's parameters and
# initial field, and the step, are traced, so it compiles once for the whole file.
TIMES = jnp.linspace(0.0, 1.0, 17)


def _etdrk4(model, dt):
    """`omega` at `TIMES` by the model's default solver (ETDRK4, fixed step `dt`)."""
    # A Python float would be a static argument of the jitted function: one compile per step.
    return _etdrk4_jit(model, jnp.asarray(dt, jnp.float64))


@eqx.filter_jit
def _etdrk4_jit(model, dt):
    return ds.simulate(model, t=TIMES, dt0=dt, max_steps=512).ys["omega"]


def _free(**kwargs):
    """Freely decaying flow (no forcing, no drag) on the small test grid."""
    return NavierStokes2D(grid=GRID, forcing=0.0, drag=0.0, **kwargs)


def _taylor_green(k, nu, t):
    x, y = GRID.mesh()
    return 2 * k * jnp.cos(k * x) * jnp.cos(k * y) * jnp.exp(-2 * nu * k**2 * t)


def test_registered():
    assert MODELS["navier_stokes"] is NavierStokes2D


def test_non_periodic_grid_is_refused():
    with pytest.raises(ValueError, match="periodic 2-D grid"):
        NavierStokes2D(grid=ds.Grid.neumann((8, 8)))


def test_forcing_beyond_the_dealiased_band_is_refused():
    # 32 points on 2π: the 2/3 rule keeps |k| <= 10.67, which would drop cos(11 y).
    NavierStokes2D(grid=GRID, k_f=10.0)
    with pytest.raises(ValueError, match=r"k_f=11 is beyond the dealiased band .* 10\.67"):
        NavierStokes2D(grid=GRID, k_f=11.0)


def test_taylor_green_is_exact_and_its_advection_vanishes():
    k, nu = 2.0, 0.05
    model = _free(nu=nu)
    state = model.state.with_values({"omega": _taylor_green(k, nu, 0.0)})
    # ω ∝ ψ, so u·∇ω = 0: the nonlinear term vanishes (to rounding), the viscous one is -2νk²ω.
    advection = model.rhs_nonstiff(0.0, state)["omega"]
    assert float(jnp.max(jnp.abs(advection))) < 1e-12
    viscous = model.rhs_stiff(0.0, state)["omega"]
    np.testing.assert_allclose(viscous, -2 * nu * k**2 * state["omega"], rtol=0, atol=1e-12)
    omegas = _etdrk4(model.replace(**{"state.omega": state["omega"]}), 1 / 16)
    for t, omega in zip(np.asarray(TIMES), np.asarray(omegas)):
        np.testing.assert_allclose(omega, _taylor_green(k, nu, t), rtol=0, atol=1e-12)


def test_advection_and_forcing_match_hand_computation():
    # ψ = a sin x + b cos 2y: ω = a sin x + 4b cos 2y, u = (ψ_y, -ψ_x) = (-2b sin 2y, -a cos x),
    # u·∇ω = 6ab cos x sin 2y; the force A sin(k_f y) x̂ adds -A k_f cos(k_f y).
    a, b, amplitude, k_f = 0.7, -0.4, 1.3, 3.0
    model = NavierStokes2D(grid=GRID, forcing=amplitude, k_f=k_f, drag=0.25, nu=0.01)
    x, y = GRID.mesh()
    omega = a * jnp.sin(x) + 4 * b * jnp.cos(2 * y)
    state = model.state.with_values({"omega": omega})
    expected = -6 * a * b * jnp.cos(x) * jnp.sin(2 * y) - amplitude * k_f * jnp.cos(k_f * y)
    np.testing.assert_allclose(model.rhs_nonstiff(0.0, state)["omega"], expected, atol=1e-12)
    ux, uy = model.velocity(omega)
    np.testing.assert_allclose(ux, -2 * b * jnp.sin(2 * y), atol=1e-12)
    np.testing.assert_allclose(uy, -a * jnp.cos(x), atol=1e-12)
    linear = -0.01 * (a * jnp.sin(x) + 16 * b * jnp.cos(2 * y)) - 0.25 * omega
    np.testing.assert_allclose(model.rhs_stiff(0.0, state)["omega"], linear, atol=1e-12)


def test_default_initial_field_has_unit_rms_velocity():
    model = NavierStokes2D(grid=GRID)
    omega = model.initial_state()["omega"]
    ux, uy = model.velocity(omega)
    assert float(jnp.mean(ux**2 + uy**2)) == pytest.approx(1.0, rel=1e-12)
    assert abs(float(jnp.mean(omega))) < 1e-12
    assert not np.allclose(omega, NavierStokes2D(grid=GRID, seed=1).initial_state()["omega"])


def test_etdrk4_is_fourth_order_in_time():
    # A forced, dragged multi-mode flow; the reference is an independent solve of the same
    # semi-discretisation by Tsit5 at tolerance 1e-12 (the flow is not stiff at this ν).
    model = NavierStokes2D(grid=GRID, nu=0.01)
    model = model.replace(**{"state.omega": model.initial_state()["omega"]})
    ref = ds.simulate(model, t=TIMES[::8], solver="tsit5", rtol=1e-12, atol=1e-12)
    ref = np.asarray(ref.ys["omega"][-1])
    dts = 2.0 ** -np.arange(4, 8)  # 1/16 ... 1/128: exact in binary, so steps hit TIMES
    errors = np.array([np.max(np.abs(np.asarray(_etdrk4(model, dt)[-1]) - ref)) for dt in dts])
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - 4) < 0.2, (slope, errors)
    assert errors[-1] < 1e-6 * np.max(np.abs(ref))


def test_energy_decays_at_twice_nu_times_enstrophy():
    # Freely decaying flow from a band-limited (dealiased) field: the dealiased advection
    # exchanges no energy, so dE/dt = -2νZ exactly for the semi-discrete system.
    nu = 0.02
    model = _free(nu=nu)
    omega0 = ds.spectral.dealias(model.initial_state()["omega"], GRID)
    model = model.replace(**{"state.omega": omega0})
    # Instantaneously: dE/dt = ∫ ψ ω_t.
    state = model.state.with_values({"omega": omega0})
    rate = GRID.integrate(model.stream_function(omega0) * model.rhs(0.0, state)["omega"])
    assert float(rate) == pytest.approx(float(-2 * nu * model.enstrophy(omega0)), rel=1e-10)
    # Over a solve: E(1) - E(0) = -2ν ∫ Z dt, by Simpson's rule on the 17 saved states.
    omegas = _etdrk4(model, 1 / 64)
    energy = np.array([float(model.energy(w)) for w in omegas])
    enstrophy = np.array([float(model.enstrophy(w)) for w in omegas])
    weights = np.ones(len(TIMES))
    weights[1:-1:2], weights[2:-1:2] = 4, 2
    integral = float(TIMES[1] - TIMES[0]) / 3 * np.sum(weights * enstrophy)
    assert energy[-1] < 0.9 * energy[0]  # it does decay noticeably
    assert energy[-1] - energy[0] == pytest.approx(-2 * nu * integral, rel=1e-5)
