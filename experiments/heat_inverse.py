"""A PDE inverse problem (4D-Var style): the initial temperature of a rod recovered from
three noisy thermometers read at later times.

The rod (10 cm, copper, ends held at the reference temperature) follows the heat equation
$u_t = D u_{xx}$. Its initial field is a sum of `K` sine modes,
$u_0(x) = \\sum_k m_k \\sin(k\\pi x/L)$, so the exact solution is analytic: each mode decays
as $e^{-D (k\\pi/L)^2 t}$. The data are that exact solution at three sensors, from
$t = 0.5$ s on (never the initial field itself), plus Gaussian noise. `ds.fit` frees the
array parameter `modes` (the `K` coefficients) of a `Heat` model whose `initial_state()`
builds the field from them; the fitted field is compared with the truth, and the error with
what the noise allows (the fit's covariance).

Every grid value free would be ill-posed: heat damps mode `k` by $e^{-D(k\\pi/L)^2 t}$, so
high modes leave no trace in the data. The table printed last shows how the standard errors
of the coefficients grow with `K` for these sensors and times (from the exact, linear
observation operator): `K = 5` is determined to a few per cent of the field, `K = 8` is not.

Run: `python experiments/heat_inverse.py` (about 20 s of CPU: two fits, each compiled).
"""

import time
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

import difsim as ds
from difsim.models import Heat

jax.config.update("jax_enable_x64", True)

L, N, D = 0.1, 32, 1.11e-4  # rod length (m), cells, diffusivity (m²/s, copper)
TRUE_MODES = np.array([1.0, -0.6, 0.4, 0.25, -0.2])  # K (sine coefficients)
SENSORS = {"T_a": 5, "T_b": 12, "T_c": 21}  # thermometer cells: x = 1.72, 3.91, 6.72 cm
TIMES = np.arange(1, 21) * 0.5  # s: 0.5 ... 10, the initial field is never observed
NOISE = 0.01  # K, standard deviation of each reading


def sine_basis(x, k: int):
    """`(len(x), k)`: the rod's Dirichlet eigenfunctions $\\sin(j\\pi x/L)$, `j = 1..k`."""
    return jnp.sin(jnp.pi * jnp.asarray(x)[:, None] * jnp.arange(1, k + 1)[None, :] / L)


class HeatModes(Heat):
    """`Heat` whose initial field is the sum of `len(modes)` sine modes."""

    modes: jax.Array = eqx.field(default_factory=lambda: np.zeros(5))
    # Fixed steps: an adaptive controller started from a cold rod (u = 0) sees no error and
    # takes huge steps; the derivatives (not the zero solution) then go unstable and the fit
    # cannot leave the start. 0.025 s is stable for Tsit5 here (|lambda| dt <= 1.5).
    solver_defaults: ClassVar[dict[str, Any]] = {
        "solver": "tsit5",
        "dt0": 0.025,
        "controller": "constant",
    }

    def initial_state(self) -> ds.State:
        return self.state.with_values({"u": sine_basis(self.grid.x, len(self.modes)) @ self.modes})


def exact(x, t, modes):
    """The heat equation's exact solution, `(len(t), len(x))`."""
    k = np.arange(1, len(modes) + 1) * np.pi / L
    decay = np.exp(-D * k[None, :] ** 2 * np.asarray(t)[:, None])  # (times, modes)
    return (decay * modes[None, :]) @ np.sin(k[:, None] * np.asarray(x)[None, :])


def observations(rod, seed=0, noise=NOISE):
    """The sensors' readings: the exact solution plus Gaussian noise, as a Dataset."""
    x = np.asarray(rod.x)[list(SENSORS.values())]
    clean = exact(x, TIMES, TRUE_MODES)
    noisy = clean + noise * np.random.default_rng(seed).standard_normal(clean.shape)
    data = {name: ("time", noisy[:, j]) for j, name in enumerate(SENSORS)}
    return xr.Dataset(data, coords={"time": TIMES})


def recover(data, rod, k=len(TRUE_MODES)):
    """Fit the `k` mode coefficients, starting from a cold rod (all zero)."""
    observe = {name: (lambda s, i=i: s.u[i]) for name, i in SENSORS.items()}
    model = HeatModes(D=D, grid=rod, order=4, modes=np.zeros(k))
    return ds.fit(model, data, ["modes"], observe=observe, t0=0.0)


def field_errors(result, rod):
    """Relative L2 error of the fitted initial field, and its expectation from the noise."""
    basis = np.asarray(sine_basis(rod.x, len(TRUE_MODES)))
    truth = basis @ TRUE_MODES
    fitted = basis @ np.asarray(result.parameters["modes"])
    relative = np.linalg.norm(fitted - truth) / np.linalg.norm(truth)
    expected = np.sqrt(np.trace(basis @ result.covariance @ basis.T)) / np.linalg.norm(truth)
    return float(relative), float(expected)


def design_matrix(rod, k):
    """`(readings, k)`: the exact (linear) map from `k` coefficients to the readings, in
    the data's order (time-major, then sensor)."""
    x = np.asarray(rod.x)[list(SENSORS.values())]
    return np.stack([exact(x, TIMES, np.eye(k)[j]).ravel() for j in range(k)], axis=1)


def design_stderr(rod, k, noise=NOISE):
    """Standard errors of `k` coefficients from the exact observation operator."""
    a = design_matrix(rod, k)
    return noise * np.sqrt(np.diag(np.linalg.inv(a.T @ a)))


def main():
    rod = ds.Grid.dirichlet(N, L)
    start = time.perf_counter()
    result = recover(observations(rod), rod)
    seconds = time.perf_counter() - start
    modes, stderr = np.asarray(result.parameters["modes"]), np.asarray(result.stderr["modes"])
    print(result.summary())
    cells = list(SENSORS.values())
    print(f"\n{N} cells, D = {D} m²/s, sensors at cells {cells}, {len(TIMES)} times")
    print(f"{TIMES[0]}-{TIMES[-1]} s, noise {NOISE} K, K = {len(modes)} sine modes")
    print(f"fit: {result.status}, {result.num_steps} steps, {seconds:.1f} s (with compile)")
    print(" k   truth    fitted     stderr   (fitted-truth)/stderr")
    for j, (m, f, e) in enumerate(zip(TRUE_MODES, modes, stderr, strict=True)):
        print(f"{j + 1:2d} {m:7.3f} {f:9.5f} {e:10.5f} {(f - m) / e:8.2f}")
    relative, expected = field_errors(result, rod)
    print(f"initial field: relative L2 error {relative:.4f} (noise expectation {expected:.4f})")
    bias = recover(observations(rod, noise=0.0), rod)
    offset = np.max(np.abs(np.asarray(bias.parameters["modes"]) - TRUE_MODES) / stderr)
    print(f"noise-free data: coefficients within {offset:.3f} stderr (discretisation bias)")
    print("\n K  largest coefficient stderr (exact linear operator, this noise)")
    for k in (3, 4, 5, 6, 7, 8):
        print(f"{k:2d}  {design_stderr(rod, k).max():.3g}")


if __name__ == "__main__":
    main()
