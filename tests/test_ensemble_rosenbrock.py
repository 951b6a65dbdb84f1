"""Rodas5P in the ensemble engine: its per-lane linear solves, step-for-step agreement with
the diffrax path, Robertson against scipy's Radau, a NaN lane beside healthy ones, and
HIRES (8 species, LU unrolled) and a 10-species chain (LU batched) against Radau."""

import tomllib
from pathlib import Path

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


# HIRES (8 species): the factorisation unrolled at the largest size it is unrolled for.
HIRES_SET = tomllib.loads((Path(__file__).parents[1] / "data" / "stiff_test_set.toml").read_text())
HIRES_K10 = np.array([280.0, 250.0, 310.0])


def _hires_radau(k10: float) -> np.ndarray:
    m = ds.models.Hires(k10=k10)
    k = [float(getattr(m, f"k{i}")) for i in range(12)]

    def f(t, y):
        y1, y2, y3, y4, y5, y6, y7, y8 = y
        r = k[10] * y6 * y8
        return [-k[1] * y1 + k[2] * y2 + k[3] * y3 + k[0], k[1] * y1 - k[6] * y2,
                -k[7] * y3 + k[2] * y4 + k[5] * y5, k[3] * y2 + k[1] * y3 - k[8] * y4,
                -k[9] * y5 + k[2] * y6 + k[2] * y7, -r + k[4] * y4 + k[1] * y5 - k[2] * y6
                + k[4] * y7, r - k[11] * y7, -r + k[11] * y7]  # fmt: skip

    y0 = [float(v) for v in m.initial_state().values.values()]
    sol = solve_ivp(f, (0.0, HIRES_SET["hires"]["t1"]), y0, "Radau", rtol=1e-12, atol=1e-16)
    assert sol.success
    return sol.y[:, -1]


def test_hires_ensemble_matches_the_published_solution_and_radau():
    assert ens.UNROLLED_MAX >= 8  # this test is of the unrolled factorisation
    sol = simulate_ensemble(ds.models.Hires(), {"k10": jnp.asarray(HIRES_K10)}, t0=0.0,
                            t1=HIRES_SET["hires"]["t1"], save="final", solver="rodas5p",
                            rtol=1e-10, atol=1e-14)  # fmt: skip
    assert np.all(np.asarray(sol.status) == ds.Status.SUCCESS)
    got = np.stack([np.asarray(sol.ys[f"y{i}"][:, 0]) for i in range(1, 9)], axis=1)
    # The default rates against the test set's published y(t1) (Mazzia & Iavernaro).
    # (1.4e-11 measured at rtol 1e-10.)
    np.testing.assert_allclose(got[0], HIRES_SET["hires"]["y"], rtol=1e-9)
    for lane, k10 in enumerate(HIRES_K10):
        np.testing.assert_allclose(got[lane], _hires_radau(k10), rtol=1e-9)


class Chain(ds.Model):
    """A stiff chain of 10 species (rates 1 to 1e4): above the unrolled size, so its
    factorisation goes through the batched LU."""

    a: float = 1.0
    state = ds.State(x=ds.Var(np.r_[1.0, np.zeros(9)]))

    def rhs(self, t, s):
        feed = jnp.concatenate([jnp.zeros(1, s.x.dtype), s.x[:-1]])
        lam = jnp.logspace(0.0, 4.0, 10)
        return dict(x=-lam * s.x + self.a * lam * feed * (1 + 0.1 * s.x))


def test_a_system_above_the_unrolled_size_matches_radau():
    assert ens.UNROLLED_MAX < 10  # this test is of the batched factorisation
    a = np.array([0.5, 1.0])
    sol = simulate_ensemble(Chain(), {"a": jnp.asarray(a)}, t0=0.0, t1=2.0, save="final",
                            solver="rodas5p", rtol=1e-10, atol=1e-14)  # fmt: skip
    lam = np.logspace(0.0, 4.0, 10)
    for lane, ai in enumerate(a):

        def f(t, x, ai=ai):
            feed = np.r_[0.0, x[:-1]]
            return -lam * x + ai * lam * feed * (1 + 0.1 * x)

        ref = solve_ivp(f, (0.0, 2.0), np.r_[1.0, np.zeros(9)], "Radau", rtol=1e-12, atol=1e-16)
        np.testing.assert_allclose(np.asarray(sol.ys["x"][lane, 0]), ref.y[:, -1], rtol=1e-9)
