"""Fuzzing Brownian paths and SDE solves (issue 27): spans from 1e-3 to 1e5 (starting
anywhere within five spans of zero), query intervals from the path's resolution up, and
Ornstein–Uhlenbeck processes of any time scale. Every statistic must be within sampling
error of the law it samples (two-sided bounds at 1e-6, tests/sde_helpers.py):

- increments of `ds.brownian_path` over disjoint intervals (W and its space-time Lévy area
  H), at every scale down to `path.resolution`;
- increments over the accepted steps of an adaptive solve of a long span (up to 1e5
  relaxation times, the tree and floor of the whole span, the first 20 stepped), read from
  a tree of another key (the solve's own are not independent of its steps);
- the mean and variance of OU at the final time of 256 paths, against the exact law.

One compilation per kind of computation (spans, parameters and times are traced).
Profiles as in tests/fuzz_helpers.py: derandomized in CI, `HYPOTHESIS_PROFILE=long` for more.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, strategies as st
from scipy import stats

import difsim as ds

from .fuzz_helpers import fuzz_settings
from .sde_helpers import ALPHA, adaptive_run, chi2_bounds, normal_bound, standardized

OU = ds.models.OrnsteinUhlenbeck()
N_INCREMENTS = 1024
N_PATHS = 256
SPANS = st.floats(-3.0, 5.0).map(lambda u: 10.0**u)
OFFSETS = st.floats(-5.0, 5.0)
SEEDS = st.integers(0, 2**31 - 1)


def _check(z, what):
    lo, hi = chi2_bounds(z.size)
    assert lo < np.mean(z**2) < hi, (what, np.mean(z**2), (lo, hi))
    assert abs(np.mean(z)) < normal_bound(z.size), (what, np.mean(z))


@fuzz_settings(12)
@given(span=SPANS, offset=OFFSETS, log_steps=st.integers(10, 22), scale=st.floats(0, 1),
       seed=SEEDS)  # fmt: skip
@example(span=20000.0, offset=0.0, log_steps=14, scale=0.15, seed=0)  # the path
def test_brownian_path_increments_at_every_scale(span, offset, log_steps, scale, seed):
    t0 = offset * span
    path = ds.brownian_path(OU, jax.random.key(seed), t0, t0 + span, max_steps=2**log_steps)
    slot = span / N_INCREMENTS  # one disjoint interval in each slot, of length dt
    dt = path.resolution * (0.9 * slot / path.resolution) ** scale
    dt = max(dt, float(path.resolution) * (1 + 1e-3))  # (t + dt) - t rounds
    u = np.random.default_rng(seed).uniform(0, 1, N_INCREMENTS)
    ta = t0 + slot * (np.arange(N_INCREMENTS) + u * (1 - dt / slot))
    z_w, z_h = standardized(path, ta, ta + dt)
    _check(z_w, "W")
    _check(z_h, "H")


@fuzz_settings(6)
@given(span=SPANS, offset=OFFSETS, relaxations=st.floats(0.0, 5.0).map(lambda u: 10.0**u),
       seed=SEEDS)  # fmt: skip
@example(span=20000.0, offset=0.0, relaxations=20000.0, seed=0)  # the solve
def test_adaptive_steps_see_brownian_increments(span, offset, relaxations, seed):
    # OU relaxing `relaxations` times over the span (theta = relaxations / span): ~60 steps
    # per relaxation time at the default tolerances, so max_steps for the whole span.
    theta = relaxations / span
    model = OU.replace(theta=theta, sigma=math.sqrt(theta))
    t0 = offset * span
    max_steps = 2 ** max(14, math.ceil(math.log2(150 * relaxations)))
    stop = t0 + min(span, 20 / theta)
    key, other = jax.random.split(jax.random.key(seed))
    ts, _, _ = adaptive_run(model, key, t0, t0 + span, stop, max_steps=max_steps)
    assert ts[-1] == stop and len(ts) > 20
    path = ds.brownian_path(model, other, t0, t0 + span, max_steps=max_steps)
    h = np.diff(ts)
    assert np.all(h[:-1] >= 16 * path.resolution * (1 - 1e-9))  # the floor: 16 leaves
    z_w, z_h = standardized(path, ts[:-1], ts[1:])
    _check(z_w, "W")
    _check(z_h, "H")


@eqx.filter_jit
def _final(model, keys, t0, t1):
    run = lambda k: ds.simulate(model, t0=t0, t1=t1, save="final", key=k, throw=False)  # noqa: E731
    sol = jax.vmap(run)(keys)
    return sol.final["x"], sol.status


@fuzz_settings(6)
@given(span=SPANS, offset=OFFSETS, relaxations=st.floats(0.3, 10.0), mu=st.floats(-2, 2),
       x0=st.floats(-3, 3), noise=st.floats(0.1, 3.0), seed=SEEDS)  # fmt: skip
def test_ornstein_uhlenbeck_moments_at_the_final_time(span, offset, relaxations, mu, x0, noise,
                                                     seed):  # fmt: skip
    theta = relaxations / span
    sigma = noise * math.sqrt(theta)  # a stationary spread of noise / sqrt(2)
    model = OU.replace(theta=theta, mu=mu, sigma=sigma, **{"state.x": x0})
    t0 = offset * span
    keys = jax.random.split(jax.random.key(seed), N_PATHS)
    x, status = _final(model, keys, jnp.asarray(t0), jnp.asarray(t0 + span))
    assert np.all(np.asarray(status) == int(ds.Status.SUCCESS))
    x = np.asarray(x, np.float64)
    a, b, v = (float(q) for q in model.transition(span))
    mean = a * x0 + b
    assert abs(x.mean() - mean) < normal_bound(N_PATHS) * math.sqrt(v)
    # (n - 1) s² / v is chi-square with n - 1 degrees of freedom.
    lo, hi = stats.chi2.ppf([ALPHA / 2, 1 - ALPHA / 2], N_PATHS - 1)
    assert lo < (N_PATHS - 1) * x.var(ddof=1) / v < hi
