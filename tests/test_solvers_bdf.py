"""The variable-order BDF (`solvers/_bdf.py`): its difference algebra against polynomials
evaluated directly, its error against scipy's Radau at tight tolerance (van der Pol) and
its tolerance proportionality, the published values of Robertson's and the Akzo Nobel DAE
(data/stiff_test_set.toml), and its derivatives against the closed form."""

import tomllib
from pathlib import Path

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from scipy.integrate import solve_ivp

import difsim as ds
from difsim.solvers import BDF, BDFController, StageNewton
from difsim.solvers._bdf import MAX_ORDER, _interpolate, rescale

TEST_SET = tomllib.loads((Path(__file__).parents[1] / "data" / "stiff_test_set.toml").read_text())
RNG = np.random.default_rng(7)


def _differences(coef, h, order):
    """Backward differences `D_0..k` of the polynomial `coef` on the grid `0, -h, -2h, …`."""
    row = np.array([np.polyval(coef, -j * h) for j in range(order + 1)])
    d = np.zeros((MAX_ORDER + 3, 1))
    d[0, 0] = row[0]
    for k in range(1, order + 1):
        row = row[:-1] - row[1:]
        d[k, 0] = row[0]
    return d


@pytest.mark.parametrize("order", range(1, MAX_ORDER + 1))
def test_rescaled_differences_and_interpolation_are_the_polynomials(order):
    coef = RNG.normal(size=order + 1)  # degree `order`: represented exactly
    h, factor = 0.3, 1.7
    got = np.asarray(rescale(jnp.asarray(_differences(coef, h, order)), order, factor))
    np.testing.assert_allclose(got[: order + 1], _differences(coef, h * factor, order)[: order + 1],
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    d = jnp.asarray(_differences(coef, h, order)[: MAX_ORDER + 1, 0])
    for t in (-0.7 * h, -0.1 * h, 0.0):  # inside the last step, and its end t1 = 0
        assert abs(float(_interpolate(t, 0.0, h, d, order)) - np.polyval(coef, t)) < 1e-12


def _vdp(t, y, mu):
    return jnp.stack([y[1], mu * ((1 - y[0] ** 2) * y[1] - y[0])])


@jax.jit
def _vdp_final(rtol):
    solver = BDF(root_finder=dfx.with_stepsize_controller_tols(StageNewton)(kappa=1e-2))
    sol = dfx.diffeqsolve(dfx.ODETerm(_vdp), solver, 0.0, 2.0, None, jnp.array([2.0, 0.0]),
                          1000.0, stepsize_controller=BDFController(rtol=rtol, atol=rtol),
                          saveat=dfx.SaveAt(t1=True), max_steps=10_000)  # fmt: skip
    return sol.ys[-1], sol.stats["num_accepted_steps"]


def test_stiff_van_der_pol_against_scipy_with_error_proportional_to_the_tolerance():
    def rhs(t, y):
        return [y[1], 1000.0 * ((1 - y[0] ** 2) * y[1] - y[0])]

    ref = solve_ivp(rhs, (0, 2), [2.0, 0.0], method="Radau", rtol=1e-12, atol=1e-12).y[:, -1]
    rtols = np.array([1e-4, 1e-6, 1e-8])
    errors, steps = [], []
    for rtol in rtols:
        y, n = _vdp_final(jnp.asarray(rtol))
        errors.append(float(np.max(np.abs(np.asarray(y) - ref))))
        steps.append(int(n))
    # Measured 12, 14 and 23 rtol (scipy's BDF: 7, 14 and 11), in 356 / 719 / 1,500 steps.
    assert np.all(np.array(errors) < 50 * rtols), errors
    slope = scipy.stats.linregress(np.log(rtols), np.log(errors)).slope
    assert 0.8 < slope < 1.1, (slope, errors)
    assert steps[-1] < 2_000, steps  # variable order: order 5 carries the tight end


@pytest.mark.parametrize(
    ("problem", "model", "rtols"),
    [("robertson", "RobertsonDAE", (1e-4, 1e-6, 1e-8)), ("chemakzo", "AkzoNobel", (1e-4, 1e-8))],
)
def test_the_test_set_daes_match_their_published_references(problem, model, rtols):
    entry = TEST_SET[problem]
    ref = np.array(entry["y"])
    for rtol in rtols:  # tolerances are traced: one compile
        sol = ds.simulate(getattr(ds.models, model)(), t0=0.0, t1=entry["t1"], save="final",
                          rtol=rtol, atol=rtol * entry["atol_ratio"], solver="bdf")  # fmt: skip
        assert sol.status == ds.Status.SUCCESS and sol.solver == "BDF"
        y = np.array([float(sol.ys[f"y{i}"][-1]) for i in range(1, ref.size + 1)])
        assert np.all(np.abs(y - ref) <= 10 * rtol * np.abs(ref)), (rtol, y / ref - 1)


def test_derivatives_forward_and_reverse_match_the_closed_form():
    # y' = -a y, y(1) = exp(-a): dy(1)/da = -exp(-a).
    def final(a, adjoint):
        solver = BDF(root_finder=dfx.with_stepsize_controller_tols(StageNewton)(kappa=1e-2))
        sol = dfx.diffeqsolve(dfx.ODETerm(lambda t, y, a: -a * y), solver, 0.0, 1.0, None,
                              jnp.ones(1), a, stepsize_controller=BDFController(rtol=1e-10,
                              atol=1e-14), saveat=dfx.SaveAt(t1=True), adjoint=adjoint,
                              max_steps=4096)  # fmt: skip
        return sol.ys[-1, 0]

    a = 5.0
    exact = -np.exp(-a)
    forward = jax.jacfwd(lambda a: final(a, dfx.ForwardMode()))(a)
    reverse = jax.grad(lambda a: final(a, dfx.RecursiveCheckpointAdjoint()))(a)
    for slope in (forward, reverse):
        assert abs(float(slope) / exact - 1) < 1e-6, (float(slope), exact)


def test_events_restart_the_history_and_match_an_explicit_solve():
    # A bounce changes the state: the differences no longer apply, and the step after it
    # starts again at order 1 (`made_jump`).
    ball = ds.models.BouncingBall()
    tight = dict(t0=0.0, t1=3.0, save="final")
    bdf = ds.simulate(ball, **tight, solver="bdf", rtol=1e-9, atol=1e-9)
    ref = ds.simulate(ball, **tight, solver="tsit5", rtol=1e-11, atol=1e-11)
    assert bdf.status == ds.Status.SUCCESS
    for name in ("h", "v"):  # measured: 5e-8
        assert abs(float(bdf.ys[name][-1]) - float(ref.ys[name][-1])) < 1e-6, name


def test_another_adaptive_controller_is_refused_by_name():
    with pytest.raises(ValueError, match="solver BDF chooses its own steps.*PIDController"):
        ds.simulate(ds.models.VanDerPol(), t0=0.0, t1=1.0, solver="bdf",
                    controller=dfx.PIDController(rtol=1e-6, atol=1e-6))  # fmt: skip
