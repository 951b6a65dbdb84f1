"""The code of docs/stochastic.md runs, and the numbers it states hold; its two fits of the
shipped Ornstein–Uhlenbeck data (data/make_ou_data.py: sampled exactly with θ = 1.2,
μ = 0.5, σ = 0.6) are also the fitting tests: the truth within 3 standard errors, the
Kalman likelihood against an independent scipy fit of the transition density, the
simulated moments' gradient against central differences.

The runner and its conventions are in test_docs.py (this file runs in its own process).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so

from difsim._fit._stochastic import _jacobian

from .test_docs import run_doc as run_doc, workdir as workdir  # noqa: F401 (fixtures)

HERE = ["docs/stochastic.md"]
DOC = "docs/stochastic.md"


def test_every_python_block_runs(run_doc):
    assert "ds" in run_doc(DOC)


def test_milstein_follows_the_exact_path(run_doc):
    ns = run_doc(DOC)
    assert ns["error"] < 5e-3  # "~1e-3": Milstein's O(dt) at dt = 2^-10


def test_ensemble_moments_and_pathwise_gradient(run_doc):
    ns = run_doc(DOC)
    n = 1000
    # Within 5 standard errors; Euler's bias at dt = 0.01 (0.5 %) is far smaller.
    assert abs(ns["mean"] - ns["exact_mean"]) < 5 * np.sqrt(ns["exact_var"] / n)
    assert abs(ns["var"] - ns["exact_var"]) < 5 * ns["exact_var"] * np.sqrt(2 / (n - 1))
    assert round(ns["exact_mean"], 4) == 0.5677 and round(ns["exact_var"], 4) == 0.1227
    # The pathwise derivative is the derivative of the same 100 paths: central differences.
    h = 1e-6
    fd = (ns["mean_at_2"](0.5 + h) - ns["mean_at_2"](0.5 - h)) / (2 * h)
    np.testing.assert_allclose(float(ns["dmean_dsigma"]), float(fd), rtol=1e-6)


def test_monte_carlo_sweep_has_grid_and_time_dims(run_doc):
    ensemble = run_doc(DOC)["ensemble"]
    assert ensemble["x_q95"].dims == ("D", "time") and "path" not in ensemble.dims
    assert np.all(ensemble["x_q05"] <= ensemble["x_mean"])
    assert np.all(ensemble["x_mean"] <= ensemble["x_q95"])
    spread = run_doc(DOC)["spread"]
    assert float(spread.isel(D=1, time=-1)) > float(spread.isel(D=0, time=-1))  # hotter, wider


def test_kramers_ratios_are_as_stated(run_doc):
    ratios = run_doc(DOC)["ratios"]
    np.testing.assert_allclose(ratios, [1.25, 1.14, 1.06], atol=0.005)


def test_fits_recover_the_truth(run_doc):
    # The shipped data were sampled exactly with these values (data/make_ou_data.py).
    ns = run_doc(DOC)
    truth = {"theta": 1.2, "mu": 0.5, "sigma": 0.6}
    assert ns["exact"].optimizer == "bfgs" and ns["moments"].optimizer == "levenberg_marquardt"
    for fit in (ns["exact"], ns["moments"]):
        assert fit.ok
        for name, value in truth.items():
            assert abs(fit.parameters[name] - value) < 3 * fit.stderr[name], (fit, name)


def _numpy_nll(p, t, x):
    theta, mu, sigma = p
    decay = np.exp(-theta * np.diff(t))
    var = sigma**2 / (2 * theta) * (1 - decay**2)
    mean = mu + (x[:-1] - mu) * decay
    return 0.5 * np.sum((x[1:] - mean) ** 2 / var + np.log(2 * np.pi * var))


def test_kalman_fit_equals_an_independent_transition_density_fit(run_doc):
    # The OU transition density in NumPy, minimised by scipy; standard errors from the
    # inverse of its finite-difference Hessian.
    ns = run_doc(DOC)
    exact, series = ns["exact"], ns["series"]
    t, x = series["time"].values, series["x"].values
    best = so.minimize(_numpy_nll, [1.0, 0.0, 0.5], args=(t, x), method="Nelder-Mead",
                       options=dict(xatol=1e-10, fatol=1e-12, maxiter=20000))  # fmt: skip
    names = ("theta", "mu", "sigma")
    np.testing.assert_allclose([exact.parameters[n] for n in names], best.x, rtol=1e-5)
    assert exact.loss == pytest.approx(best.fun, rel=1e-9)
    eps = 1e-4 * np.abs(best.x)
    f = lambda d: _numpy_nll(best.x + d, t, x)  # noqa: E731
    h = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            e_i, e_j = np.eye(3)[i] * eps[i], np.eye(3)[j] * eps[j]
            h[i, j] = (f(e_i + e_j) - f(e_i - e_j) - f(e_j - e_i) + f(-e_i - e_j)) / (
                4 * eps[i] * eps[j]
            )
    stderr = np.sqrt(np.diag(np.linalg.inv(h)))
    np.testing.assert_allclose([exact.stderr[n] for n in names], stderr, rtol=1e-3)


def test_simulated_moments_gradient_runs_through_the_paths(run_doc):
    # Common random numbers: the objective is deterministic and smooth in the parameters;
    # its forward-mode Jacobian (through every simulated path) is the limit of central
    # differences. (The compiled residuals-and-Jacobian of the fit's standard errors.)
    moments = run_doc(DOC)["moments"]
    problem, u = moments.problem.with_adjoint("forward"), jnp.asarray(moments.u)
    r0, jac = _jacobian(problem, u)
    np.testing.assert_array_equal(_jacobian(problem, u)[0], r0)
    h = 1e-5
    for i in range(u.shape[0]):
        e = jnp.zeros_like(u).at[i].set(h)
        fd = (_jacobian(problem, u + e)[0] - _jacobian(problem, u - e)[0]) / (2 * h)
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-4, atol=1e-6)
    out = moments.to_xarray()  # the data's moments and the fitted ones, labelled
    assert out["x_mean"].dims == ("time",) and "x_var_fit" in out
    jax.clear_caches()
