"""Rodas5P through diffrax (`solver="rodas5p"`): its order, its dense output and Robertson
against scipy's Radau at tight tolerance."""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from scipy.integrate import solve_ivp

import difsim as ds
from difsim import solvers


class StiffTest(ds.Model):
    """Prothero–Robinson `u` (exact `sin t`, non-autonomous: exercises ∂f/∂t) beside a stiff
    linear pair with `v = w = exp(-t)` from `v(0) = w(0) = 1` (eigenvalues -1 and `mu`)."""

    lam: float = -10.0
    mu: float = -1000.0
    state = ds.State(u=0.0, v=1.0, w=1.0)

    def rhs(self, t, s):
        return dict(
            u=self.lam * (s.u - jnp.sin(t)) + jnp.cos(t),
            v=-s.v,
            w=self.mu * (s.w - s.v) - s.v,
        )


def exact(t):
    return dict(u=np.sin(t), v=np.exp(-t), w=np.exp(-t))


def robertson_radau(k1: float, ts) -> np.ndarray:
    """Robertson's state at `ts` from scipy Radau at rtol 1e-12, atol 1e-14: `(3, len(ts))`."""
    k2, k3 = 3e7, 1e4

    def f(t, y):
        return [-k1 * y[0] + k3 * y[1] * y[2], k1 * y[0] - k3 * y[1] * y[2] - k2 * y[1] ** 2,
                k2 * y[1] ** 2]  # fmt: skip

    sol = solve_ivp(f, (0.0, ts[-1]), [1.0, 0.0, 0.0], "Radau", t_eval=ts, rtol=1e-12, atol=1e-14)
    assert sol.success
    return sol.y


def test_registered_and_built_by_name():
    info = solvers.solver_info("rodas5p")
    assert (info.cls, info.order, info.adaptive) == (solvers.Rodas5P, 5, True)
    assert type(solvers.make_solver("RODAS5P")) is solvers.Rodas5P


def test_tableau_is_stiffly_accurate():
    tab = solvers.Rodas5P.tableau
    # The last three stages sit at t0 + h, each argument the one before plus its increment,
    # so y1 = U_s + k_s is the last stage's argument plus the last increment.
    assert tuple(tab.c[-3:]) == (1, 1, 1)
    for i in (6, 7):
        np.testing.assert_array_equal(tab.a[i, : i - 1], tab.a[i - 1, : i - 1])
        assert tab.a[i, i - 1] == 1
    assert tab.d[0] == tab.gamma


def test_observed_order_with_constant_steps():
    hs = np.array([0.2, 0.1, 0.05, 0.025])
    errs = []
    for h in hs:
        sol = ds.simulate(StiffTest(), t0=0.0, t1=2.0, save="final", solver="rodas5p",
                          controller="constant", dt0=float(h))  # fmt: skip
        errs.append(max(abs(float(sol.final[k]) - x) for k, x in exact(2.0).items()))
    slope = scipy.stats.linregress(np.log(hs), np.log(errs)).slope
    assert abs(slope - 5) < 0.2, (slope, errs)


def test_dense_output_converges_at_fourth_order():
    # Save times inside every step: the values come from the continuous extension.
    ts = jnp.concatenate([jnp.zeros(1), jnp.linspace(0.0, 2.0, 11)[1:] - 0.07])
    errs, hs = [], np.array([0.2, 0.1, 0.05])
    for h in hs:
        sol = ds.simulate(StiffTest(lam=-1.0), t=ts, solver="rodas5p", controller="constant",
                          dt0=float(h))  # fmt: skip
        errs.append(max(np.max(np.abs(np.asarray(sol.ys[k]) - x)) for k, x in exact(ts).items()))
    slope = scipy.stats.linregress(np.log(hs), np.log(errs)).slope
    assert slope > 3.8, (slope, errs)
    assert errs[-1] < 1e-8


@pytest.mark.parametrize("k1", [0.04])
def test_robertson_matches_radau(k1):
    ts = np.array([40.0, 4e5])
    ref = robertson_radau(k1, ts)
    sol = ds.simulate(ds.models.Robertson(k1=k1), t=jnp.asarray([0.0, *ts]), solver="rodas5p",
                      rtol=1e-10, atol=1e-14)  # fmt: skip
    got = np.stack([np.asarray(sol.ys[v][1:]) for v in ("y1", "y2", "y3")])
    np.testing.assert_allclose(got, ref, rtol=2e-8)
    assert sol.status == ds.Status.SUCCESS
