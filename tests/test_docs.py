"""The README quickstart and docs/models.md run as written, and their numbers are right."""

import os
import re
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from .helpers import central_difference

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def readme():
    namespace: dict = {}
    cwd = os.getcwd()
    os.chdir(ROOT)  # the README's paths (data/...) are relative to the repository root
    try:
        for block in _python_blocks(ROOT / "README.md"):
            exec(compile(block, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


@pytest.fixture(scope="module")
def models_doc():
    namespace: dict = {}
    for block in _python_blocks(ROOT / "docs" / "models.md"):
        exec(compile(block, "docs/models.md", "exec"), namespace)
    return namespace


def test_readme_quickstart(readme):
    ds = readme["ds"]
    assert int(readme["sol"].status) == ds.Status.SUCCESS
    assert readme["sol"].to_xarray().x.dims == ("time",)
    assert readme["finals"]["x"].shape == (1000,)
    # At rho = 0 the origin attracts: x decays like exp(-sigma t) at first, and stays tiny.
    assert abs(float(readme["finals"]["x"][0])) < 1e-3


def test_readme_gradient_matches_finite_difference(readme):
    ds, Lorenz = readme["ds"], readme["Lorenz"]

    def final_x(rho):
        sol = ds.simulate(Lorenz(rho=rho), t0=0.0, t1=1.0, save="final", rtol=1e-10, atol=1e-10)
        return float(sol.final["x"])

    fd = central_difference(final_x, 28.0, h=1e-5)
    np.testing.assert_allclose(float(readme["dxdrho"]), fd, rtol=1e-4)


def test_readme_fit_agrees_with_published_estimates(readme):
    # B. Carpenter, "Predator-Prey Population Dynamics: the Lotka-Volterra model in Stan"
    # (2018): posterior means alpha 0.55, beta 0.028, gamma 0.80, delta 0.024 for the same
    # data and noise model. A maximum-likelihood fit must agree within its standard errors.
    fit = readme["fit"]
    published = dict(alpha=0.55, beta=0.028, gamma=0.80, delta=0.024)
    for name, value in published.items():
        assert abs(fit.parameters[name] - value) < fit.stderr[name], name


def test_models_doc_hopf_bifurcation(models_doc):
    # Linear stability of (a, b/a) changes at b = 1 + a^2 = 2 (a = 1): no oscillation well
    # below it, a large limit cycle above it.
    bs, amplitudes = np.asarray(models_doc["bs"]), np.asarray(models_doc["amplitudes"])
    assert np.all(amplitudes[bs <= 1.6] < 1e-2)
    assert np.all(amplitudes[bs >= 2.8] > 1.0)


def test_models_doc_fixed_point(models_doc):
    ds, Brusselator = models_doc["ds"], models_doc["Brusselator"]
    a, b = 1.0, 1.5
    sol = ds.simulate(Brusselator(a=a, b=b), t0=0.0, t1=100.0, save="final", rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        [float(sol.final["u"]), float(sol.final["v"])], [a, b / a], atol=1e-7
    )


def test_models_doc_gradient(models_doc):
    fd = central_difference(lambda b: float(models_doc["final_u"](jnp.asarray(b))), 2.5, h=1e-5)
    np.testing.assert_allclose(float(models_doc["du_db"]), fd, rtol=1e-4)
