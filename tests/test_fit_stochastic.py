"""Fitting stochastic models through `ds.fit`: what is refused, and why.

The fits themselves (the exact Kalman likelihood and simulated moments, on the shipped
Ornstein–Uhlenbeck data, against the truth, an independent scipy fit and finite
differences) are docs/stochastic.md's, checked in tests/test_docs_stochastic.py: one run
of each serves both.
"""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from scipy.integrate import quad_vec
from scipy.linalg import expm
from scipy.stats import multivariate_normal

import difsim as ds
from difsim.models import DoubleWellLangevin, OrnsteinUhlenbeck

DATA = Path(__file__).resolve().parents[1] / "data"
FREE = {"theta": ds.Positive(), "mu": ds.Identity(), "sigma": ds.Positive()}


@pytest.fixture(scope="module")
def series():
    return xr.open_dataset(DATA / "ou_series.nc").load()


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


class NoisyOscillator(ds.Model):
    """A damped oscillator driven by noise: dx = v dt, dv = (-ω² x - γ v) dt + σ dW."""

    omega: float = 1.3
    gamma: float = 0.4
    sigma: float = 0.5
    state = ds.State(x=1.0, v=0.0)

    def rhs(self, t, s):
        return dict(x=s.v, v=-(self.omega**2) * s.x - self.gamma * s.v)

    def diffusion(self, t, s):
        return dict(v=self.sigma)


def test_kalman_likelihood_of_a_partly_and_noisily_observed_system():
    # x alone observed, with measurement noise 0.1, at 6 times: the observations are jointly
    # Gaussian. The reference likelihood is the dense one, its covariance built with scipy
    # (matrix exponentials, and the noise covariance by quadrature of e^{As} G Gᵀ e^{Aᵀs}).
    model, times = NoisyOscillator(), np.array([0.0, 0.4, 1.0, 1.7, 2.5, 3.0])
    y = np.array([1.0, 0.85, 0.3, -0.5, -0.2, 0.4])
    data = xr.Dataset({"x": ("time", y)}, coords={"time": times})
    result = ds.fit(model, data, free=["omega"], objective=ds.KalmanLikelihood(),
                    sigma={"x": 0.1}, t0=-0.5, steps=0)  # fmt: skip
    a = np.array([[0.0, 1.0], [-(1.3**2), -0.4]])
    gg = np.array([[0.0, 0.0], [0.0, 0.25]])

    def noise_cov(t):
        return quad_vec(lambda s: expm(a * s) @ gg @ expm(a * s).T, 0.0, t, epsabs=1e-13)[0]

    t = times + 0.5  # from t0 = -0.5, where the state is known
    mean = np.array([(expm(a * ti) @ [1.0, 0.0])[0] for ti in t])
    cov = np.empty((6, 6))
    for i in range(6):
        for j in range(i, 6):
            cov[i, j] = cov[j, i] = (expm(a * (t[j] - t[i])) @ noise_cov(t[i]))[0, 0]
    reference = -multivariate_normal(mean, cov + 0.01 * np.eye(6)).logpdf(y)
    u = jnp.asarray(result.u)
    assert float(result.problem.loss(u)) == pytest.approx(reference, rel=1e-9)
