"""`make_result`: a [`FitResult`][] from the optimiser's final carry and history."""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difsim._fit._diagnostics import (
    Estimate,
    gauss_newton_estimate,
    is_stationary,
    quality_notes,
    step_words,
)
from difsim._fit._drivers import AbstractDriver
from difsim._fit._free import resolve, unflatten
from difsim._fit._loop import STALLED_ADVICE, Carry, result_message
from difsim._fit._problem import AbstractProblem

# Above this many free values the Gauss–Newton estimate (a Jacobian with one column per
# value, and its SVD) would cost more than the fit; the result then has NaN standard errors
# and no final-point test.
from difsim._fit._result import COVARIANCE_LIMIT, FitResult
from difsim._fit._transforms import saturation_note
from difsim._status import Status


def make_result(
    problem: AbstractProblem,
    driver: AbstractDriver,
    carry: Carry,
    history: np.ndarray,
    transforms: dict[str, Any],
    batched: bool,
    monitor=None,
) -> FitResult:
    """The [`FitResult`][] of a finished loop (of its best start, under a multistart):
    `transforms` maps the user's free variables to theirs, `history` is the loop's."""
    best, pick, hist = _best_start(carry, history, batched)
    status = Status(int(pick(carry.code)))
    steps, fails = int(pick(carry.step)), int(pick(carry.fails))
    hist = hist[:steps]  # a start that finished early holds (NaN rows) while others run
    loss = float(pick(carry.best_loss))
    u = jnp.asarray(pick(carry.best_u) if np.isfinite(loss) else pick(carry.u))
    names = tuple(transforms)
    modules = any(isinstance(resolve(problem.model, n), eqx.Module) for n in names)
    estimate = _estimate(problem, u, loss, jacobian=not modules)
    q = problem.num_free()
    cov = estimate.covariance[:q, :q]
    if modules:  # an over-parametrised network: JᵀJ is singular, no error is meaningful
        cov = np.full_like(cov, np.nan)
    stderr = np.sqrt(np.where(np.diag(cov) >= 0, np.diag(cov), np.nan))
    stationary = is_stationary(estimate, loss, driver.tolerances)
    if status == Status.CONVERGED and stationary is False:
        status = Status.FIT_STALLED
    message = result_message(status, int(pick(carry.result)), steps, driver, fails)
    message += _final_point(status, stationary, estimate, loss)
    message += saturation_note(transforms, problem.sizes(), np.asarray(u))
    message += "" if monitor is None else monitor.note()
    values, errors = _by_variable(problem, u, stderr)
    notes = ()
    if np.isfinite(loss):
        scalars = [n for n in names if isinstance(values[n], float)]
        notes = tuple(quality_notes(
            scalars, [values[n] for n in scalars], [errors[n] for n in scalars], estimate,
            problem, None if modules else problem.element_names(),
        ))  # fmt: skip
    start_losses = np.asarray(carry.best_loss) if batched else None
    start_parameters = _start_parameters(problem, carry, names) if batched else None
    return FitResult(
        model=problem.model_from(u),
        parameters=values,
        stderr=errors,
        covariance=cov,
        loss=loss,
        sigma2=float(estimate.sigma2),
        dof=int(estimate.dof),
        loss_history=np.asarray(hist[:, 0]) if len(hist) else np.zeros(0),
        grad_norm_history=np.asarray(hist[:, 1]) if len(hist) else np.zeros(0),
        status=status,
        message=message,
        num_steps=steps,
        rejected_steps=int(np.sum(hist[:, 2] == 0)) if len(hist) else 0,
        names=names,
        transforms=tuple(t.describe() for t in transforms.values()),
        optimizer=driver.name,
        start_losses=start_losses,
        start_parameters=start_parameters,
        best_start=best,
        problem=problem,
        u=np.asarray(u),
        newton_decrease=float(estimate.decrease),
        newton_step=float(estimate.step),
        notes=notes,
        monitor_history=None if monitor is None else monitor.history,
        monitor_kind=None if monitor is None else monitor.kind,
    )


def _start_parameters(problem: AbstractProblem, carry: Carry, names) -> dict[str, np.ndarray]:
    """Each start's final values of each free variable, `{name: (starts, ...)}` (a
    variable's values ravelled)."""
    nat = np.asarray(jax.vmap(problem.natural)(jnp.asarray(carry.best_u)))
    offsets = np.cumsum((0,) + problem.sizes())
    return {
        name: nat[:, offsets[i]] if offsets[i + 1] - offsets[i] == 1
        else nat[:, offsets[i] : offsets[i + 1]]
        for i, name in enumerate(names)
    }  # fmt: skip


def _by_variable(problem: AbstractProblem, u, stderr: np.ndarray):
    """`({name: value}, {name: standard error})` of the user's free variables: floats for
    scalars; arrays, or modules, shaped like the model's value otherwise (NaN errors for
    a module's weights: no one of them is determined alone)."""
    values, errors, offset = {}, {}, 0
    for (name, value), size in zip(problem.values_from(u).items(), problem.sizes()):
        se = jnp.asarray(stderr[offset : offset + size])
        offset += size
        if isinstance(value, eqx.Module):
            values[name] = value
            errors[name] = unflatten(value, jnp.full_like(se, jnp.nan))
        elif np.ndim(value) == 0:
            values[name], errors[name] = float(value), float(se[0])
        else:
            values[name], errors[name] = np.asarray(value), np.asarray(se).reshape(value.shape)
    return values, errors


def _estimate(problem: AbstractProblem, u, loss: float, jacobian: bool = True) -> Estimate:
    """The covariance and final-point numbers at `u` (NaN where the loss is not finite);
    without `jacobian` (a free network, whose covariance is not meaningful) only the
    residual variance, from the loss: the Jacobian would cost a solve per weight."""
    p, nan = u.shape[0], float("nan")
    full = np.full((p, p), nan)
    if not np.isfinite(loss) or p > COVARIANCE_LIMIT:
        return Estimate(full, np.zeros(0), nan, 0, full, nan, nan)
    if not jacobian:
        extra = problem.num_residuals() - problem.data.mask.size  # (as Gauss–Newton's)
        dof = problem.data.num_observations + extra - p
        sigma2 = 2.0 * loss / dof if dof > 0 else nan
        return Estimate(full, np.zeros(0), sigma2, dof, full, nan, nan)
    # A problem may estimate its own (a likelihood's Hessian, a GMM's weighting).
    own = getattr(problem, "covariance", None)
    return own(u) if own else gauss_newton_estimate(problem, u)


def _final_point(status: Status, stationary: bool | None, estimate: Estimate, loss) -> str:
    """The final-point test in words, to follow the status message."""
    if stationary is None or status == Status.OPTIMIZER_FAILED:
        return ""  # (a failed optimizer's message ends in its own words)
    words = step_words(estimate, loss, share=status == Status.FIT_STALLED)
    if status == Status.CONVERGED:
        return f", and the result passes the final-point test ({words})"
    if status == Status.FIT_STALLED:
        return f"; {words}. " + STALLED_ADVICE
    verdict = "passes" if stationary else "does not pass"
    return f"; at the result {words}: it {verdict} the final-point test"


def _best_start(carry: Carry, history: np.ndarray, batched: bool):
    """`(index, pick, history)` of the start with the lowest finite loss: `pick` selects
    its entry of a carry field (index `None` and `pick` the identity without multistart)."""
    if not batched:
        return None, np.asarray, history
    best_loss = np.asarray(carry.best_loss)
    best = int(np.argmin(np.where(np.isfinite(best_loss), best_loss, np.inf)))
    hist = history[:, best] if history.size else history.reshape(0, 3)
    return best, lambda x: np.asarray(x)[best], hist
