"""The learned closure of `experiments/burgers_closure.py` (issue 28, point 5c): a
convolutional network correcting viscous Burgers on 32 cells, trained by `ds.fit` through
the coarse solver on the cell averages of a 256-point spectral solution.

A smaller run than the script's (6 training fields, 40 Adam steps instead of 32 and 600):
it asserts the error ratio this run reaches on held-out fields against its own no-closure
baseline; the script prints the full run's figure. Independent references: the Cole-Hopf
solution of viscous Burgers for the fine solver, the filter's own window for the coarse
initial fields.
"""

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

SCRIPT = Path(__file__).resolve().parents[1] / "experiments" / "burgers_closure.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("burgers_closure", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cole_hopf(x, t, nu, eps=0.9):
    """u = 2 nu e sin(x) / (1 + e cos(x)), e = eps exp(-nu t): an exact solution of
    u_t + u u_x = nu u_xx (Cole-Hopf with phi = 1 + e cos x); eps = 0.9: |u_x| up to 1.8,
    a solution far from a few Fourier modes."""
    e = eps * np.exp(-nu * t)
    return 2 * nu * e * np.sin(x) / (1 + e * np.cos(x))


@pytest.fixture(scope="module")
def runs(script):
    """Training (6) and held-out (3) fields, their filtered fine solutions, and the fine
    solution from the Cole-Hopf field: one ensemble."""
    train, test = script.initial_fields(0, 6), script.initial_fields(1, 3)
    fields = {k: np.r_[train[k], test[k]] for k in script.NAMES}
    x = np.asarray(script.SpectralBurgers().grid.x)
    u0 = np.concatenate([script.fine_start(fields), cole_hopf(x, 0.0, script.NU)[None]])
    fine = script.fine_solution(u0)
    return fields, script.restrict(fine[:-1]), fine[-1]


@pytest.fixture(scope="module")
def trained(script, runs):
    fields, truth, _ = runs
    train = {k: v[:6] for k, v in fields.items()}
    return script.train(script.dataset(train, truth[:6]), steps=40, batch_size=None)


def test_fine_solver_matches_cole_hopf(script, runs):
    x = np.asarray(script.SpectralBurgers().grid.x)
    exact = np.stack([cole_hopf(x, t, script.NU) for t in script.TIMES])
    assert np.max(np.abs(runs[2] - exact)) < 1e-7  # measured 1.5e-8


def test_coarse_start_is_the_cell_average_of_the_fine_start(script):
    fields = {name: values[0] for name, values in script.initial_fields(3, 1).items()}
    fine = script.fine_start(fields)
    grid = ds.Grid.periodic(script.COARSE, script.L)
    coarse = script.ClosedBurgers(**fields, grid=grid).initial_state().u
    np.testing.assert_allclose(coarse, script.restrict(np.asarray(fine)), atol=1e-13)


def test_untrained_closure_adds_nothing(script):
    # Its last layer starts at zero, so the untrained closure is the plain coarse scheme
    # (the baseline of the error ratio).
    last = script.Closure(key=jax.random.key(0)).layers[-1]
    assert np.all(np.asarray(last.weight) == 0.0) and np.all(np.asarray(last.bias) == 0.0)


def test_closure_cuts_the_coarse_error_on_held_out_fields(script, runs, trained):
    fields, truth, _ = runs
    assert trained.status is ds.Status.COMPLETED and trained.num_steps == 40
    plain = script.coarse_model(script.Closure(key=jax.random.key(0)))
    before = script.mean_squares(plain, fields, truth)
    after = script.mean_squares(trained.model, fields, truth)
    # The plain scheme leaves a real error to correct: 1.1 % of the held-out signal's RMS.
    scale = float(np.sqrt(np.mean(truth[6:] ** 2)))
    assert 0.005 < script.rms(before[6:]) / scale < 0.05
    # Measured: held-out 1.5x, training 2.1x after 40 steps (the script: 5x after 600).
    assert script.rms(before[6:]) / script.rms(after[6:]) > 1.3
    assert script.rms(before[:6]) / script.rms(after[:6]) > 1.8


def test_closed_model_conserves_the_mean(script, runs, trained):
    # The initial fields have no k = 0 mode; the learned flux difference telescopes, so the
    # mean stays zero to round-off.
    u = np.asarray(script.trajectories(trained.model, runs[0], jnp.asarray(script.TIMES)))
    assert u.shape == (9, len(script.TIMES), script.COARSE)
    np.testing.assert_allclose(u.mean(axis=-1), 0.0, atol=1e-12)


def test_network_fit_reports_the_residual_variance_without_a_jacobian(script, trained):
    # A free network's covariance is NaN; its Gauss-Newton Jacobian (a tangent solve per
    # weight: 112 s of a 140 s fit here) is no longer computed, sigma2 comes from the loss.
    n, p = 6 * len(script.TIMES) * script.COARSE, 1553
    assert trained.dof == n - p
    assert trained.sigma2 == pytest.approx(2 * trained.loss / (n - p), rel=1e-12)
    assert np.all(np.isnan(trained.covariance)) and trained.covariance.shape == (p, p)
