"""The Brownian path of an SDE solve is Brownian at every scale a solve or a user queries
(issue 27, point 3): `ds.brownian_path` on a long span, the accepted steps of an adaptive
solve there, the floor under those steps, and the refusal of increments finer than the
path resolves.

A `diffrax.VirtualBrownianTree` draws one Brownian-bridge sample per leaf: two times in
one leaf are not jointly Brownian. Before the fix the tree's leaf was `(t1 - t0) / 2**16`
whatever the steps: on [0, 20000] 0.305, where adaptive steps are ~0.03, and increments
of `ds.brownian_path(OU(), key, 0, 20000)` had Var[ΔW]/Δt = 0.113 at Δt = 0.01 and 0.41 at
0.05. Each statistic here is a mean of squared standardized increments over disjoint
intervals, which for a Brownian path is chi-square(n)/n: checked two-sided at 1e-6.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

from .sde_helpers import adaptive_run, chi2_bounds, normal_bound, standardized

OU = ds.models.OrnsteinUhlenbeck()
SPAN = 20000.0


def _inside(z, what):
    lo, hi = chi2_bounds(z.size)
    assert lo < np.mean(z**2) < hi, (what, np.mean(z**2), (lo, hi))


def _old_tree(path, key):
    """The tree of the same span before the fix: leaves of (t1 - t0) / 2**16."""
    t0, t1 = path.t0, path.t1
    return dfx.VirtualBrownianTree(t0, t1, tol=(t1 - t0) * 2.0**-16, shape=path.path.shape,
                                   key=key, levy_area=path.levy_area)  # fmt: skip


@pytest.mark.parametrize("dt", [0.01, 0.05])
def test_brownian_path_on_a_long_span_has_brownian_increments(dt):
    # The case: 20000 disjoint increments of length dt (one in each unit interval,
    # at a random place in it), of W and of the space-time Lévy area H (ShARK's, the
    # default solver's), standardized.
    path = ds.brownian_path(OU, jax.random.key(0), 0.0, SPAN)
    assert path.resolution == SPAN * 2.0**-21  # (t1 - t0) / (128 · max_steps), 16384 steps
    n = int(SPAN)
    ta = np.arange(n) + np.random.default_rng(1).uniform(0, 1 - dt, n)
    z_w, z_h = standardized(path, ta, ta + dt)
    _inside(z_w, "W")
    _inside(z_h, "H")
    assert abs(np.mean(z_w)) < normal_bound(n)
    # The same statistic of the old tree is far outside (it can fail): ~0.11 and ~0.41.
    z_old, _ = standardized(_old_tree(path, jax.random.key(0)), ta, ta + dt)
    assert np.mean(z_old**2) < 0.5


def test_adaptive_steps_on_a_long_span_see_brownian_increments():
    # A ShARK solve of OU on [0, 20000] needs ~1.3e6 steps (accepted and rejected), so
    # max_steps = 2**21; its steps on the first 200 time units (what stepping up to 200
    # does not change) are the solver's own step sizes. The increments over them of a
    # tree built like the solve's (same span and max_steps) but from another key, so that
    # they do not depend on the steps (the solve's own increments do: a step is rejected
    # for its noise), are Brownian; the old tree's at the same steps are not.
    key, other = jax.random.split(jax.random.key(3))
    ts, _, settings = adaptive_run(OU, key, 0.0, SPAN, 200.0, max_steps=2**21)
    h = np.diff(ts)
    assert len(h) > 5000 and 0.01 < np.median(h) < 0.05  # the "steps ~0.03"
    path = ds.brownian_path(OU, other, 0.0, SPAN, max_steps=2**21)
    dtmin = SPAN / (8 * 2**21)  # the controller's floor; the tree resolves 1/16 of it
    assert path.resolution == pytest.approx(dtmin / 16) and h[:-1].min() >= dtmin
    z_w, z_h = standardized(path, ts[:-1], ts[1:])
    _inside(z_w, "W")
    _inside(z_h, "H")
    z_old, _ = standardized(_old_tree(path, other), ts[:-1], ts[1:])
    assert np.mean(z_old**2) < 0.5


def test_the_helper_takes_the_steps_simulate_takes():
    key = jax.random.key(4)
    ts, ys, _ = adaptive_run(OU, key, 0.0, 5.0, 5.0, max_steps=16384)
    sol = ds.simulate(OU, t0=0.0, t1=5.0, save="final", key=key)
    assert int(sol.num_accepted_steps) == len(ts) - 1
    assert float(sol.final["x"]) == pytest.approx(float(ys[-1].reshape(-1)[0]), rel=1e-12)


def test_a_step_below_what_the_tree_resolves_ends_the_solve_with_dt_min():
    # On [0, 20000] with the default 16384 steps the floor is 20000 / (8 · 16384) = 0.15,
    # above the ~0.03 steps OU wants: the first retry below it stops the solve, DT_MIN,
    # instead of integrating a path the tree does not resolve.
    match = r"\[DT_MIN\].*Brownian path resolves.*raise max_steps"
    with pytest.raises(ds.SolveError, match=match) as failed:
        ds.simulate(OU, t0=0.0, t1=SPAN, save="final", key=jax.random.key(0))
    assert failed.value.status == ds.Status.DT_MIN
    assert int(failed.value.solution.num_steps) < 5000
    # A Monte Carlo sweep's paths are simulate's, the same floor and tree included.
    swept = ds.sweep(OU, samples=2, seed=3, t0=0.0, t1=SPAN, save="final", keep="final")
    assert swept.attrs["n_dt_min"] == 2 and "n_success" in swept.attrs
    # A controller's own dtmin sets the floor, and the tree resolves a sixteenth of it.
    pid = dfx.PIDController(rtol=1e-3, atol=1e-3, dtmin=2e-3)
    path = ds.brownian_path(OU, jax.random.key(0), 0.0, SPAN, controller=pid)
    assert path.resolution == SPAN * 2.0 ** -np.ceil(np.log2(SPAN * 16 / 2e-3))
    sol = ds.simulate(OU, t0=0.0, t1=200.0, save="final", key=jax.random.key(0), controller=pid)
    assert ds.Status(int(sol.status)) == ds.Status.SUCCESS


def test_float32_times_cap_the_depth_of_the_tree():
    # float32 times resolve 2**-24 of the span: a finer leaf would have bounds that round
    # together. The floor under the steps is then 16 such leaves, whatever max_steps says.
    model = OU.replace(**{"state.x": jnp.float32(1.0)})
    path = ds.brownian_path(model, jax.random.key(0), 0.0, 1.0, max_steps=2**24)
    assert path.resolution == pytest.approx(2.0**-24) and path.path.t0.dtype == jnp.float32
    fine = ds.brownian_path(OU, jax.random.key(0), 0.0, 1.0, max_steps=2**24)
    assert fine.resolution == 2.0**-31


def test_an_increment_below_the_resolution_is_refused():
    path = ds.brownian_path(OU, jax.random.key(0), 0.0, 1.0)
    r = path.resolution
    with pytest.raises(ValueError, match=r"shorter than the Brownian path's resolution 4.77e-07"):
        path.evaluate(0.5, 0.5 + r / 2)
    inc = eqx.filter_jit(lambda a, b: path.evaluate(a, b))
    with pytest.raises(eqx.EquinoxRuntimeError, match="shorter than the path's resolution"):
        inc(jnp.asarray(0.5), jnp.asarray(0.5 + r / 2))
    # max_steps sets the resolution, so it is checked as for ODEs.
    with pytest.raises(ValueError, match=r"max_steps must be an integer from 1 to 2\*\*31 - 1"):
        ds.brownian_path(OU, jax.random.key(0), 0.0, 1.0, max_steps=0)
    # W(t) itself is exact at every time: from the path's start, and at one time.
    assert np.all(np.isfinite(np.asarray(path.evaluate(0.0, r / 2))))
    assert np.asarray(inc(jnp.asarray(0.5), jnp.asarray(0.5 + r))).shape == (1,)


def test_a_monte_carlo_sweep_integrates_the_paths_simulate_does():
    # Path s has the key fold_in(key(seed), s): the same adaptive solve, tree and floor.
    swept = ds.sweep(OU, samples=3, seed=3, t0=0.0, t1=10.0, save="final", keep="final")
    keys = [jax.random.fold_in(jax.random.key(3), s) for s in range(3)]
    alone = [float(ds.simulate(OU, t0=0.0, t1=10.0, save="final", key=k).final["x"]) for k in keys]
    np.testing.assert_allclose(swept["x"].values, alone, rtol=1e-12)
