"""The ensemble engine's fixed-step SDE methods: every lane integrates the very path the
diffrax engine integrates for its key (`brownian="steps"`), to rounding, for each method
and kind of noise; Euler–Maruyama's strong and weak orders against exact solutions;
per-lane statuses; and Monte Carlo sweeps that give the same numbers on both engines.
"""

import json

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._core import StepBrownianPath
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
