"""Fitting stochastic models through `ds.fit`: the exact likelihood of a linear-Gaussian SDE
(Kalman filter) and simulated moments with common random numbers, on the shipped
Ornstein–Uhlenbeck datasets (`data/make_ou_data.py`, sampled exactly from the transition
density with known θ, μ, σ).

References: the truth within 3 standard errors (as the fit reports them); the likelihood
fit against an independent maximum-likelihood fit of the OU transition density written in
NumPy and minimised by scipy, with standard errors from scipy's finite-difference Hessian;
the simulated moments' gradient against central differences.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so
import xarray as xr

import difsim as ds
from difsim._fit._stochastic import _jacobian
from difsim.models import DoubleWellLangevin, OrnsteinUhlenbeck

DATA = Path(__file__).resolve().parents[1] / "data"
FREE = {"theta": ds.Positive(), "mu": ds.Identity(), "sigma": ds.Positive()}


@pytest.fixture(scope="module")
def series():
    return xr.open_dataset(DATA / "ou_series.nc").load()


@pytest.fixture(scope="module")
def kalman(series):
    return ds.fit(OrnsteinUhlenbeck(), series, free=FREE, objective=ds.KalmanLikelihood())


def _numpy_nll(p, t, x):
    theta, mu, sigma = p
    decay = np.exp(-theta * np.diff(t))
    var = sigma**2 / (2 * theta) * (1 - decay**2)
    mean = mu + (x[:-1] - mu) * decay
    return 0.5 * np.sum((x[1:] - mean) ** 2 / var + np.log(2 * np.pi * var))


def test_kalman_likelihood_recovers_the_truth(kalman, series):
    assert kalman.ok and kalman.optimizer == "bfgs"
    for name in FREE:
        truth = series.attrs[name]
        assert abs(kalman.parameters[name] - truth) < 3 * kalman.stderr[name], name


def test_kalman_likelihood_equals_an_independent_transition_density_fit(kalman, series):
    t, x = series["time"].values, series["x"].values
    best = so.minimize(_numpy_nll, [1.0, 0.0, 0.5], args=(t, x), method="Nelder-Mead",
                       options=dict(xatol=1e-10, fatol=1e-12, maxiter=20000))  # fmt: skip
    got = [kalman.parameters[n] for n in FREE]
    np.testing.assert_allclose(got, best.x, rtol=1e-5)
    assert kalman.loss == pytest.approx(best.fun, rel=1e-9)
    # Standard errors: the inverse Hessian of the same negative log-likelihood.
    h = np.zeros((3, 3))
    eps = 1e-4 * np.abs(best.x)
    for i in range(3):
        for j in range(3):
            e_i, e_j = np.eye(3)[i] * eps[i], np.eye(3)[j] * eps[j]
            f = lambda d: _numpy_nll(best.x + d, t, x)  # noqa: E731
            h[i, j] = (f(e_i + e_j) - f(e_i - e_j) - f(-e_i + e_j) + f(-e_i - e_j)) / (
                4 * eps[i] * eps[j]
            )
    stderr = np.sqrt(np.diag(np.linalg.inv(h)))
    np.testing.assert_allclose([kalman.stderr[n] for n in FREE], stderr, rtol=1e-3)


def test_simulated_moments_recover_the_truth_with_gradients_through_the_paths():
    data = xr.open_dataset(DATA / "ou_paths.nc").load()
    objective = ds.SimulatedMoments(paths=400, seed=1, dt0=0.05, brownian="steps")
    # The data start at x = 2 (the model's default initial state is 1).
    start = OrnsteinUhlenbeck(theta=0.8, mu=0.2, sigma=0.4).replace(**{"state.x": 2.0})
    fit = ds.fit(start, data, free=FREE, objective=objective, solver="euler")
    assert fit.ok and fit.names == tuple(FREE)
    for name in FREE:
        assert abs(fit.parameters[name] - data.attrs[name]) < 3 * fit.stderr[name], name
    # Common random numbers: the objective is a deterministic, smooth function of the
    # parameters, and its forward-mode derivative (through every path) is the difference
    # quotient's limit.
    # (The compiled residuals-and-Jacobian of the fit's standard errors, reused.)
    problem, u = fit.problem.with_adjoint("forward"), jnp.asarray(fit.u)
    r0, jac = _jacobian(problem, u)
    np.testing.assert_array_equal(_jacobian(problem, u)[0], r0)
    h = 1e-5
    for i in range(u.shape[0]):
        e = jnp.zeros_like(u).at[i].set(h)
        fd = (_jacobian(problem, u + e)[0] - _jacobian(problem, u - e)[0]) / (2 * h)
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-4, atol=1e-6)
    out = fit.to_xarray()  # data and fitted moments, labelled
    assert set(out["x.mean"].dims) == {"time"} and "x.var_fit" in out


def test_stochastic_fits_are_checked(series):
    with pytest.raises(ValueError, match="OrnsteinUhlenbeck is stochastic: tell fit what"):
        ds.fit(OrnsteinUhlenbeck(), series, free=FREE)
    with pytest.raises(ValueError, match="KalmanLikelihood needs a drift that is affine"):
        ds.fit(DoubleWellLangevin(state=ds.State(x=1.0)), series, free=["a"],
               objective=ds.KalmanLikelihood())  # fmt: skip
    with pytest.raises(ValueError, match="SimulatedMoments needs observed paths"):
        ds.fit(OrnsteinUhlenbeck(), series, free=FREE, objective=ds.SimulatedMoments())
    with pytest.raises(ValueError, match="KalmanLikelihood fits an SDE; Lorenz has no noise"):
        ds.fit(ds.models.Lorenz(), series.rename(x="x"), free=["rho"],
               observe={"x": "x"}, objective=ds.KalmanLikelihood())  # fmt: skip
