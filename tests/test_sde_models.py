"""The stochastic models of the zoo against exact laws: Ornstein–Uhlenbeck's moments (its
moment equations solved by scipy), the double well's mean first-passage time (Monte Carlo
against the exact integral, and the integral against Kramers' rate in the high-barrier
limit), the stochastic SIR's linear (pure recovery) limit and its conservation law.

Monte Carlo tolerances are 5 standard errors of the estimate.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

import difsim as ds
from difsim.models import DoubleWellLangevin, OrnsteinUhlenbeck, StochasticSIR


def test_ornstein_uhlenbeck_moments_solve_the_moment_equations():
    # dm/dt = θ(μ - m), dv/dt = -2θ v + σ², from (x0, 0): the model's closed forms.
    model = OrnsteinUhlenbeck(theta=0.7, mu=-0.3, sigma=0.9)
    t = np.linspace(0.0, 4.0, 9)

    def moments(_, y):
        return [0.7 * (-0.3 - y[0]), -2 * 0.7 * y[1] + 0.9**2]

    ref = solve_ivp(moments, (0.0, 4.0), [1.0, 0.0], t_eval=t, rtol=1e-12, atol=1e-14).y
    np.testing.assert_allclose(model.mean(t), ref[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.variance(t), ref[1], rtol=1e-9, atol=1e-12)
    a, b, v = model.transition(0.5)
    np.testing.assert_allclose([a, b], [np.exp(-0.35), -0.3 * (1 - np.exp(-0.35))], rtol=1e-14)


def test_double_well_first_passage_integral_is_exact_and_tends_to_kramers():
    # The trapezoid rule against scipy's adaptive quadrature of the same double integral.
    well = DoubleWellLangevin(D=0.2)
    V = lambda x: x**4 / 4 - x**2 / 2  # noqa: E731
    inner = lambda y: quad(lambda z: np.exp(-V(z) / 0.2), -np.inf, y, epsabs=0, epsrel=1e-12)[0]  # noqa: E731
    ref = quad(lambda y: np.exp(V(y) / 0.2) * inner(y), -1.0, 1.0, epsrel=1e-10)[0] / 0.2
    assert well.mean_first_passage_time() == pytest.approx(ref, rel=1e-6)
    # Kramers' formula is the high-barrier limit: T k = 1 + O(D / ΔV), the correction
    # shrinking as the barrier ΔV = 1/4 grows against D.
    gaps = []
    for barrier_over_d in (4.0, 8.0, 16.0, 32.0):
        w = DoubleWellLangevin(D=0.25 / barrier_over_d)
        gaps.append(w.mean_first_passage_time() * float(w.kramers_rate()) - 1.0)
    assert all(0 < g < 0.6 / b for g, b in zip(gaps, (4.0, 8.0, 16.0, 32.0)))
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.02


def test_double_well_monte_carlo_first_passage_matches_the_exact_time():
    # ΔV / D = 1 (a cheap barrier: mean time 14.3); paths stop at the other well (x = 1),
    # an event located between steps. Euler–Maruyama's bias at dt = 0.01 (~1 %) is well
    # inside 5 standard errors (~30 % of the spread / sqrt(n)).
    well, n = DoubleWellLangevin(D=0.25), 256
    stop = ds.Event(lambda t, s, m: s.x - 1.0, direction=True)

    def first_passage(key):
        sol = ds.simulate(well, t0=0.0, t1=200.0, save="final", key=key, solver="euler",
                          dt0=0.01, brownian="steps", event=stop, max_steps=30_000)  # fmt: skip
        return sol.t_end, sol.status

    times, status = jax.jit(jax.vmap(first_passage))(jax.random.split(jax.random.key(0), n))
    assert np.all(np.asarray(status) == int(ds.Status.EVENT))
    times = np.asarray(times)
    exact = well.mean_first_passage_time()
    assert abs(times.mean() - exact) < 5 * times.std(ddof=1) / np.sqrt(n)


def test_stochastic_sir_pure_recovery_has_binomial_moments():
    # β = 0: recovery I → R alone, a linear death process, whose chemical Langevin
    # equation has the exact moments of the binomial law: mean I0 e^{-γt}, variance
    # I0 e^{-γt} (1 - e^{-γt}). S + I + R is conserved on every path.
    model, n = StochasticSIR(beta=0.0, state=ds.State(S=0.0, I=1000.0, R=0.0)), 1000
    t = jnp.array([0.0, 1.0, 2.0])

    def one(key):
        return ds.simulate(model, t=t, key=key, solver="euler", dt0=0.01, brownian="steps").ys

    ys = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), n))
    total = np.asarray(ys["S"] + ys["I"] + ys["R"])
    np.testing.assert_allclose(total, 1000.0, rtol=1e-12)
    gamma = float(model.gamma)
    for j, time in enumerate([1.0, 2.0], start=1):
        p = np.exp(-gamma * time)
        mean, var = 1000 * p, 1000 * p * (1 - p)
        infected = np.asarray(ys["I"][:, j])
        assert abs(infected.mean() - mean) < 5 * np.sqrt(var / n)
        assert abs(infected.var(ddof=1) - var) < 5 * var * np.sqrt(2 / (n - 1))


def test_stochastic_sir_declares_two_reaction_channels():
    model = StochasticSIR()
    assert model.noise.dim == 2 and model.is_stochastic()
    sol = ds.simulate(model, t0=0.0, t1=5.0, save=6, key=jax.random.key(2), dt0=0.01)
    assert sol.solver == "Euler"  # multiplicative Itô noise: Euler–Maruyama by default
    assert float(sol.ys["I"][-1]) != pytest.approx(float(sol.ys["I"][0]))
