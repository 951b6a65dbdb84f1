r"""Fitting stochastic models: what a fit compares, as a strategy object passed to `fit`.

- [`SimulatedMoments`][]: the method of simulated moments. Data are observed paths (a
  `path` dimension besides time); the model's mean and variance at each data time come
  from `paths` simulated paths with fixed keys (common random numbers: the same Brownian
  paths at every iteration, so the objective is a smooth function of the parameters and
  its gradient runs through the paths). The moment differences are whitened with the
  covariance of the data's moments, estimated from the data paths and inflated by
  $1 + n_{\rm data}/n_{\rm sim}$ for the simulation's own noise (McFadden, Econometrica 57,
  995 (1989); Duffie & Singleton, Econometrica 61, 929 (1993)): the minimum is the efficient
  GMM estimate and the Gauss–Newton covariance $(J^\top J)^{-1}$ its standard errors.
- [`KalmanLikelihood`][]: the exact likelihood of a linear-Gaussian SDE (`_kalman`).
"""

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, Float

from difsim._core import Model, check_seed, simulate
from difsim._fit._data import FitData, fit_data
from difsim._fit._diagnostics import Estimate, gauss_newton_estimate
from difsim._fit._drivers import forward_jacobian
from difsim._fit._kalman import KalmanProblem, check_linear, step_table
from difsim._fit._problem import AbstractProblem, SimOptions
from difsim._fit._transforms import AbstractTransform
from difsim._io import kept_name

PATH_DIMS = ("path", "sample")  # the data dimension holding observed paths


class AbstractObjective(eqx.Module):
    """What a fit of a stochastic model compares with the data (see the module docstring).

    `optimizer`: the default optimizer (`fit`'s `optimizer` left at its default).
    """

    optimizer: ClassVar[str] = "levenberg_marquardt"

    @abc.abstractmethod
    def problem(
        self, model, names, transforms, dataset, coord, coords, pairs, sigma, t0, sim, dtype
    ) -> AbstractProblem:
        """The fit problem of `model` against `dataset` (checked)."""


class SimulatedMoments(AbstractObjective):
    """Fit the mean and variance over observed paths, at every data time, by simulated
    moments with common random numbers.

    **Arguments:** `paths` (simulated paths per evaluation; default 1000), `seed` (their
    keys: path `i` has `fold_in(key(seed), i)`, the same at every iteration), `dt0` (a
    fixed step: a smooth objective; `None` lets the solver adapt), `brownian` (`"tree"`
    or `"steps"`, as for `simulate`).

    **Example:**

    ```python
    import numpy as np
    import xarray as xr
    import difsim as ds

    # 300 Ornstein-Uhlenbeck paths from x = 2, sampled exactly at 7 times (an AR(1) chain).
    theta, mu, sigma, t = 1.2, 0.5, 0.6, np.linspace(0.0, 3.0, 7)
    a, s = np.exp(-theta * 0.5), sigma * np.sqrt((1 - np.exp(-theta)) / (2 * theta))
    x = np.empty((300, 7))
    x[:, 0], noise = 2.0, np.random.default_rng(0).standard_normal((300, 7))
    for i in range(1, 7):
        x[:, i] = mu + (x[:, i - 1] - mu) * a + s * noise[:, i]
    paths = xr.Dataset({"x": (("path", "time"), x)}, coords={"time": t})

    start = ds.models.OrnsteinUhlenbeck(theta=0.6, mu=mu, sigma=sigma).replace(**{"state.x": 2.0})
    fit = ds.fit(start, paths, free={"theta": ds.Positive()}, solver="euler",
                 objective=ds.SimulatedMoments(paths=500, seed=1, dt0=0.05, brownian="steps"))
    assert abs(fit.parameters["theta"] - theta) < 3 * fit.stderr["theta"]  # truth within 3 s.e.
    ```
    """

    paths: int = eqx.field(default=1000, static=True)
    seed: int = eqx.field(default=0, static=True)
    dt0: float | None = eqx.field(default=None, static=True)
    brownian: str = eqx.field(default="tree", static=True)

    def __check_init__(self):
        if not isinstance(self.paths, int) or self.paths < 2:
            raise ValueError(f"SimulatedMoments: paths must be an integer >= 2, got {self.paths!r}")
        check_seed(self.seed, "SimulatedMoments: seed")

    def problem(
        self, model, names, transforms, dataset, coord, coords, pairs, sigma, t0, sim, dtype
    ):
        if not model.is_stochastic():
            raise ValueError(
                f"SimulatedMoments fits a stochastic model; {type(model).__name__} has no noise"
            )
        if sigma:
            raise ValueError("SimulatedMoments weighs the moments by their covariance: drop sigma")
        values, targets, names_out = _path_data(dataset, coord, pairs)
        data = _moment_data(values, coords, coord, targets, names_out, dataset, dtype)
        whiten, keep = _whitening(values, self.paths)
        keys = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(self.seed), i))(
            jnp.arange(self.paths, dtype=jnp.uint32)
        )
        prepend = bool(t0 < coords[0])
        return MomentsProblem(
            model,
            tuple(names),
            tuple(transforms),
            data,
            "gaussian",
            sim,
            jnp.asarray(t0, dtype),
            prepend,
            keys,
            self.dt0,
            self.brownian,
            jnp.asarray(whiten, dtype),
            tuple(int(k) for k in keep),
        )


class KalmanLikelihood(AbstractObjective):
    """Fit a linear-Gaussian SDE (affine drift, additive noise: e.g. Ornstein–Uhlenbeck) to
    one observed path by its exact likelihood (the Kalman filter; `_kalman`). `fit`'s
    `sigma` gives the measurement noise of each data variable (default: exact).
    Standard errors: the inverse of the negative log-likelihood's Hessian.

    **Example:**

    ```python
    import numpy as np
    import xarray as xr
    import difsim as ds

    # An Ornstein-Uhlenbeck path sampled exactly (an AR(1) chain): x' = mu + (x - mu) a + s e,
    # a = exp(-theta dt), s² = sigma² (1 - a²) / (2 theta).
    theta, mu, sigma, dt, n = 1.2, 0.5, 0.6, 0.1, 200
    a, s = np.exp(-theta * dt), sigma * np.sqrt((1 - np.exp(-2 * theta * dt)) / (2 * theta))
    x = np.empty(n)
    x[0], noise = 2.0, np.random.default_rng(0).standard_normal(n)
    for i in range(1, n):
        x[i] = mu + (x[i - 1] - mu) * a + s * noise[i]
    data = xr.Dataset({"x": ("time", x)}, coords={"time": dt * np.arange(n)})

    model = ds.models.OrnsteinUhlenbeck(mu=mu).replace(**{"state.x": x[0]})
    fit = ds.fit(model, data, free={"theta": ds.Positive(), "sigma": ds.Positive()},
                 objective=ds.KalmanLikelihood())
    # The maximum likelihood in closed form: the least-squares slope of the chain, and the
    # mean squared innovation.
    u, v = x[:-1] - mu, x[1:] - mu
    a_hat = (u @ v) / (u @ u)
    s2_hat = np.mean((v - a_hat * u) ** 2)
    theta_hat = -np.log(a_hat) / dt
    np.testing.assert_allclose(fit.parameters["theta"], theta_hat, rtol=1e-4)
    sigma2_hat = 2 * theta_hat * s2_hat / (1 - a_hat**2)
    np.testing.assert_allclose(fit.parameters["sigma"] ** 2, sigma2_hat, rtol=1e-4)
    ```
    """

    optimizer: ClassVar[str] = "bfgs"

    def problem(
        self, model, names, transforms, dataset, coord, coords, pairs, sigma, t0, sim, dtype
    ):
        if not model.is_stochastic():
            raise ValueError(f"KalmanLikelihood fits an SDE; {type(model).__name__} has no noise")
        check_linear(model, float(t0))
        state_names = model.initial_state().names
        for name, target in pairs:
            if not isinstance(target, str):
                raise ValueError(f"KalmanLikelihood: observe[{name!r}] must name a state variable")
        data = fit_data(
            dataset, coord, coords, pairs, noise="gaussian", weights=None, sigma=None, dtype=dtype
        )
        obs_var = np.array([float(np.asarray((sigma or {}).get(n, 0.0))) ** 2 for n, _ in pairs])
        observed = tuple(state_names.index(target) for _, target in pairs)
        steps, index = step_table(float(t0), coords)
        return KalmanProblem(
            model, tuple(names), tuple(transforms), data, "gaussian", jnp.asarray(t0, dtype),
            observed, jnp.asarray(obs_var, dtype), jnp.asarray(steps, dtype), index,
        )  # fmt: skip


def _path_data(dataset: xr.Dataset, coord: str, pairs):
    """`(values (paths, time, k), targets, names)` of the observed paths."""
    columns, targets, names = [], [], []
    for name, target in pairs:
        da = dataset[name]
        other = [d for d in da.dims if d != coord]
        if len(other) != 1:
            raise ValueError(
                f"SimulatedMoments needs observed paths: data variable {name!r} must have "
                f"dimensions ({coord!r}, 'path'), got {da.dims}"
            )
        if not isinstance(target, str):
            raise ValueError(f"SimulatedMoments: observe[{name!r}] must name a state variable")
        columns.append(np.asarray(da.transpose(other[0], coord).values, np.float64))
        targets.append(target)
        names.append(name)
    values = np.stack(columns, axis=-1)
    if values.shape[0] < 3:
        raise ValueError(f"SimulatedMoments needs at least 3 observed paths, got {values.shape[0]}")
    if not np.all(np.isfinite(values)):
        raise ValueError("SimulatedMoments: the observed paths hold NaN or infinite values")
    return values, tuple(targets), tuple(names)


def _moment_data(values, coords, coord, targets, names, dataset, dtype) -> FitData:
    """The data's moments as a `FitData` `(time, 2k)`: means, then variances."""
    mean, var = values.mean(axis=0), values.var(axis=0, ddof=1)
    moments = np.concatenate([mean, var], axis=1)
    units = [dataset[n].attrs.get("units") for n in names]
    return FitData(
        times=jnp.asarray(coords, dtype),
        values=jnp.asarray(moments, dtype),
        mask=jnp.ones(moments.shape, bool),
        weights=jnp.ones(moments.shape, dtype),
        names=tuple(kept_name(n, "mean") for n in names)
        + tuple(kept_name(n, "var") for n in names),
        targets=targets + targets,
        coord=coord,
        units=tuple(units) + tuple(None if u is None else f"({u})^2" for u in units),
    )


def _whitening(values: np.ndarray, n_sim: int) -> tuple[np.ndarray, np.ndarray]:
    """`(L⁻¹, kept)`: the inverse Cholesky factor of the covariance of the kept moments
    (means and variances at every time; a variance that is zero in the data, e.g. at a
    fixed initial state, is dropped), from the per-path influence functions, times
    `1 + n_data / n_sim`. With fewer paths than moments the covariance is singular: its
    diagonal is used instead."""
    n = values.shape[0]
    dev = values - values.mean(axis=0)
    var = values.var(axis=0, ddof=1)
    # Ordered as the residuals: time, then (means, variances), then variable.
    influence = np.concatenate([dev, dev**2 - var], axis=2).reshape(n, -1)  # (n, T 2k)
    kept = np.flatnonzero(np.concatenate([var, var], axis=1).reshape(-1) > 0)
    influence = influence[:, kept]
    cov = np.cov(influence, rowvar=False).reshape(kept.size, kept.size) / n * (1 + n / n_sim)
    if kept.size >= n:
        cov = np.diag(np.diag(cov))
    cov = cov + np.eye(kept.size) * 1e-12 * np.trace(cov) / kept.size
    return np.linalg.inv(np.linalg.cholesky(cov)), kept


class MomentsProblem(AbstractProblem):
    """The residuals of [`SimulatedMoments`][]: whitened differences between simulated and
    observed moments; `data` holds the observed moments `(time, 2k)`."""

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple[AbstractTransform, ...]
    data: FitData
    noise: str = eqx.field(static=True)
    sim: SimOptions
    t0: Float[Array, ""]
    prepend: bool = eqx.field(static=True)
    keys: Any
    dt0: float | None = eqx.field(static=True)
    brownian: str = eqx.field(static=True)
    whiten: Float[Array, "m m"]
    kept: tuple[int, ...] = eqx.field(static=True)

    def _moments(self, model: Model, times) -> tuple[Array, Array]:
        ts = jnp.concatenate([self.t0[None], times]) if self.prepend else times
        targets = self.data.targets[: len(self.data.targets) // 2]

        def one(key):
            sol = simulate(
                model,
                t=ts,
                key=key,
                solver=self.sim.solver,
                dt0=self.dt0,
                rtol=self.sim.rtol,
                atol=self.sim.atol,
                max_steps=self.sim.max_steps,
                adjoint=self.sim.adjoint,
                brownian=self.brownian,
                throw=False,
            )
            x = jnp.stack([sol.ys[t] for t in targets], axis=-1)
            return x[1:] if self.prepend else x, sol.ok

        x, ok = jax.vmap(one)(self.keys)  # (paths, time, k)
        moments = jnp.concatenate([x.mean(axis=0), x.var(axis=0, ddof=1)], axis=1)
        return moments, jnp.all(ok)

    def residuals(self, u):
        moments, ok = self._moments(self.model_from(u), self.data.times)
        diff = (moments - self.data.values).reshape(-1)[np.asarray(self.kept)]
        return jnp.where(ok, self.whiten @ diff, jnp.nan)

    def num_residuals(self) -> int:
        return len(self.kept)

    def predict(self, model, coords):
        return self._moments(model, jnp.asarray(coords, self.data.times.dtype))[0]

    def covariance(self, u) -> Estimate:
        """The [`Estimate`][] of a GMM fit: the covariance $(J^\\top J)^{-1}$ of the
        whitened residuals, in natural units (not rescaled by the residual variance: the
        weights are the moments' estimated covariance; `sigma2` is the J-statistic / dof)."""
        estimate = gauss_newton_estimate(self, u, scale=1.0, jacobian=_forward_jacobian)
        r = estimate.residuals
        dof = r.shape[0] - u.shape[0]
        j_stat = float(r @ r / dof) if dof > 0 else float("nan")
        return estimate._replace(sigma2=j_stat, dof=dof)


@eqx.filter_jit
def _jacobian(problem, u):
    """Residuals and their forward-mode Jacobian, compiled (what the covariance uses)."""
    return forward_jacobian(problem, u)


def _forward_jacobian(problem, u):
    return _jacobian(problem.with_adjoint("forward"), u)
