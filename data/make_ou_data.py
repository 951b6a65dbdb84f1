"""Make the two synthetic Ornstein–Uhlenbeck datasets of the stochastic-fitting examples.

Both are sampled exactly from the process's Gaussian transition density (numpy only, no
SDE solver): given X_s = x, X_{s+Δ} ~ N(μ + (x - μ) e^{-θΔ}, σ²(1 - e^{-2θΔ}) / (2θ)).
The true parameters are stored as attributes, so fits can be checked against them.

    python data/make_ou_data.py      # writes data/ou_series.nc and data/ou_paths.nc
"""

from pathlib import Path

import numpy as np
import xarray as xr

THETA, MU, SIGMA = 1.2, 0.5, 0.6  # the truth: mean-reversion rate, long-run mean, noise
HERE = Path(__file__).resolve().parent


def sample(times: np.ndarray, x0: float, paths: int, rng: np.random.Generator) -> np.ndarray:
    """Exact OU paths `(paths, len(times))` from `x0` at `times[0]`."""
    x = np.empty((paths, times.size))
    x[:, 0] = x0
    for i, dt in enumerate(np.diff(times), start=1):
        decay = np.exp(-THETA * dt)
        sd = np.sqrt(SIGMA**2 / (2 * THETA) * (1 - decay**2))
        x[:, i] = MU + (x[:, i - 1] - MU) * decay + sd * rng.standard_normal(paths)
    return x


def main() -> None:
    rng = np.random.default_rng(20260101)
    attrs = dict(theta=THETA, mu=MU, sigma=SIGMA, source="data/make_ou_data.py (exact sampling)")
    times = np.round(np.arange(0.0, 50.0 + 1e-9, 0.1), 10)
    series = sample(times, 1.0, 1, rng)[0]
    xr.Dataset(
        {"x": ("time", series, {"long_name": "position"})},
        coords={"time": ("time", times)},
        attrs={**attrs, "title": "one Ornstein-Uhlenbeck path, observed exactly every 0.1"},
    ).to_netcdf(HERE / "ou_series.nc", engine="h5netcdf")
    times = np.round(np.linspace(0.0, 3.0, 16), 10)
    paths = sample(times, 2.0, 200, rng)
    xr.Dataset(
        {"x": (("time", "path"), paths.T, {"long_name": "position"})},
        coords={"time": ("time", times)},
        attrs={**attrs, "title": "200 Ornstein-Uhlenbeck paths from x = 2, observed at 16 times"},
    ).to_netcdf(HERE / "ou_paths.nc", engine="h5netcdf")


if __name__ == "__main__":
    main()
