r"""`FitResult`: fitted model, parameters with standard errors, loss history, outputs.

Standard errors come from the Gauss–Newton approximation at the optimum $\hat\theta$:
$$\mathrm{Cov}(\hat\theta) \approx \hat\sigma^2 (J^\top J)^{-1},\qquad
\hat\sigma^2 = \frac{\sum_i r_i^2}{n - p},$$
with $J = \partial r/\partial\theta$ the Jacobian of the weighted residuals with respect to
the free variables in natural units (the chain rule through each transform), $n$ the number
of residuals and $p$ the number of free variables.
"""

import json
import os
from pathlib import Path
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim._core import Model
from difsim._fit._free import describe_value, plain_value, stderr_spread
from difsim._fit._output import fit_dataset
from difsim._fit._problem import AbstractProblem
from difsim._io import (
    KIND_ATTR,
    atomic_write,
    atomic_write_text,
    check_output,
)
from difsim._plot import plot as plot_output
from difsim._status import Status

# Above this many free values the Gauss–Newton estimate (a Jacobian with one column per
# value, and its SVD) would cost more than the fit; the result then has NaN standard errors
# and no final-point test.
COVARIANCE_LIMIT = 2000


class FitResult(eqx.Module):
    """The outcome of [`fit`][].

    **Fields:**

    - `model`: the fitted model (free parameters and initial state at the optimum).
    - `parameters`, `stderr`: `{name: value}` of the free parameters (`"state.x"` for an
      initial value) and their standard errors (Gauss–Newton, natural units).
    - `covariance`: `(p, p)` covariance of the free parameters, in the order of `names`.
    - `loss`: $\\tfrac12\\sum r_i^2$ at the optimum; `sigma2`: residual variance
      $\\sum r_i^2/(n-p)$; `dof`: $n - p$.
    - `loss_history`, `grad_norm_history`: per step (of the best start), `(steps,)`.
    - `status`: a [`Status`][]: `CONVERGED` (the optimizer's test passed, and the result
      passed the final-point test: it is a minimum), `FIT_STALLED` (the optimizer's test
      passed, the final-point test did not), `COMPLETED` (all steps run; optax has no
      convergence test), `FIT_MAX_STEPS`, `DIVERGED` or `OPTIMIZER_FAILED`. It prints as,
      and compares equal to, the text the outputs store: `"converged"`, `"stalled"`,
      `"completed"`, `"max_steps"`, `"diverged"`, `"failed"`. `message`: what happened
      (for a failed optimizer, in the optimizer's own words), with the final-point test's
      numbers.
    - `num_steps`: steps taken by the best start; `rejected_steps`: how many of them were
      rejected (non-finite loss or failed solve; for optimistix also trust-region or
      line-search rejections).
    - `start_losses`, `start_parameters`: with a multistart, each start's final loss
      `(starts,)` and parameters `{name: (starts,)}`; `best_start` its index.
    - `newton_decrease`, `newton_step`: the final-point test (`difsim._fit._diagnostics`):
      the loss a Gauss–Newton step from the result would still remove, and that step's
      length in standard errors (NaN where undefined).
    - `monitor_history`: a fit to experiments with `validation` (or minibatches):
      `(evaluations, 2)`, the step count and the `monitor_kind` (`"validation"` or
      `"training"`) loss after each block of steps; `None` otherwise. `curriculum`: with
      one, `(stages, 2)`: each stage's first step and horizon (`None` without).
    - `notes`: warnings on the result (also issued as [`FitWarning`][]): relative standard
      errors above 100 %, a near-singular Gauss–Newton Hessian, a fit that explains less
      than half of the data's variation.

    **Example:**

    ```python
    import numpy as np
    import xarray as xr
    import difsim as ds

    t = np.linspace(0.0, 4.0, 21)
    data = xr.Dataset({"y": ("time", np.exp(-0.35 * t))}, coords={"time": t})
    result = ds.fit(ds.models.ExponentialDecay(), data, free={"k": ds.Positive()})
    assert result.status.ok and abs(result.model.k - 0.35) < 1e-3  # the fitted model
    print(result.summary())  # parameters, standard errors, status
    ```
    """

    model: Model
    parameters: dict[str, float]
    stderr: dict[str, float]
    covariance: np.ndarray
    loss: float
    sigma2: float
    dof: int
    loss_history: np.ndarray
    grad_norm_history: np.ndarray
    status: Status
    message: str
    num_steps: int
    rejected_steps: int
    names: tuple[str, ...]
    transforms: tuple[str, ...]
    optimizer: str
    start_losses: np.ndarray | None
    start_parameters: dict[str, np.ndarray] | None
    best_start: int | None
    problem: AbstractProblem
    u: np.ndarray
    newton_decrease: float
    newton_step: float
    notes: tuple[str, ...]
    monitor_history: np.ndarray | None = None
    monitor_kind: str | None = None
    curriculum: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        """Whether the fit ended normally (converged, or ran all its steps without a
        convergence test); `False` for a stalled, failed or diverged one."""
        return self.status.ok

    data = property(lambda self: self.problem.data, doc="The observations used (a `FitData`).")

    def predict(self, coords=None) -> np.ndarray:
        """Fitted observed quantities `(len(coords), k)` at `coords` (default: the data's)."""
        coords = self.problem.data.times if coords is None else jnp.asarray(coords)
        return predict(self.problem, self.model, coords)

    # ------------------------------------------------------------ text
    def summary(self) -> str:
        """A table of the fitted values with standard errors, and the fit's outcome."""
        rows = [("parameter", "value", "std. error", "rel. error", "range")]
        for name, transform in zip(self.names, self.transforms):
            value, se = self.parameters[name], self.stderr[name]
            if not isinstance(value, float):  # an array or a module: its size, its spread
                rows.append((name, describe_value(value), stderr_spread(value, se), "", transform))
                continue
            rel = f"{abs(se / value):.2%}" if value != 0 and np.isfinite(se) else "n/a"
            rows.append((name, f"{value:.6g}", f"{se:.3g}", rel, transform))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"Fit of {type(self.model).__name__} ({self.optimizer}): {self.status.text}"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        obs = self.problem.data.num_observations
        lines.append(
            f"loss {self.loss:.6g} (½·sum of squared residuals), {obs} observations, "
            f"{self.problem.num_free()} free, residual variance {self.sigma2:.4g} ({self.dof} dof)"
        )
        if self.start_losses is not None:
            finite = np.isfinite(self.start_losses)
            lines.append(
                f"multistart: {len(self.start_losses)} starts, best #{self.best_start}; "
                f"{int(finite.sum())} finished with a finite loss"
            )
        lines.append(self.message)
        lines += [f"warning: {note}" for note in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    # ------------------------------------------------------------ outputs
    def to_xarray(self, points: int = 201, *, references: dict | None = None) -> xr.Dataset:
        """The fit as a CF-style `xarray.Dataset` (`difsim_output = "fit"`).

        - The data coordinate with the data's attributes (units from the model's
          `time_units`, or the control parameter's, where the data give none).
        - Per observed variable `y`: `y` (the data, with the data's attributes; units from
          the observed state variable where the data give none), `y_fit` (the fit at the
          data points), `y_residual` (data - fit, or log(data / fit) for lognormal noise),
          and over `<coord>_curve` (`points` values spanning the data) `y_curve` with
          `y_lower`/`y_upper`, the edges of an approximate 95 % prediction band.
        - Over `parameter`: `value` and `stderr` (Gauss–Newton), each entry's units in
          the coordinate `parameter_units`; `correlation` over (`parameter`,
          `parameter2`). The covariance is `correlation * stderr[i] * stderr[j]`.
        - `loss_history`, `grad_norm_history` over `step`; `start_loss` over `start`
          with a multistart. Global attributes: CF's (`Conventions`, `history`,
          `source`), the fit's outcome, and the data's own as `data_<name>`.
        - Per free network `f` called by `rhs`: `learned_f` over the inputs the fitted
          trajectory gives it, and `reference_f` there with `references={"f": true_f}`.
        """
        return fit_dataset(self, points, references)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-ready summary: parameters, standard errors, loss, status."""
        return dict(
            model=type(self.model).__name__,
            optimizer=self.optimizer,
            status=self.status.text,
            message=self.message,
            parameters={k: plain_value(v) for k, v in self.parameters.items()},
            stderr={k: plain_value(v) for k, v in self.stderr.items()},
            covariance=self.covariance.tolist(),
            names=list(self.names),
            loss=self.loss,
            sigma2=self.sigma2,
            dof=self.dof,
            num_steps=self.num_steps,
            loss_history=self.loss_history.tolist(),
            newton_decrease=self.newton_decrease,
            newton_step=self.newton_step,
            notes=list(self.notes),
        )

    def save(self, path: str | os.PathLike, *, overwrite: bool = False,
             attrs: dict[str, Any] | None = None) -> Path:  # fmt: skip
        """Write the result to `path`: netCDF (`.nc`, see [`to_xarray`][]) or JSON
        (`.json`, see `to_dict`). Written to a temporary file first, then renamed.

        **Arguments:** `overwrite` replaces an earlier difsim fit output at `path` (a file
        difsim did not write is never replaced); `attrs` adds text entries (global
        attributes, or top-level JSON keys).

        **Raises:** `OutputError` (a `ValueError`) if `path` may not be written.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".nc", ".json"):
            raise ValueError(f"save: unknown format {suffix!r} of {str(path)!r}; use .nc or .json")
        kind = "fit" if suffix == ".nc" else "fit summary"
        check_output(path, kind, overwrite=overwrite, name="save: path")
        extra = {KIND_ATTR: kind, **(attrs or {})}
        if suffix == ".nc":
            dataset = self.to_xarray()
            dataset.attrs.update(extra)
            return atomic_write(path, lambda tmp: dataset.to_netcdf(tmp, engine="h5netcdf"))
        summary = {**extra, **self.to_dict()}
        return atomic_write_text(path, json.dumps(_finite_json(summary), indent=2))

    def plot(self, path: str | os.PathLike | None = None, *, points: int = 201, references=None):
        """Data with the fitted curve and its 95 % prediction band, residuals, the estimates
        ± standard errors, the loss history and learned terms (see [`plot`][difsim.plot]).

        **Returns:** the `matplotlib.figure.Figure` (or `None` once saved to `path`).
        """
        return plot_output(self.to_xarray(points, references=references), path)


def predict(problem: AbstractProblem, model: Model, coords) -> np.ndarray:
    """`problem.predict(model, coords)`, compiled once per problem shape (the adjoint does
    not matter without gradients: always the forward-mode variant, for one compilation)."""
    return np.asarray(_predict(problem.with_adjoint("forward"), model, coords))


@eqx.filter_jit
def _predict(problem, model, coords):
    return problem.predict(model, coords)


def _finite_json(obj):
    if isinstance(obj, float):
        return obj if np.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite_json(v) for v in obj]
    return obj
