r"""What a fit's result is worth: the test that it is a minimum, and the warnings on
estimates the data do not determine.

**The final-point test.** An optimizer's own stopping test looks at its last steps (a
small step, a small decrease); a step that collapsed on a rugged or badly scaled loss
passes it far from any minimum. So the result is tested again where it stands: the
(Gauss–)Newton step from the returned point, with the Jacobian $J$ there, predicts the
decrease $\Delta = \tfrac12\|P_J r\|^2$ of the loss ($P_J$ the projection onto the column
space of $J$: the gradient $J^\top r$ measured in the metric of $J^\top J$), and has the
length $d = \sqrt{2\Delta/\hat\sigma^2}$ in standard errors (the Mahalanobis length under
the fit's covariance $\hat\sigma^2 (J^\top J)^{-1}$). The result is *stationary* when
$\Delta \le \mathrm{atol} + \mathrm{rtol}\,|\mathrm{loss}|$ (the optimizer's own
tolerances, the form of optimistix's test on the loss) or $d \le$ [`STEP_STDERR`][]: a
further step would change the loss by less than the tolerance, or move the estimates by
less than a tenth of their uncertainty. A likelihood fit uses the Hessian of its negative
log-likelihood for $J^\top J$ and $\hat\sigma^2 = 1$. The tolerance is never below what the
dtype can show: [`ROUNDING`][] eps of the loss, plus the decrease that the rounding of
the residuals alone predicts (`Estimate.floor`; a float32 fit of exact data of size 1e4
has $\Delta \approx 10^{-7}$ at the truth, above the default `atol` of 1e-8).

**Warnings** ([`FitWarning`][]): relative standard errors above 100 %; a near-singular
$J^\top J$ (its condition number, columns scaled to unit length, within a factor 1000 of
$1/\varepsilon$ of the dtype: the covariance, its inverse, keeps fewer than three digits),
naming the free variables of its near-null direction; and a fit that explains less than
half of the data's variation about a constant per variable ($R^2 < 0.5$), the mark of a
local minimum.
"""

import math
from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np

from difsim._fit._drivers import forward_jacobian
from difsim._fit._problem import AbstractProblem

STEP_STDERR = 0.1  # a result is stationary if a Newton step moves it less (standard errors)
REL_ERROR = 1.0  # warn above 100 % relative standard error
SINGULAR_DIGITS = 3  # warn when the covariance keeps fewer digits than this
R2_MIN = 0.5  # warn when the fit explains less of the data's variation
# The rounding of a loss or a residual, in eps of its dtype times its size (an ODE solve
# accumulates some): a decrease below it cannot be told from rounding.
ROUNDING = 10.0


class FitWarning(UserWarning):
    """A fit result that needs care: estimates the data barely determine (relative standard
    errors above 100 %, a near-singular Gauss–Newton Hessian), or a fit that explains
    little of the data (likely a local minimum). The same lines are in
    `FitResult.summary()` and `FitResult.notes`.

    **Example:**

    ```python
    import difsim as ds

    assert issubclass(ds.FitWarning, UserWarning)  # filter with warnings.simplefilter
    ```
    """


FitWarning.__module__ = "difsim"  # its public name, in warnings and tracebacks


class Estimate(NamedTuple):
    """What the result's neighbourhood says: `covariance` `(p, p)` in natural units,
    `residuals` `(m,)`, `sigma2` and `dof`; `curvature` `(p, p)`, the Gauss–Newton (or
    observed-information) Hessian in the unconstrained coordinates; `decrease` and `step`:
    the loss a (Gauss–)Newton step from the result would remove, and that step's length in
    standard errors (NaN where undefined); `floor`: the decrease that rounding the
    residuals in their dtype alone would predict (0 where not estimated)."""

    covariance: np.ndarray
    residuals: np.ndarray
    sigma2: float
    dof: int
    curvature: np.ndarray
    decrease: float
    step: float
    method: str = "Gauss–Newton"
    floor: float = 0.0


def gauss_newton_estimate(
    problem: AbstractProblem, u, scale: float | None = None, jacobian=None
) -> Estimate:
    """The [`Estimate`][] of a least-squares fit at `u`: $\\hat\\sigma^2 (J^\\top J)^{-1}$
    with $\\hat\\sigma^2 = \\sum r_i^2/(n - p)$, or `scale` in its place (a weighting known
    in advance, as a GMM's); `jacobian(problem, u) -> (r, dr/du)` if the problem has its
    own."""
    jacobian = _residuals_and_jacobian if jacobian is None else jacobian
    r, j_u = (np.asarray(a) for a in jacobian(problem, u))
    dxdu = np.asarray(problem.derivative(u))
    # dr/dx = dr/du / (dx/du), elementwise transforms. A transform saturated at its bound
    # (dx/du = 0: exp underflowed, a sigmoid at 0 or 1) leaves that column undefined: NaN,
    # and so NaN standard errors, without a division warning.
    with np.errstate(divide="ignore", invalid="ignore"):
        j_x = np.where(dxdu[None, :] != 0, j_u / dxdu[None, :], np.nan)
    data_mask = np.asarray(problem.data.mask).reshape(-1)
    n = int(np.sum(data_mask)) + (r.shape[0] - data_mask.shape[0])
    p = j_x.shape[1]
    dof = n - p
    rss = float(np.sum(r * r))
    sigma2 = rss / dof if dof > 0 else float("nan")
    factor = sigma2 if scale is None else scale
    try:
        cov = factor * np.linalg.inv(j_x.T @ j_x)
    except np.linalg.LinAlgError:
        cov = np.full((p, p), np.nan)
    decrease = projected_decrease(r, j_u)
    step = _in_stderr(decrease, factor)
    floor = rounding_decrease(problem, r, p)
    return Estimate(cov, r, sigma2, dof, j_u.T @ j_u, decrease, step, floor=floor)


def rounding_decrease(problem: AbstractProblem, r: np.ndarray, p: int) -> float:
    r"""$\tfrac12 (p/m) \sum_i (c\,\varepsilon\,s_i)^2$: the decrease $\tfrac12\|P r\|^2$
    that rounding errors of the `m` data residuals (the first of `r`) would show, each of
    size [`ROUNDING`][] `eps` of its scale $s_i$ ($|w_i z_i|$; $|w_i|(1 + |\log z_i|)$ for
    lognormal noise), `p` of whose `m` directions the projection keeps. 0 for problems
    without such residuals."""
    if problem.noise not in ("gaussian", "lognormal") or hasattr(problem, "covariance"):
        return 0.0
    data = problem.data
    mask, w, z = (np.asarray(a) for a in (data.mask, data.weights, data.values))
    if problem.noise == "lognormal":
        scale = np.abs(w) * (1.0 + np.abs(np.log(np.where(mask, z, 1.0))))
    else:
        scale = np.abs(w * z)
    scale = np.where(mask, scale, 0.0)
    m = int(np.sum(mask))
    if m == 0 or not np.all(np.isfinite(scale)):
        return 0.0
    eps = np.finfo(r.dtype).eps
    return 0.5 * p / m * float(np.sum((ROUNDING * eps * scale) ** 2))


def projected_decrease(r: np.ndarray, jac: np.ndarray) -> float:
    """$\\tfrac12\\|P r\\|^2$, $P$ the projection onto the column space of `jac` `(m, p)`
    (columns scaled to unit length, directions below rounding dropped): the decrease of
    $\\tfrac12\\|r\\|^2$ that the Gauss–Newton step predicts. NaN if anything is not
    finite."""
    if not (np.all(np.isfinite(r)) and np.all(np.isfinite(jac))):
        return float("nan")
    norms = np.linalg.norm(jac, axis=0)
    cols = jac[:, norms > 0] / norms[norms > 0]
    if cols.shape[1] == 0:
        return 0.0
    q, s, _ = np.linalg.svd(cols, full_matrices=False)
    keep = s > np.finfo(cols.dtype).eps * max(cols.shape) * s[0]
    c = q[:, keep].T @ r
    return 0.5 * float(c @ c)


def newton_decrease(grad: np.ndarray, hess: np.ndarray) -> float:
    """$\\tfrac12 g^\\top |H|^{-1} g$: the decrease a Newton step predicts (curvatures by
    magnitude, those below rounding dropped); NaN if anything is not finite."""
    if not (np.all(np.isfinite(grad)) and np.all(np.isfinite(hess))):
        return float("nan")
    lam, vec = np.linalg.eigh(0.5 * (hess + hess.T))
    size = np.max(np.abs(lam), initial=0.0)
    keep = np.abs(lam) > np.finfo(hess.dtype).eps * hess.shape[0] * size
    c = vec[:, keep].T @ grad
    return 0.5 * float(np.sum(c * c / np.abs(lam[keep])))


def _in_stderr(decrease: float, scale: float) -> float:
    """The length, in standard errors, of a step that lowers the loss by `decrease` on a
    quadratic whose covariance is `scale` times the inverse Hessian."""
    if not (np.isfinite(decrease) and np.isfinite(scale) and scale > 0):
        return float("nan")
    return math.sqrt(2.0 * decrease / scale)


def likelihood_step(grad: np.ndarray, hess: np.ndarray) -> tuple[float, float]:
    """`(decrease, step)` of a likelihood fit: a Newton step on the negative
    log-likelihood, whose Hessian is the inverse covariance."""
    decrease = newton_decrease(grad, hess)
    return decrease, _in_stderr(decrease, 1.0)


def is_stationary(estimate: Estimate, loss: float, tolerances) -> bool | None:
    """Whether the result passes the final-point test (module docstring): `None` where it
    cannot be evaluated (a non-finite Jacobian); `tolerances`: the optimizer's
    `(rtol, atol)`, or `None` (optax: the step test alone)."""
    decrease, step = estimate.decrease, estimate.step
    if not np.isfinite(decrease):
        return None
    # Never below what the dtype can show (module docstring).
    eps = np.finfo(estimate.residuals.dtype).eps
    allowed = estimate.floor + ROUNDING * eps * abs(loss)
    if tolerances is not None:
        rtol, atol = tolerances
        allowed += atol + rtol * abs(loss)
    if decrease <= allowed:
        return True
    return bool(np.isfinite(step) and step <= STEP_STDERR)


def step_words(estimate: Estimate, loss: float, share: bool = False) -> str:
    """The final-point test's numbers in words (`share`: also as a fraction of the loss)."""
    decrease, step = estimate.decrease, estimate.step
    share = f" ({decrease / abs(loss):.2g} of it)" if share and loss and np.isfinite(loss) else ""
    text = f"a {estimate.method} step from it would lower the loss by {decrease:.3g}{share}"
    if np.isfinite(step):
        text += f" and move the estimates by {step:.3g} standard errors"
    return text


# ---------------------------------------------------------------- warnings
def quality_notes(names, values, stderr, estimate: Estimate, problem, all_names) -> list[str]:
    """The warnings on a result (module docstring), one line each: on the scalar free
    variables `names`; no near-singularity test when `all_names` is `None` (a network's
    weights, never determined one by one)."""
    notes = []
    wide = [
        f"{n} ({abs(se / v):.0%})"
        for n, v, se in zip(names, values, stderr)
        if v != 0 and np.isfinite(se) and abs(se / v) > REL_ERROR
    ]
    if wide:
        notes.append(
            f"relative standard errors above 100%: {', '.join(wide)}; the data barely "
            "determine them (fix some, add data that constrain them, or reparametrise)"
        )
    singular = None if all_names is None else _near_singular(estimate.curvature, all_names)
    if singular:
        notes.append(singular)
    r2 = explained_variance(problem, estimate.residuals)
    if r2 is not None and r2 < R2_MIN:
        how = (
            f"explains only {r2:.0%} of the data's variation about a constant per variable"
            if r2 > 0
            else "fits the data worse than a constant per variable"
        )
        notes.append(
            f"the result {how} (R² = {r2:.3g}): likely a local minimum; try several starts "
            "(multistart=(16, 0)) or multiple shooting (multiple_shooting=4)"
        )
    return notes


def _near_singular(curvature: np.ndarray, names) -> str | None:
    """A line naming the near-null direction of `curvature` (columns scaled to unit
    diagonal) when its condition number leaves the covariance fewer than
    `SINGULAR_DIGITS` digits in its dtype; `None` otherwise."""
    if curvature.size == 0 or not np.all(np.isfinite(curvature)):
        return None
    diag = np.sqrt(np.abs(np.diag(curvature)))
    if np.any(diag == 0):
        zero = [n for n, d in zip(names, diag) if d == 0]
        return f"the loss does not depend on {', '.join(zero)} here: it is not determined"
    lam, vec = np.linalg.eigh(curvature / np.outer(diag, diag))
    eps = np.finfo(curvature.dtype).eps
    cond = lam[-1] / lam[0] if lam[0] > 0 else np.inf
    if cond * eps * 10**SINGULAR_DIGITS < 1:
        return None
    v = vec[:, 0] / np.max(np.abs(vec[:, 0]))
    involved = [f"{v[i]:+.2f}·{names[i]}" for i in np.argsort(-np.abs(v)) if abs(v[i]) >= 0.1]
    return (
        f"the Gauss–Newton Hessian JᵀJ is near-singular (condition number {cond:.2g}, "
        f"against 1/eps = {1 / eps:.2g} of {curvature.dtype.name}): the data do not "
        f"determine the combination {' '.join(involved)} (scaled variables); its standard "
        "errors are unreliable. Fix one of them, or add data that separate them"
    )


def explained_variance(problem: AbstractProblem, r: np.ndarray) -> float | None:
    """$R^2 = 1 - \\sum r_i^2 / \\sum_k \\sum_i w_{ik}^2 (z_{ik} - \\bar z_k)^2$ over the
    data residuals (the first of `r`), `z` the data (their logs for lognormal noise),
    $\\bar z_k$ the weighted mean of variable `k`; `None` where the data are constant or
    the problem has no such residuals."""
    if problem.noise not in ("gaussian", "lognormal") or hasattr(problem, "covariance"):
        return None
    data = problem.data
    mask, w = np.asarray(data.mask), np.asarray(data.weights)
    z = np.asarray(data.values)
    z = np.log(np.where(mask, z, 1.0)) if problem.noise == "lognormal" else z
    w2 = np.where(mask, w * w, 0.0)
    total = np.sum(w2, axis=0)
    mean = np.sum(w2 * z, axis=0) / np.where(total > 0, total, 1.0)
    tss = float(np.sum(w2 * (z - mean) ** 2))
    rss = float(np.sum(r[: mask.size] ** 2))
    if not (tss > 0 and np.isfinite(rss)):
        return None
    return 1.0 - rss / tss


# ---------------------------------------------------------------- the Jacobian
def _residuals_and_jacobian(problem, u):
    if u.shape[0] <= problem.num_residuals():
        # Fewer columns than rows: forward mode, one tangent solve per free variable.
        return _forward_jacobian(problem.with_adjoint("forward"), u)
    return _reverse_jacobian(problem.with_adjoint("checkpoint"), u)


@eqx.filter_jit
def _forward_jacobian(problem, u):
    return forward_jacobian(problem, u)


@eqx.filter_jit
def _reverse_jacobian(problem, u):
    return problem.residuals(u), jax.jacrev(problem.residuals)(u)
