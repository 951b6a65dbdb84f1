"""Stochastic models in `simulate`: exact moments (Ornstein–Uhlenbeck, general noise), exact
paths (geometric Brownian motion on the solver's own Brownian path), pathwise gradients
against finite differences, keys and Brownian paths, and the errors that name the culprit.

Monte Carlo tolerances are 5 standard errors of the estimate (never tuned by hand): for a
mean, `sqrt(var / n)`; for a variance, `var * sqrt(2 / (n - 1))` (normal data).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim.models import OrnsteinUhlenbeck

N = 1000  # paths of the moment checks
KEYS = jax.random.split(jax.random.key(0), N)


class GBM(ds.Model):
    """dX = μ X dt + σ X dW (Itô)."""

    mu: float = 0.3
    sigma: float = 0.6
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=self.mu * s.x)

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x)


class StratonovichGBM(GBM):
    noise = ds.Noise(calculus="stratonovich")


class StratonovichOU(OrnsteinUhlenbeck):
    noise = ds.Noise(calculus="stratonovich")


class Mixed(ds.Model):
    """Two variables driven by two shared Brownian motions (general, additive noise)."""

    noise = ds.Noise(dim=2)
    state = ds.State(x=0.0, y=1.0)

    def rhs(self, t, s):
        return dict(x=jnp.zeros_like(s.x), y=jnp.zeros_like(s.y))

    def diffusion(self, t, s):
        return dict(x=jnp.array([1.0, 0.5]), y=jnp.array([-0.3, 2.0]))


@functools.cache
def _ou_paths(solver, dt0, brownian="tree"):
    """OU at t = 0.5, 1, 2 for `N` paths (compiled once per setting)."""

    def one(key):
        sol = ds.simulate(OrnsteinUhlenbeck(mu=0.5), t=jnp.array([0.0, 0.5, 1.0, 2.0]),
                          key=key, solver=solver, dt0=dt0, brownian=brownian)  # fmt: skip
        return sol.ys["x"]

    return np.asarray(jax.jit(jax.vmap(one))(KEYS))


def _check_moments(samples, mean, variance):
    n = samples.shape[0]
    assert abs(samples.mean() - mean) < 5 * np.sqrt(variance / n)
    assert abs(samples.var(ddof=1) - variance) < 5 * variance * np.sqrt(2 / (n - 1))


@pytest.mark.parametrize(
    "solver, dt0, brownian",
    [(None, None, "tree"), ("euler", 2.0**-7, "tree"), ("euler", 2.0**-7, "steps")],
)
def test_ornstein_uhlenbeck_moments_are_exact(solver, dt0, brownian):
    # The default (ShARK, adaptive) and Euler–Maruyama with either Brownian path. Euler's
    # weak error in the variance, θ dt / 2 relative (here 0.4 %), is far below 5 SE (22 %).
    model = OrnsteinUhlenbeck(mu=0.5)
    x = _ou_paths(solver, dt0, brownian)
    assert np.all(x[:, 0] == 1.0)
    for i, t in enumerate([0.5, 1.0, 2.0], start=1):
        _check_moments(x[:, i], float(model.mean(t)), float(model.variance(t)))


def test_general_noise_covariance_is_exact():
    # dX = G dW with constant G (2 x 2): Cov(X_T) = G Gᵀ T, the mean stays put.
    g = np.array([[1.0, 0.5], [-0.3, 2.0]])
    # Zero drift and a constant diffusion: Euler–Maruyama is exact, one step of 2.
    solve = lambda k: ds.simulate(Mixed(), t0=0.0, t1=2.0, save="final", key=k, dt0=2.0,  # noqa: E731
                                  solver="euler", brownian="steps").final  # fmt: skip
    run = jax.vmap(solve)
    out = run(KEYS)
    xy = np.stack([np.asarray(out["x"]), np.asarray(out["y"])], axis=1)
    cov, n = 2.0 * g @ g.T, N
    _check_moments(xy[:, 0], 0.0, cov[0, 0])
    _check_moments(xy[:, 1], 1.0, cov[1, 1])
    # Correlation's standard error: (1 - ρ²) / √n.
    rho = cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1])
    assert abs(np.corrcoef(xy.T)[0, 1] - rho) < 5 * (1 - rho**2) / np.sqrt(n)


@pytest.mark.parametrize(
    "cls, solver, used", [(GBM, "milstein", "ItoMilstein"), (StratonovichGBM, None, "Heun")]
)
def test_geometric_brownian_motion_follows_its_exact_path(cls, solver, used):
    # X_T = exp((μ - σ²/2) T + σ W_T) (Itô), exp(μ T + σ W_T) (Stratonovich), with W_T read
    # from the path the solver integrated against. Milstein/Heun are strong order 1: a
    # 2^-10 step leaves an error of order 1e-3 (checked at 2 %, its scale here). The
    # Stratonovich model takes the default solver for its multiplicative noise: Heun.
    model, dt = cls(), 2.0**-10
    for key in jax.random.split(jax.random.key(3), 4):
        x = ds.simulate(model, t0=0.0, t1=1.0, save="final", key=key, solver=solver, dt0=dt)
        assert x.solver == used
        w = ds.brownian_path(model, key, 0.0, 1.0, solver=solver, dt0=dt).evaluate(0.0, 1.0)
        drift = model.mu - (0.5 * model.sigma**2 if cls is GBM else 0.0)
        exact = np.exp(drift + model.sigma * float(w[0]))
        assert float(x.final["x"]) == pytest.approx(exact, rel=2e-2)


def test_one_key_is_one_path_for_any_steps():
    # The tree answers every step size from the same path: an adaptive ShARK solve and a
    # fine fixed-step one agree to their accuracy; the same key twice agrees exactly.
    # (Adaptive steps land on the save times: saved values are simulated, not interpolated.)
    model, key = OrnsteinUhlenbeck(), jax.random.key(11)
    adaptive = ds.simulate(model, t0=0.0, t1=1.0, save=3, key=key, rtol=1e-4, atol=1e-4)
    fixed = ds.simulate(model, t0=0.0, t1=1.0, save=3, key=key, dt0=2.0**-8, solver="shark")
    again = ds.simulate(model, t0=0.0, t1=1.0, save=3, key=key, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adaptive.ys["x"], fixed.ys["x"], atol=1e-3)
    # The default for additive noise is ShARK, adaptive: fewer steps than the fixed 2^8.
    assert adaptive.solver == "ShARK" and 0 < int(adaptive.num_accepted_steps) < 2**8
    np.testing.assert_array_equal(adaptive.ys["x"], again.ys["x"])
    other = ds.simulate(model, t0=0.0, t1=1.0, save=3, key=jax.random.key(12), rtol=1e-4, atol=1e-4)
    assert np.max(np.abs(other.ys["x"] - adaptive.ys["x"])) > 1e-2


@pytest.mark.parametrize("brownian", ["tree", "steps"])
def test_pathwise_gradient_matches_finite_differences(brownian):
    # d X_T / d(μ, σ) through a fixed key (reverse mode, checkpointed): the derivative of
    # the very same discrete path, so central differences agree to their own error.
    key = jax.random.key(5)

    def final(mu, sigma):
        sol = ds.simulate(GBM(mu=mu, sigma=sigma), t0=0.0, t1=1.0, save="final", key=key,
                          solver="milstein", dt0=2.0**-8, brownian=brownian)  # fmt: skip
        return sol.final["x"]

    # Jitted whole (one program); the finite differences read the value off it too.
    value_and_grad = jax.jit(jax.value_and_grad(final, argnums=(0, 1)))
    grad = value_and_grad(0.3, 0.6)[1]
    value = lambda mu, sigma: value_and_grad(mu, sigma)[0]  # noqa: E731
    h = 1e-6
    fd_mu = (value(0.3 + h, 0.6) - value(0.3 - h, 0.6)) / (2 * h)
    fd_sigma = (value(0.3, 0.6 + h) - value(0.3, 0.6 - h)) / (2 * h)
    np.testing.assert_allclose([grad[0], grad[1]], [fd_mu, fd_sigma], rtol=1e-6)


def test_keys_are_checked():
    with pytest.raises(ValueError, match="OrnsteinUhlenbeck is stochastic.*key=jax.random.key"):
        ds.simulate(OrnsteinUhlenbeck(), t0=0.0, t1=1.0)
    with pytest.raises(ValueError, match="Lorenz has no noise.*remove key"):
        ds.simulate(ds.models.Lorenz(), t0=0.0, t1=1.0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="holds \\(3,\\) keys"):
        ds.simulate(OrnsteinUhlenbeck(), t0=0.0, t1=1.0, key=jax.random.split(jax.random.key(0), 3))
    with pytest.raises(TypeError, match="key must be a JAX PRNG key"):
        ds.simulate(OrnsteinUhlenbeck(), t0=0.0, t1=1.0, key=3)
    raw = jax.random.PRNGKey(0)  # a raw uint32 key works like its typed twin
    typed = jax.random.wrap_key_data(raw)
    run = dict(t0=0.0, t1=1.0, save=3, solver="euler", dt0=0.5, brownian="steps")
    a = ds.simulate(OrnsteinUhlenbeck(), key=raw, **run).ys["x"]
    b = ds.simulate(OrnsteinUhlenbeck(), key=typed, **run).ys["x"]
    np.testing.assert_array_equal(a, b)


def test_solvers_are_checked_against_the_noise():
    key = jax.random.key(0)
    run = functools.partial(ds.simulate, t0=0.0, t1=1.0, key=key)
    with pytest.raises(ValueError, match="'tsit5' \\(an ODE solver\\) is not an SDE solver"):
        run(GBM(), solver="tsit5")
    with pytest.raises(ValueError, match="'heun' converges to the Stratonovich solution.*Itô"):
        run(GBM(), solver="heun", dt0=0.01)
    with pytest.raises(ValueError, match="'euler' converges to the Itô solution"):
        run(StratonovichGBM(), solver="euler", dt0=0.01)
    with pytest.raises(ValueError, match="'shark' needs additive noise.*GBM.diffusion depends"):
        run(GBM(), solver="shark", dt0=0.01)
    # The defaults without a step: Euler–Maruyama (Itô noise that depends on the state)
    # takes fixed steps; additive noise adapts with ShARK, in either calculus (the two
    # agree). (Heun, the Stratonovich default: test_geometric_brownian_motion_....) The
    # solver a solve picks is a static field of its Solution: traced (`jax.eval_shape`),
    # not compiled; what the picked solvers compute is checked by the tests above.
    with pytest.raises(ValueError, match="'euler' takes fixed steps: give the step dt0"):
        run(GBM())
    assert _traced(run, StratonovichOU(), save="final").solver == "ShARK"
    with pytest.raises(ValueError, match="'milstein' has no embedded error estimate"):
        run(GBM(), solver="milstein", controller="pid")
    with pytest.raises(ValueError, match="brownian='steps'.*needs fixed steps"):
        run(OrnsteinUhlenbeck(), brownian="steps")
    with pytest.raises(ValueError, match="backsolve.*does not support stochastic models"):
        run(OrnsteinUhlenbeck(), adjoint="backsolve")
    # Additive noise: Itô and Stratonovich agree, so a Stratonovich solver is fine.
    assert _traced(run, OrnsteinUhlenbeck(), solver="heun", dt0=0.01).solver == "Heun"


def _traced(fn, *args, **kw):
    """`fn(*args, **kw)` traced, not compiled: its output's shapes and static fields."""
    return jax.eval_shape(lambda: fn(*args, **kw))


class _Bad(ds.Model):
    state = ds.State(x=0.0, v=ds.Var(jnp.zeros(3)))

    def rhs(self, t, s):
        return dict(x=-s.x, v=-s.v)


def test_diffusion_shapes_and_names_are_checked():
    def with_diffusion(fn, noise=None):
        attrs = {"diffusion": lambda self, t, s: fn(s)}
        if noise is not None:
            attrs["noise"] = noise
        return type("Bad", (_Bad,), attrs)()

    run = functools.partial(ds.simulate, t0=0.0, t1=1.0, save=11, key=jax.random.key(0), dt0=0.1,
                            solver="euler", brownian="steps")  # fmt: skip
    with pytest.raises(ValueError, match="returned shape \\(2,\\) for state variable 'v'"):
        run(with_diffusion(lambda s: dict(v=jnp.ones(2))))
    with pytest.raises(ValueError, match="returned 'w', which is not a state variable"):
        run(with_diffusion(lambda s: dict(w=1.0)))
    with pytest.raises(TypeError, match="must return a dict"):
        run(with_diffusion(lambda s: jnp.ones(4)))
    general = ds.Noise(dim=2)
    with pytest.raises(ValueError, match="'x'; expected \\(2,\\): .* one column per Brownian"):
        run(with_diffusion(lambda s: dict(x=1.0), general))
    with pytest.raises(ValueError, match="'v'; expected \\(3, 2\\)"):
        run(with_diffusion(lambda s: dict(x=jnp.ones(2), v=jnp.ones((2, 2))), general))
    # Right shapes solve; x, left out, has no noise: from 0 it stays at 0.
    sol = run(with_diffusion(lambda s: dict(v=0.1 * jnp.ones(3))))
    assert np.all(np.asarray(sol.ys["x"]) == 0.0)
    assert np.all(np.abs(np.asarray(sol.ys["v"][-1])) > 0)


def test_noise_declaration_is_checked():
    with pytest.raises(ValueError, match="number of Brownian motions"):
        ds.Noise(dim=0)
    with pytest.raises(ValueError, match="'ito' or 'stratonovich'"):
        ds.Noise(calculus="ito-ish")

    class Clash(ds.Model):
        noise: float = 0.1  # a parameter named like the declaration
        state = ds.State(x=0.0)

        def rhs(self, t, s):
            return dict(x=-s.x)

        def diffusion(self, t, s):
            return dict(x=self.noise)

    with pytest.raises(TypeError, match="Clash.noise must be a ds.Noise"):
        ds.simulate(Clash(), t0=0.0, t1=1.0, key=jax.random.key(0))
