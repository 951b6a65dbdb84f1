"""The PDE inverse problem of `experiments/heat_inverse.py` (issue 28, point 5b): the initial
field of a rod, 5 sine-mode coefficients of a `Heat` model freed as one array parameter,
recovered by `ds.fit` from three noisy thermometers read at t = 0.5 ... 10 s.

Independent reference: the heat equation's exact solution (each sine mode decays as
exp(-D k^2 t)), which made the data. The observations are linear in the coefficients, so the
exact answer of the fit is the linear least-squares solution with that exact operator `A`,
and its covariance is s^2 (A^T A)^{-1}: both are computed here with numpy, not difsim.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import difsim as ds

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "heat_inverse.py"


@pytest.fixture(scope="module")
def inverse():
    spec = importlib.util.spec_from_file_location("heat_inverse", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    rod = ds.Grid.dirichlet(script.N, script.L)
    data = script.observations(rod)
    result = script.recover(data, rod)
    readings = np.stack([data[name].values for name in script.SENSORS], axis=1).ravel()
    a = script.design_matrix(rod, len(script.TRUE_MODES))
    least_squares, rss = np.linalg.lstsq(a, readings, rcond=None)[:2]
    s2 = float(rss[0]) / (a.shape[0] - a.shape[1])  # residual variance, as the fit's
    return script, rod, result, a, least_squares, s2


def test_fit_is_the_exact_least_squares_solution(inverse):
    script, _, result, _, least_squares, _ = inverse
    assert result.status is ds.Status.CONVERGED and result.num_steps <= 5
    modes, stderr = result.parameters["modes"], result.stderr["modes"]
    assert modes.shape == stderr.shape == (5,)
    # Only the solver's discretisation separates the two (order-4 Laplacian, Tsit5 at
    # 0.025 s): 0.004 standard errors as measured, 0.02 allowed.
    np.testing.assert_array_less(np.abs(modes - least_squares), 0.02 * stderr)


def test_standard_errors_are_those_of_the_exact_operator(inverse):
    _, _, result, a, _, s2 = inverse
    exact = np.sqrt(s2 * np.diag(np.linalg.inv(a.T @ a)))
    np.testing.assert_allclose(result.stderr["modes"], exact, rtol=1e-2)
    np.testing.assert_allclose(result.sigma2, s2, rtol=1e-3)
    # The noise is 0.01 K: the estimated residual variance must say so (55 dof: +-19 %).
    assert 0.6e-4 < result.sigma2 < 1.4e-4


def test_truth_within_three_standard_errors_and_field_error_at_noise_level(inverse):
    script, rod, result, a, _, _ = inverse
    modes, stderr = result.parameters["modes"], result.stderr["modes"]
    np.testing.assert_array_less(np.abs(modes - script.TRUE_MODES), 3 * stderr)
    relative, expected = script.field_errors(result, rod)
    # Expected relative L2 error of the field from the noise alone, sqrt(tr(B C B^T))/|u0|
    # with C = 0.01^2 (A^T A)^{-1} and B the sine modes on the grid: 0.064.
    basis = np.sin(np.pi * np.asarray(rod.x)[:, None] * np.arange(1, 6)[None, :] / script.L)
    cov = script.NOISE**2 * np.linalg.inv(a.T @ a)
    noise_level = np.sqrt(np.trace(basis @ cov @ basis.T)) / np.linalg.norm(
        basis @ script.TRUE_MODES
    )
    assert noise_level == pytest.approx(expected, rel=0.2)
    assert 0.01 < relative < 3 * noise_level  # measured 0.020 against 0.064
    # Coefficients beyond K = 5 would not be determined by these sensors and times.
    assert script.design_stderr(rod, 7).max() > 10 * script.design_stderr(rod, 5).max()
