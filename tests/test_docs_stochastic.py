"""The code of docs/stochastic.md runs, and the numbers it states hold.

The runner and its conventions are in test_docs.py (this file runs in its own process).
"""

import jax
import numpy as np

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
    assert ensemble["x.q95"].dims == ("D", "time") and "path" not in ensemble.dims
    assert np.all(ensemble["x.q05"] <= ensemble["x.mean"])
    assert np.all(ensemble["x.mean"] <= ensemble["x.q95"])
    spread = run_doc(DOC)["spread"]
    assert float(spread.isel(D=1, time=-1)) > float(spread.isel(D=0, time=-1))  # hotter, wider


def test_kramers_ratios_are_as_stated(run_doc):
    ratios = run_doc(DOC)["ratios"]
    np.testing.assert_allclose(ratios, [1.25, 1.14, 1.06], atol=0.005)


def test_fits_recover_the_truth(run_doc):
    ns = run_doc(DOC)
    truth = {"theta": 1.2, "mu": 0.5, "sigma": 0.6}
    for fit in (ns["exact"], ns["moments"]):
        assert fit.ok
        for name, value in truth.items():
            assert abs(fit.parameters[name] - value) < 3 * fit.stderr[name], (fit, name)
    jax.clear_caches()
