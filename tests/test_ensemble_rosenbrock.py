"""Rodas5P in the ensemble engine: its per-lane linear solves, step-for-step agreement with
the diffrax path, Robertson against scipy's Radau, and a NaN lane beside healthy ones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import difsim as ds
from difsim._ensemble import _rosenbrock as ens, simulate_ensemble

VARS = ("y1", "y2", "y3")


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_unrolled_lu_solves_like_numpy_with_pivoting(n):
    rng = np.random.default_rng(n)
    lanes = 6
    a = rng.normal(size=(lanes, n, n))
    if n > 1:
        a[0] = np.eye(n)[::-1]  # a permutation: every column needs a row swap
        a[1, 0, 0] = 0.0  # a zero first pivot
        a[2] = np.triu(a[2]) + np.diag(np.full(n, 1e-9))  # tiny leading entries
        a[2] = a[2][::-1]
    b = rng.normal(size=(lanes, n))
    # jit: run eagerly, the unrolled factorisation would dispatch its ~n³ operations one by one
    unrolled = jax.jit(lambda a, b: ens.solve_unrolled(ens.lu_unrolled(a), b))
    x = unrolled(jnp.asarray(np.moveaxis(a, 0, -1)), jnp.asarray(b.T))
    np.testing.assert_allclose(np.asarray(x).T, np.linalg.solve(a, b[..., None])[..., 0],
                               rtol=1e-9, atol=1e-12)  # fmt: skip
    y = ens.solve_batched(ens.lu_batched(jnp.asarray(np.moveaxis(a, 0, -1))), jnp.asarray(b.T))
    np.testing.assert_allclose(np.asarray(y), np.asarray(x), rtol=1e-9, atol=1e-12)


def robertson_radau(k1: float, ts) -> np.ndarray:
    """Robertson's state at `ts` from scipy Radau at rtol 1e-12, atol 1e-14: `(3, len(ts))`."""
    m = ds.models.Robertson()
    k2, k3 = float(m.k2), float(m.k3)  # Python floats: scipy calls f ~40k times

    def f(t, y):
        a, b, c = k1 * y[0], k3 * y[1] * y[2], k2 * y[1] ** 2
        return [-a + b, a - b - c, c]

    sol = solve_ivp(f, (0.0, ts[-1]), [1.0, 0.0, 0.0], "Radau", t_eval=ts, rtol=1e-12, atol=1e-14)
    assert sol.success
    return sol.y


K1 = jnp.array([0.02, 0.04, jnp.nan, 0.06])
TS = jnp.array([0.0, 40.0, 4e5])


@pytest.fixture(scope="module")
def tight():
    """Robertson over k1 (one lane NaN) at tight tolerances, saved at 0, 40 and 4e5."""
    return simulate_ensemble(ds.models.Robertson(), {"k1": K1}, t=TS, solver="rodas5p",
                             rtol=1e-10, atol=1e-14)  # fmt: skip


def test_robertson_ensemble_matches_radau(tight):
    healthy = [0, 1, 3]
    assert [int(s) for s in tight.status[jnp.array(healthy)]] == [ds.Status.SUCCESS] * 3
    for lane in healthy:
        ref = robertson_radau(float(K1[lane]), np.asarray(TS[1:]))
        got = np.stack([np.asarray(tight.ys[v][lane, 1:]) for v in VARS])
        np.testing.assert_allclose(got, ref, rtol=2e-8)


def test_nan_lane_is_nonfinite_and_alone(tight):
    assert tight.status[2] == ds.Status.NONFINITE
    assert int(tight.num_steps[2]) == 0
    assert all(np.isnan(np.asarray(tight.ys[v][2, 1:])).all() for v in VARS)


def test_step_for_step_with_the_diffrax_path():
    k1 = jnp.linspace(0.02, 0.06, 4)
    kw = dict(t0=0.0, t1=1e4, save="final", solver="rodas5p", rtol=1e-6, atol=1e-10)
    sol = simulate_ensemble(ds.models.Robertson(), {"k1": k1}, **kw)
    ref = jax.jit(jax.vmap(lambda k: ds.simulate(ds.models.Robertson(k1=k), **kw)))(k1)
    np.testing.assert_array_equal(sol.num_steps, ref.num_steps)
    np.testing.assert_array_equal(sol.num_rejected_steps, ref.num_rejected_steps)
    for v in VARS:
        np.testing.assert_allclose(sol.ys[v], ref.ys[v], rtol=1e-10, atol=1e-16)
