r"""Fits to several experiments at once, in minibatches, with a validation split.

Data with an experiment dimension (`experiment`, or `fit(..., experiment=<dim>)`) hold one
time series per experiment: variables over `(experiment, time)` are observations, and a
variable over `experiment` alone named after a parameter or `"state.<var>"` is that
experiment's own value (its initial state, a control, a dose). The free variables are
shared by all experiments; the loss sums over them.

With `batch_size`, each optimizer step sees a random subset of the training experiments
(drawn without replacement from the step's own key, so a resumed fit draws the same
batches), its residuals scaled by $\sqrt{E/B}$ so that the minibatch loss is an unbiased
estimate of the full one. Experiments held out for validation (`validation=`) are never
trained on; their loss, evaluated after every block of steps, picks the result and stops
the fit after `patience` evaluations without improvement.
"""

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, Float

from difsim._core import Model, state_var
from difsim._fit._data import FitData, fit_data, observe_states, residuals
from difsim._fit._free import with_values
from difsim._fit._problem import AbstractProblem, SimOptions


class ExperimentsProblem(AbstractProblem):
    """Single shooting of every experiment (or a minibatch of them) from its own values."""

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple
    data: FitData  # values, mask, weights: (E, n, k); times (n,)
    noise: str = eqx.field(static=True)
    sim: SimOptions
    t0: Float[Array, ""]
    prepend: bool = eqx.field(static=True)
    points: dict[str, Array]  # {key: (E, ...)}, each experiment's own values
    labels: tuple = eqx.field(static=True)  # (E,) the experiment coordinate
    dim: str = eqx.field(static=True)
    batch: int | None = eqx.field(static=True, default=None)
    key: Any = None  # PRNG key data of the minibatches
    scale: float = eqx.field(static=True, default=1.0)  # sqrt(E / B) in a minibatch

    def _one(self, model, point, values, mask, weights, times):
        data = dataclasses.replace(self.data, values=values, mask=mask, weights=weights)
        predicted, ok = self._observe(with_values(model, point), times)
        return jnp.where(ok, residuals(predicted, data, self.noise), jnp.nan)

    def _observe(self, model, times):
        ts = jnp.concatenate([self.t0[None], times]) if self.prepend else times
        sol = self.sim.simulate(model, ts)
        ys = {k: v[1:] if self.prepend else v for k, v in sol.ys.items()}
        return observe_states(ys, sol.var_info, self.data.targets), sol.ok

    def residuals(self, u):
        model, d = self.model_from(u), self.data
        r = jax.vmap(self._one, in_axes=(None, 0, 0, 0, 0, None))(
            model, self.points, d.values, d.mask, d.weights, d.times
        )
        return self.scale * r.reshape(-1)

    def predict(self, model, coords):
        """`(E, c, k)`: each experiment's observed quantities at `coords`."""

        def one(point):
            return self._observe(with_values(model, point), coords)[0]

        return jax.vmap(one)(self.points)

    def full(self):
        return dataclasses.replace(self, batch=None, scale=1.0)

    def at_step(self, step):
        """The minibatch of step `step` (all experiments without `batch`)."""
        if self.batch is None:
            return self
        n = self.data.values.shape[0]
        key = jax.random.fold_in(jax.random.wrap_key_data(self.key), step)
        pick = jax.random.permutation(key, n)[: self.batch]
        return self.subset(pick, scale=math.sqrt(n / self.batch), batch=None)

    def subset(self, index, *, scale: float = 1.0, batch=None) -> "ExperimentsProblem":
        """The problem on the experiments at `index` (a NumPy or traced index array)."""
        d = self.data
        data = dataclasses.replace(d, values=d.values[index], mask=d.mask[index],
                                   weights=d.weights[index])  # fmt: skip
        points = {k: v[index] for k, v in self.points.items()}
        labels = (
            self.labels
            if not isinstance(index, np.ndarray)
            else tuple(self.labels[i] for i in index)
        )
        return dataclasses.replace(self, data=data, points=points, labels=labels, batch=batch,
                                   scale=scale)  # fmt: skip


def experiment_dim(dataset: xr.Dataset, coord: str, experiment: str | None) -> str | None:
    """The experiment dimension of `dataset` (`None`: one time series)."""
    if experiment is not None:
        if experiment not in dataset.dims:
            raise ValueError(
                f"the data have no dimension {experiment!r} of experiments; dimensions are "
                f"{', '.join(map(str, dataset.dims))}"
            )
        return experiment
    others = [str(d) for d in dataset.dims if d != coord]
    return "experiment" if "experiment" in others else None


def experiment_points(model: Model, dataset: xr.Dataset, dim: str, dtype) -> dict[str, Any]:
    """`{key: (E,)}` from the variables over `dim` alone: a parameter or `"state.<var>"`
    of `model` each, checked."""
    points = {}
    for name, var in dataset.data_vars.items():
        if var.dims != (dim,):
            continue
        name = str(name)
        var_name = state_var(name)
        known = (
            var_name in model.initial_state().names
            if var_name
            else (name in model.parameter_names())
        )
        if not known:
            raise ValueError(
                f"data variable {name!r} over {dim!r} alone is neither a parameter of "
                f"{type(model).__name__} nor 'state.<var>': an experiment's own values must "
                "be named after what they set"
            )
        values = np.asarray(var.values, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"data variable {name!r} (each experiment's value) is not finite")
        points[name] = jnp.asarray(values, dtype)
    return points


def stacked_data(dataset, coord, coords, pairs, dim, *, noise, weights, sigma, dtype):
    """One [`FitData`][] with `values`, `mask`, `weights` of shape `(E, n, k)`."""
    observed = [n for n, v in dataset.data_vars.items() if v.dims == (dim, coord)]
    parts = []
    for i in range(dataset.sizes[dim]):
        one = dataset[observed].isel({dim: i})
        try:
            parts.append(fit_data(one, coord, coords, pairs, noise=noise, weights=weights,
                                  sigma=sigma, dtype=dtype))  # fmt: skip
        except ValueError as e:
            label = dataset[dim].values[i] if dim in dataset.coords else i
            raise ValueError(f"experiment {dim} = {label}: {e}") from None
    first = parts[0]
    return dataclasses.replace(
        first,
        values=jnp.stack([p.values for p in parts]),
        mask=jnp.stack([p.mask for p in parts]),
        weights=jnp.stack([p.weights for p in parts]),
    )


def experiments_problem(model, transforms, fdata, points, dataset, dim, sim, t0, *,
                        noise, batch_size, validation, seed):  # fmt: skip
    """`(training problem, validation problem or None)` of a fit to experiments."""
    labels = (
        tuple(np.asarray(dataset[dim].values).tolist())
        if dim in dataset.coords
        else (tuple(range(dataset.sizes[dim])))
    )
    grid_prepend = bool(t0 < float(np.asarray(fdata.times)[0]))
    problem = ExperimentsProblem(
        model, tuple(transforms), tuple(transforms.values()), fdata, noise, sim,
        jnp.asarray(t0, fdata.times.dtype), grid_prepend, points, labels, dim,
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    held = validation_index(labels, validation, dim, rng)
    train = np.setdiff1d(np.arange(len(labels)), held)
    monitor = problem.subset(held) if held.size else None
    problem = problem.subset(train) if held.size else problem
    if batch_size is None:
        return problem, monitor
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if batch_size >= train.size:
        raise ValueError(
            f"batch_size={batch_size} is not below the {train.size} training experiments: "
            "leave it out to use them all at every step"
        )
    key = jax.random.key_data(jax.random.key(seed))
    return dataclasses.replace(problem, batch=batch_size, key=key), monitor


def validation_index(labels: tuple, validation, dim: str, rng) -> np.ndarray:
    """The positions of the held-out experiments: a fraction of them (at least one, drawn
    by `rng`), or those with the given labels."""
    n = len(labels)
    if validation is None:
        return np.zeros(0, int)
    if isinstance(validation, float):
        if not 0 < validation < 1:
            raise ValueError(f"validation must be a fraction in (0, 1), got {validation!r}")
        count = max(1, round(validation * n))
        if count >= n:
            raise ValueError(f"validation={validation} leaves no experiment to train on ({n})")
        return np.sort(rng.choice(n, count, replace=False))
    picked = list(validation)
    unknown = [v for v in picked if v not in labels]
    if unknown:
        raise ValueError(
            f"validation names {unknown[0]!r}, which is not an experiment ({dim} = "
            f"{', '.join(map(str, labels[:8]))}{', ...' if n > 8 else ''})"
        )
    if len(set(picked)) >= n:
        raise ValueError("validation holds out every experiment: none is left to train on")
    return np.array(sorted(labels.index(v) for v in set(picked)))
