"""The ensemble engine's fixed-step SDE methods: every lane integrates the very path the
diffrax engine integrates for its key (`brownian="steps"`), to rounding, for each method
and kind of noise; Euler–Maruyama's strong and weak orders against exact solutions;
per-lane statuses; and Monte Carlo sweeps that give the same numbers on both engines.
"""

import dataclasses
import functools
import json
import logging

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._core import StepBrownianPath
from difsim._sweep._mc_setup import statistics_setup
from difsim._sweep._monte_carlo import monte_carlo_spec
from difsim._sweep._options import SweepOptions
from difsim._sweep._setup import prepare
from difsim.models import OrnsteinUhlenbeck

LANES = 4
KEYS = jax.random.split(jax.random.key(11), LANES)
SIGMAS = jnp.linspace(0.2, 0.5, LANES)
# Save times on the steps (t0 + k dt0), not evenly spaced, t0 included.
TIMES = dict(t0=0.0, t1=1.0, save=[0.0, 0.25, 0.3, 1.0], dt0=0.05, brownian="steps")


class ItoDiagonal(ds.Model):
    """Multiplicative diagonal noise, two scalar variables (a packed state)."""

    sigma: float = ds.param(0.3)
    state = ds.State(x=ds.Var(1.0), v=ds.Var(0.5))

    def rhs(self, t, s):
        return dict(x=0.5 * s.x - s.v, v=-s.v + jnp.sin(s.x))

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x, v=0.2 * s.v * s.x)


class ItoGeneral(ItoDiagonal):
    noise = ds.Noise(dim=3)

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x * jnp.array([1.0, 0.5, -0.2]), v=0.3 * s.v * jnp.ones(3))


class StratonovichMixed(ds.Model):
    """Multiplicative diagonal Stratonovich noise, variables of different shapes (a state
    the diffrax engine keeps as a dict)."""

    noise = ds.Noise(calculus="stratonovich")
    sigma: float = ds.param(0.3)
    state = ds.State(x=ds.Var(1.0), u=ds.Var(jnp.array([0.5, -0.2])))

    def rhs(self, t, s):
        return dict(x=0.1 * s.x + jnp.sum(s.u), u=-s.u * s.x)

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x, u=0.3 * s.u * s.x)


class StratonovichGeneral(StratonovichMixed):
    noise = ds.Noise(dim=2, calculus="stratonovich")

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x * jnp.array([1.0, 0.5]),
                    u=0.3 * s.u[:, None] * jnp.array([[0.0, 1.0]]))  # fmt: skip


class AdditiveGeneral(ds.Model):
    """Additive noise depending on time (ShARK's and SRA1's correction term)."""

    noise = ds.Noise(dim=2)
    sigma: float = ds.param(0.3)
    state = ds.State(x=ds.Var(1.0), y=ds.Var(0.0))

    def rhs(self, t, s):
        return dict(x=-s.x + jnp.sin(s.y), y=s.x - s.y**3)

    def diffusion(self, t, s):
        return dict(x=self.sigma * jnp.array([1.0 + t, 0.5]), y=jnp.array([0.2, jnp.cos(t)]))


# Each method once, diagonal and general noise across them (Euler–Maruyama with diagonal
# noise below, beside NONFINITE lanes): two compiles per case.
CASES = [
    (ItoGeneral, "euler"),
    (StratonovichMixed, "heun"),
    (StratonovichGeneral, "euler_heun"),
    (OrnsteinUhlenbeck, "shark"),
    (AdditiveGeneral, "sra1"),
]


def _ensemble_lanes(model, keys, sigmas, **kw):
    """The ensemble engine's solve of the same lanes (compiled, as a sweep runs it)."""
    run = lambda k, s: ds.simulate_ensemble(model, {"sigma": s}, keys=k, **kw)  # noqa: E731
    return jax.jit(run)(keys, sigmas)


def _diffrax_lanes(model, keys, sigmas, **kw):
    """`jax.vmap(ds.simulate)` over the lanes: the diffrax engine's solves."""
    run = lambda k, s: ds.simulate(model.replace(sigma=s), key=k, throw=False, **kw)  # noqa: E731
    return jax.jit(jax.vmap(run))(keys, sigmas)


@pytest.mark.parametrize("cls, solver", CASES, ids=[f"{c.__name__}-{s}" for c, s in CASES])
def test_lanes_integrate_the_diffrax_engines_paths(cls, solver):
    model = cls()
    kw = dict(TIMES, solver=solver)
    ens = _ensemble_lanes(model, KEYS, SIGMAS, **kw)
    ref = _diffrax_lanes(model, KEYS, SIGMAS, **kw)
    assert ens.ys.keys() == ref.ys.keys()
    for var in ens.ys:
        assert ens.ys[var].shape == ref.ys[var].shape
        np.testing.assert_allclose(ens.ys[var], ref.ys[var], rtol=1e-12, atol=1e-13)
    # The paths differ from lane to lane, and the noise moved them.
    x = np.asarray(ens.ys[next(iter(ens.ys))])[:, -1].reshape(LANES, -1)[:, 0]
    assert np.unique(x.round(8)).size == LANES
    np.testing.assert_array_equal(ens.status, 0)
    np.testing.assert_array_equal(ens.num_steps, 20)


class Blowup(ds.Model):
    """dX = a X^3 dt + 0.3 X dW (Itô): finite-time blow-up for a > 0."""

    a: float = ds.param(0.0)
    state = ds.State(x=ds.Var(1.0))

    def rhs(self, t, s):
        return dict(x=self.a * s.x**3)

    def diffusion(self, t, s):
        return dict(x=0.3 * s.x)


def _lanes_of_both_engines(model, points, **kw):
    keys = KEYS[: next(iter(points.values())).shape[0]]
    ens = jax.jit(lambda k, p: ds.simulate_ensemble(model, p, keys=k, **kw))(keys, points)

    def one(k, p):
        return ds.simulate(model.replace(**p), key=k, throw=False, **kw)

    return ens, jax.jit(jax.vmap(one))(keys, points)


def test_nonfinite_lanes_stop_beside_healthy_ones():
    # Euler–Maruyama, diagonal noise. a = 8 blows up (to inf, then NaN) before t = 0.5.
    points = {"a": jnp.array([0.0, 8.0, 0.5, 8.0])}
    kw = dict(TIMES, save=[0.0, 0.05, 0.5, 1.0], solver="euler")
    ens, ref = _lanes_of_both_engines(Blowup(), points, **kw)
    bad = np.array([False, True, False, True])
    np.testing.assert_array_equal(ens.status, np.where(bad, ds.Status.NONFINITE, 0))
    np.testing.assert_array_equal(ref.status, ens.status)
    np.testing.assert_allclose(ens.ys["x"][~bad], ref.ys["x"][~bad], rtol=1e-12)
    # Before the blow-up, the same values; from it on, NaN (the lane stopped there).
    np.testing.assert_allclose(ens.ys["x"][bad, :2], ref.ys["x"][bad, :2], rtol=1e-12)
    assert np.all(np.isnan(ens.ys["x"][bad, 2:])) and not np.any(np.isfinite(ref.ys["x"][bad, 2:]))
    steps = np.asarray(ens.num_steps)
    assert np.all(steps[~bad] == 20) and np.all((steps[bad] > 1) & (steps[bad] < 10))


def test_max_steps_ends_every_lane_where_diffrax_does():
    points = {"a": jnp.array([0.0, 0.5])}
    kw = dict(TIMES, solver="euler", max_steps=8)  # 20 steps needed; 0.3 is step 6
    ens, ref = _lanes_of_both_engines(Blowup(), points, **kw)
    np.testing.assert_array_equal(ens.status, ds.Status.MAX_STEPS)
    np.testing.assert_array_equal(ref.status, ds.Status.MAX_STEPS)
    np.testing.assert_array_equal(ens.num_steps, 8)
    np.testing.assert_allclose(ens.ys["x"][:, :3], ref.ys["x"][:, :3], rtol=1e-12)
    assert np.all(np.isnan(ens.ys["x"][:, 3:])) and np.all(np.isnan(ref.ys["x"][:, 3:]))


class TrackedGBM(ds.Model):
    """Geometric Brownian motion `x` beside the Brownian motion `w` that drives it and its
    time integral `z` (one Brownian motion for all: general noise). Euler–Maruyama keeps
    `w` exact, so `x`'s exact solution `exp((mu - sigma^2/2) t + sigma w)` is known on every
    path; `(w, z)` is an additive-noise SDE whose exact `z` needs the path's space-time
    Lévy areas."""

    noise = ds.Noise(dim=1)
    mu: float = ds.param(1.0)
    sigma: float = ds.param(0.2)
    state = ds.State(x=ds.Var(1.0), w=ds.Var(0.0), z=ds.Var(0.0))

    def rhs(self, t, s):
        return dict(x=self.mu * s.x, w=jnp.zeros_like(s.w), z=s.w)

    def diffusion(self, t, s):
        return dict(x=self.sigma * s.x * jnp.ones(1), w=jnp.ones(1))


ORDER_LANES = 8192
ORDER_DTS = [1 / 8, 1 / 16, 1 / 32]
# Half the lanes with a strong drift and weak noise, whose weak error (O(h) in the drift)
# dominates; half with strong noise and weak drift, whose strong error is the noise's
# O(h^0.5) (with the first set's, the drift's O(h) would hide it).
ORDER_POINTS = {
    "mu": np.repeat([1.0, 0.05], ORDER_LANES // 2),
    "sigma": np.repeat([0.2, 1.0], ORDER_LANES // 2),
}


@jax.jit
def _exact_integral_of_w(keys, dt):
    """`∫_0^1 W dt` of each lane's step-lattice path of step `dt` (and `W(1)`): over a step
    of length h from W_k, `h (W_k + ΔW_k / 2 + H_k)` with H_k the step's space-time Lévy
    area, drawn here from the path itself (`StepBrownianPath`, whose increments the engine
    draws). Steps beyond `1 / dt` (up to the finest step's count) are masked: one compile."""
    shape = jax.ShapeDtypeStruct((1,), jnp.float64)
    k = jnp.arange(round(1 / min(ORDER_DTS)))
    live = k < jnp.round(1 / dt)

    def lane(key):
        path = StepBrownianPath(0.0, 1.0, dt, key, shape, dfx.SpaceTimeLevyArea)
        inc = jax.vmap(lambda a: path.evaluate(a, a + dt, use_levy=True))(k * dt)
        w, hh = jnp.where(live, inc.W[:, 0], 0.0), jnp.where(live, inc.H[:, 0], 0.0)
        start = jnp.cumsum(w) - w
        return jnp.sum(jnp.where(live, dt * (start + w / 2 + hh), 0.0)), jnp.sum(w)

    return jax.vmap(lane)(keys)


def _slope(dts, errors) -> float:
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])


def test_euler_maruyama_strong_and_weak_orders_against_exact_solutions():
    model, keys = TrackedGBM(), jax.random.split(jax.random.key(5), ORDER_LANES)
    mu, sigma = ORDER_POINTS["mu"], ORDER_POINTS["sigma"]
    weak, strong = mu == 1.0, mu != 1.0
    errors = {k: [] for k in ("strong x", "strong z", "weak mean", "weak square")}
    for dt in ORDER_DTS:
        sol = _ensemble_final(model, keys, ORDER_POINTS, dt)
        x, w, z = (np.asarray(sol[v][:, -1]) for v in ("x", "w", "z"))
        exact_x = np.exp((mu - sigma**2 / 2) + sigma * w)
        exact_z, w_path = (np.asarray(a) for a in _exact_integral_of_w(keys, dt))
        # The engine's w is the path's W(1): the increments are the path's.
        np.testing.assert_allclose(w, w_path, rtol=1e-12, atol=1e-13)
        errors["strong x"].append(np.mean(np.abs(x - exact_x)[strong]))
        errors["strong z"].append(np.mean(np.abs(z - exact_z)))
        # Weak errors E[f(X_h)] - E[f(X)], estimated on paired paths (the exact solution of
        # the same path has the exact mean: the pairing only removes sampling noise).
        errors["weak mean"].append(abs(np.mean((x - exact_x)[weak])))
        errors["weak square"].append(abs(np.mean((x**2 - exact_x**2)[weak])))
    orders = {k: _slope(ORDER_DTS, v) for k, v in errors.items()}
    expected = {"strong x": 0.5, "strong z": 1.0, "weak mean": 1.0, "weak square": 1.0}
    assert orders == pytest.approx(expected, abs=0.2)


@eqx.filter_jit  # the step (a Python float) static
def _ensemble_final(model, keys, points, dt):
    sol = ds.simulate_ensemble(model, points, keys=keys, t0=0.0, t1=1.0, save="final",
                               solver="euler", dt0=dt, brownian="steps")  # fmt: skip
    return sol.ys


MC_KEEP = ["x_mean", "x_var", "x_max"]
MC_CONFIG = {
    "model": {"name": "ornstein_uhlenbeck", "parameters": {"mu": 0.5}},
    "time": {"t0": 0.0, "t1": 1.0, "save": 5},
    "solver": {"name": "euler", "dt0": 0.05, "brownian": "steps", "dtype": "float64"},
    "sweep": {"samples": 96, "seed": 3, "sigma": [0.3, 0.6], "keep": MC_KEEP},
}


def _settings(data) -> dict:
    described = json.loads(data.attrs["sweep_settings"])
    return {k: v for k, v in described.items() if k != "engine"}


def test_monte_carlo_sweeps_give_the_same_numbers_on_both_engines():
    spec = ds.GridSweep({"sigma": [0.3, 0.6]})
    common = dict(t0=0.0, t1=1.0, save=5, solver="euler", dt0=0.05, brownian="steps")
    model = OrnsteinUhlenbeck(mu=0.5)
    stats = {
        engine: ds.sweep(model, spec, samples=96, seed=3, keep=MC_KEEP, engine=engine, **common)
        for engine in ("auto", "diffrax")
    }
    config = ds.run_config(MC_CONFIG, plot=False)
    assert stats["auto"].attrs["engine"] == config.attrs["engine"] == "ensemble"
    assert "engine_fallback" not in config.attrs
    assert stats["diffrax"].attrs["engine"] == "diffrax"
    for name in MC_KEEP:
        ref = stats["diffrax"][name].values
        assert np.all(np.isfinite(ref))
        for data in (stats["auto"], config):
            np.testing.assert_allclose(data[name].values, ref, rtol=1e-12, atol=1e-14)
    # One hash per engine; everything else the sweep is identified by is the same, from
    # Python or from a config. (That the statistics are those of the same paths kept whole
    # is tests/test_monte_carlo.py's, both on the ensemble engine now.)
    assert config.attrs["sweep_hash"] == stats["auto"].attrs["sweep_hash"]
    assert stats["auto"].attrs["sweep_hash"] != stats["diffrax"].attrs["sweep_hash"]
    assert _settings(stats["auto"]) == _settings(stats["diffrax"]) == _settings(config)


def test_what_the_ensemble_engine_cannot_run_falls_back_with_its_reason(caplog):
    model, base = OrnsteinUhlenbeck(), ds.GridSweep({"sigma": [0.3]})
    common = dict(t0=0.0, t1=1.0, save=5, dt0=0.05, samples=4)
    for given, reason in [
        (dict(solver="milstein", brownian="steps"), "SDE solver 'milstein' has no ensemble"),
        (dict(solver="euler"), "brownian='tree': the ensemble engine draws each fixed step"),
        (dict(solver="shark", dt0=None), "adaptive steps: the ensemble engine takes fixed"),
    ]:
        for keep in ("final", ["x_mean"]):  # paths kept, statistics streamed
            options = SweepOptions(**{**common, **given}, keep=keep)
            spec, statistics = monte_carlo_spec(model, base, options)
            with caplog.at_level(logging.INFO, logger="difsim"):
                setup = (statistics_setup if statistics else prepare)(model, spec, options)
            attrs = setup.attrs if statistics else setup.layout.attrs
            assert attrs["engine"] == "diffrax" and reason in attrs["engine_fallback"]
            assert f"the diffrax engine runs this sweep ({reason}" in caplog.text
            caplog.clear()
            insist = dataclasses.replace(options, engine="ensemble")
            with pytest.raises(ValueError, match=f"'ensemble' cannot run this sweep: {reason}"):
                (statistics_setup if statistics else prepare)(model, spec, insist)
    with pytest.raises(ValueError, match="pass brownian='steps'"):
        ds.simulate_ensemble(model, {}, keys=KEYS, t0=0.0, t1=1.0, solver="euler", dt0=0.1)
    with pytest.raises(ValueError, match="OrnsteinUhlenbeck is stochastic: give each lane"):
        ds.simulate_ensemble(model, {"sigma": SIGMAS}, t0=0.0, t1=1.0, dt0=0.1)
    with pytest.raises(ValueError, match=r"points\['sigma'\] has 4 lanes, the others \(keys"):
        ds.simulate_ensemble(model, {"sigma": SIGMAS}, keys=KEYS[:2], t0=0.0, t1=1.0,
                             save="final", solver="euler", dt0=0.1, brownian="steps")  # fmt: skip


GRADIENT_KW = dict(TIMES, save="final", solver="euler")


@functools.cache
def _diffrax_gradient():
    """diffrax's gradient of the loss below (`jax.vmap(ds.simulate)`, the default adjoint):
    the same for both of the ensemble engine's adjoints, computed once."""

    def loss(sigmas):
        model = ItoDiagonal()
        one = lambda k, s: ds.simulate(model.replace(sigma=s), key=k, **GRADIENT_KW).ys["x"][-1]  # noqa: E731
        return jnp.sum(jax.vmap(one)(KEYS, sigmas) ** 2)

    return np.asarray(jax.jit(jax.grad(loss))(SIGMAS))


@pytest.mark.parametrize("adjoint", ["forward", "checkpoint"])
def test_pathwise_gradients_match_the_diffrax_engine_and_finite_differences(adjoint):
    # With the keys fixed the path is a deterministic function of the parameters: forward
    # and reverse mode through the engine's SDE loop against diffrax's gradient of the same
    # paths and against central differences (of the values the same compiled function
    # returns beside its gradient).
    def loss_ensemble(sigmas):
        sol = ds.simulate_ensemble(
            ItoDiagonal(), {"sigma": sigmas}, keys=KEYS, adjoint=adjoint, **GRADIENT_KW
        )
        return jnp.sum(sol.ys["x"][:, -1] ** 2)

    value_and_grad = jax.jit(jax.value_and_grad(loss_ensemble))
    _, grad = value_and_grad(SIGMAS)
    np.testing.assert_allclose(grad, _diffrax_gradient(), rtol=1e-10, atol=1e-12)
    h = 1e-6
    value = lambda sigmas: value_and_grad(sigmas)[0]  # noqa: E731
    fd = [
        (value(SIGMAS.at[i].add(h)) - value(SIGMAS.at[i].add(-h))) / (2 * h) for i in range(LANES)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
    assert np.all(np.abs(np.asarray(grad)) > 1e-3)  # the noise's scale matters
