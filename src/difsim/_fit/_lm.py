r"""`TrustRegionLM`: a trust-region Levenberg–Marquardt method for `fit`, with the rules
of scipy's `least_squares(method="trf")` (`"trust_region"`, the default) or of MINPACK's
`lmder`, scipy's `method="lm"` (`"minpack"`), as an optimistix least-squares solver.

At $x$ with residuals $r$ and Jacobian $J$, each iteration takes the step $p$ that
minimises $\|Jp + r\|$ within the trust region $\|Dp\| \le \Delta$ ($D$ the identity, or
for MINPACK the largest column norms of $J$ seen so far). The multiplier $\lambda$ of
$\min \|Jp + r\|^2 + \lambda \|Dp\|^2$ comes from a safeguarded Newton iteration on
$1/\|Dp(\lambda)\| = 1/\Delta$ (Moré 1978, §5) in the basis of the SVD of $JD^{-1}$; the
Gauss–Newton step is taken when it lies inside. The ratio of actual to predicted reduction
decides:

- `policy="trf"`: accept any decrease; $\Delta \leftarrow \|Dp\|/4$ below ratio 0.25,
  $2\Delta$ above 0.75 when the step reached the boundary; first $\Delta = \|x_0\|$. Stop
  when the decrease is below `rtol` times the loss (ratio > 0.25), or the step below
  `rtol` $(\mathrm{rtol} + \|x\|)$.
- `policy="minpack"`: accept from ratio 1e-4; shrink by ½ … 1/10 below 0.25, set
  $2\|Dp\|$ above 0.75 or for a Gauss–Newton step; first $\Delta = 100\,\|Dx_0\|$, cut to
  the first step. Stop when actual and predicted relative reductions are below `rtol`, or
  $\Delta \le$ `rtol` $\|Dx\|$.

Both also stop when the residuals are orthogonal to every column of $J$ (cosines below
`atol`). Each step evaluates the residuals and Jacobian once, at the trial point (the first
step at $x_0$).

Why not optimistix's `LevenbergMarquardt` (the default until issue 14): its damping
$\lambda I$ starts at 1 whatever the size of $J^\top J$ and moves by fixed factors, so it
needs about twice the evaluations, and from some starts it ends far from the optimum where
MINPACK does not (the issue's Lotka–Volterra case). Over 600 random starts on six fits
(`experiments/benchmarks/bench_fit_robustness.py`, `docs/benchmarks.md`) the `"trf"` rules
succeed as often as scipy's best (458 vs scipy trf 461, MINPACK 420, optimistix LM 450).

References: J. J. Moré, "The Levenberg–Marquardt algorithm: implementation and theory", in
G. A. Watson (ed.), *Numerical Analysis*, Lecture Notes in Mathematics 630, 105–116
(Springer, 1978); M. A. Branch, T. F. Coleman and Y. Li, "A subspace, interior, and
conjugate gradient method for large-scale bound-constrained minimization problems", *SIAM
J. Sci. Comput.* 21, 1–23 (1999) (scipy's `trf`).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import lineax as lx
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

# MINPACK's constants: initial trust region factor, acceptance threshold, the ratios that
# shrink or grow the region, and the iterations of the multiplier search.
FACTOR = 100.0
ACCEPT = 1e-4
LAMBDA_ITERATIONS = 20


class _LMState(eqx.Module):
    f_info: optx.FunctionInfo.ResidualJac  # at the current (accepted) iterate
    scale: Float[Array, " p"]  # D
    delta: Float[Array, ""]
    first: Bool[Array, ""]
    terminate: Bool[Array, ""]
    result: optx.RESULTS
    num_evaluations: Int[Array, ""]
    num_jacobians: Int[Array, ""]


def _jacobian(fn, y, args, mode: str):
    """Residuals `(m,)`, aux and the dense Jacobian `(m, p)` of `fn` at `y`, from one
    linearisation (the residuals are its primal output, not a second evaluation)."""
    if mode == "fwd":
        r, lin, aux = jax.linearize(lambda z: fn(z, args), y, has_aux=True)
        matrix = jax.vmap(lin, out_axes=-1)(jnp.eye(y.size, dtype=y.dtype).reshape(-1, *y.shape))
    else:
        r, pullback, aux = jax.vjp(lambda z: fn(z, args), y, has_aux=True)
        matrix = jax.vmap(lambda c: pullback(c)[0])(jnp.eye(r.size, dtype=r.dtype))
    return r, aux, matrix.reshape(r.size, y.size)


def _column_norms(jac: Float[Array, "m p"]) -> Float[Array, " p"]:
    return jnp.sqrt(jnp.sum(jac * jac, axis=0))


def lm_step(jac, r, scale, delta) -> tuple[Float[Array, " p"], Float[Array, ""]]:
    """The trust-region step `p` with `|D p| <= delta` (within 10 %) and its multiplier.

    In the SVD basis of `J D^{-1} = U S V^T`, with `c = U^T r`: `D p(λ) = -V (s c /
    (s² + λ))`, and `|D p(λ)|` falls from the Gauss–Newton length at λ = 0 to 0.
    """
    u, s, vt = jnp.linalg.svd(jac / scale[None, :], full_matrices=False)
    a = s * (u.T @ r)
    tiny = s <= jnp.finfo(s.dtype).eps * jnp.max(s, initial=0.0) * s.size
    gn = jnp.where(tiny, 0.0, (u.T @ r) / jnp.where(tiny, 1.0, s))  # pseudo-inverse

    gn_length = jnp.sqrt(jnp.sum(gn * gn))

    def search(_):
        # Safeguarded Newton on 1/|Dp(λ)| = 1/Δ (Hebden, Moré §5) inside [lo, hi]; the
        # upper bound |J_s^T r| / Δ makes |Dp| <= Δ.
        hi = jnp.sqrt(jnp.sum(a * a)) / delta

        def body(_, carry):
            lam, lo, hi = carry
            q = jnp.where(a == 0, 0.0, a / (s * s + lam))  # 0/0 where s = λ = 0
            z2 = jnp.sum(q * q)
            dz2 = -2.0 * jnp.sum(jnp.where(a == 0, 0.0, q * q / (s * s + lam)))
            norm = jnp.sqrt(z2)
            lo, hi = jnp.where(norm > delta, lam, lo), jnp.where(norm > delta, hi, lam)
            newton = lam - (1 / norm - 1 / delta) / (-0.5 * dz2 / (z2 * norm))
            inside = (newton > lo) & (newton < hi)
            fallback = jnp.sqrt(jnp.maximum(lo, 1e-3 * hi) * hi)
            return jnp.where(inside, newton, fallback), lo, hi

        zero = jnp.zeros((), delta.dtype)
        lam, _, _ = lax.fori_loop(0, LAMBDA_ITERATIONS, body, (zero, zero, hi))
        return lam

    lam = lax.cond(gn_length > 1.1 * delta, search, lambda _: jnp.zeros_like(delta), None)
    coeff = jnp.where(lam > 0, a / (s * s + lam), gn)  # λ > 0: no division by zero
    return -(vt.T @ coeff) / scale, lam


class _Trial(eqx.Module):
    """One trial step: its length in the scaled norm, multiplier, actual and predicted
    reductions, and the residuals and Jacobian at the trial point."""

    p: Float[Array, " p"]
    pnorm: Float[Array, ""]
    lam: Float[Array, ""]
    r: Float[Array, " m"]
    jac: Float[Array, "m p"]


class TrustRegionLM(optx.AbstractLeastSquaresSolver):
    """A trust-region Levenberg–Marquardt method with scipy `trf`'s rules or MINPACK
    `lmder`'s (see the module docstring). `fit(optimizer="trust_region")` builds
    `TrustRegionLM(tol, tol, factor=1, scaled=False, policy="trf")`, `"minpack"` the
    defaults.

    **Fields:** `rtol` (`ftol` and `xtol`), `atol` (`gtol`); `norm` is unused (the tests
    are MINPACK's or scipy's), kept for optimistix's interface; `factor`: the first trust
    region is `factor * |D y0|` (or `factor` at `y0 = 0`); `scaled`: `D` from the
    Jacobian's column norms (Moré) or the identity; `policy`: `"minpack"` or `"trf"`.
    """

    rtol: float
    atol: float
    norm: Callable = optx.max_norm
    factor: float = FACTOR
    scaled: bool = eqx.field(static=True, default=True)
    policy: str = eqx.field(static=True, default="minpack")

    def init(self, fn, y, args, options, f_struct, aux_struct, tags) -> _LMState:
        # Nothing is evaluated here: the first step evaluates at `y` (one compiled
        # evaluation program for every step, none in the set-up).
        del fn, args, options, aux_struct, tags
        m = sum(leaf.size for leaf in jax.tree.leaves(f_struct))
        r = jnp.zeros(m, y.dtype)
        f_info = optx.FunctionInfo.ResidualJac(
            r, lx.MatrixLinearOperator(jnp.zeros((m, y.size), y.dtype))
        )
        zero = jnp.array(0, jnp.int32)
        one = jnp.ones((), y.dtype)
        return _LMState(f_info, jnp.ones_like(y), one, jnp.array(True), jnp.array(False),
                        optx.RESULTS.successful, zero, zero)  # fmt: skip

    def step(self, fn, y, args, options, state: _LMState, tags):
        del tags
        start = state.num_evaluations == 0  # evaluate at y, no trial step yet
        r, jac = state.f_info.residual, state.f_info.jac.as_matrix()
        p, lam = lm_step(jac, r, state.scale, state.delta)
        p = jnp.where(start, 0.0, p)
        pnorm = jnp.linalg.norm(state.scale * p)
        # The Jacobian at every trial point, not only at accepted ones as MINPACK does: one
        # compiled solve with tangents instead of two programs (and under a multistart's
        # vmap both branches of a `cond` would run anyway).
        r_new, aux, jac_new = _jacobian(fn, y + p, args, options.get("jac", "fwd"))
        trial = _Trial(p, pnorm, lam, r_new, jac_new)
        if self.policy == "trf":
            accept, delta, done = self._trf(state, y, r, jac, trial)
        else:
            accept, delta, done = self._minpack(state, y, r, jac, trial)
        accept = start | accept
        r_acc, jac_acc = jnp.where(accept, r_new, r), jnp.where(accept, jac_new, jac)
        y_out = jnp.where(accept, y + p, y)
        norms = _column_norms(jac_acc)
        if self.scaled:
            scale = jnp.where(start, jnp.where(norms > 0, norms, 1.0), state.scale)
            scale = jnp.maximum(scale, jnp.where(accept, norms, 0.0))
        else:
            scale = state.scale
        size = jnp.linalg.norm(scale * y)
        delta = jnp.where(start, self.factor * jnp.where(size > 0, size, 1.0), delta)
        done = jnp.where(start, self._gtol(r_acc, jac_acc), done | self._gtol(r_acc, jac_acc))
        f_info = optx.FunctionInfo.ResidualJac(r_acc, lx.MatrixLinearOperator(jac_acc))
        new = _LMState(
            f_info, scale, delta, start, done, optx.RESULTS.successful,
            state.num_evaluations + 1, state.num_jacobians + accept.astype(jnp.int32),
        )  # fmt: skip
        return y_out, new, aux

    def _minpack(self, state, y, r, jac, t: _Trial):
        """MINPACK's acceptance (ratio >= 1e-4), radius update and ftol/xtol tests."""
        fnorm, fnorm1 = jnp.linalg.norm(r), jnp.linalg.norm(t.r)
        # MINPACK cuts the first trust region to the first step's length.
        delta = jnp.where(state.first, jnp.minimum(state.delta, t.pnorm), state.delta)
        improved = jnp.isfinite(fnorm1) & (0.1 * fnorm1 < fnorm)
        safe = jnp.where(fnorm > 0, fnorm, 1.0)
        actred = jnp.where(improved, 1 - (fnorm1 / safe) ** 2, -1.0)
        t1 = jnp.linalg.norm(jac @ t.p) / safe
        t2 = jnp.sqrt(t.lam) * t.pnorm / safe
        prered, dirder = t1 * t1 + 2 * t2 * t2, -(t1 * t1 + t2 * t2)
        ratio = jnp.where(prered != 0, actred / jnp.where(prered != 0, prered, 1.0), 0.0)
        delta = _new_radius(delta, ratio, actred, dirder, t.pnorm, t.lam, improved)
        accept = ratio >= ACCEPT
        y_new = jnp.where(accept, y + t.p, y)
        ftol = (jnp.abs(actred) <= self.rtol) & (prered <= self.rtol) & (0.5 * ratio <= 1)
        xtol = delta <= self.rtol * jnp.linalg.norm(state.scale * y_new)
        return accept, delta, ftol | xtol

    def _trf(self, state, y, r, jac, t: _Trial):
        """scipy `trf`'s acceptance (any decrease), radius update and ftol/xtol tests."""
        cost, cost_new = 0.5 * jnp.sum(r * r), 0.5 * jnp.sum(t.r * t.r)
        finite = jnp.isfinite(cost_new)
        actual = jnp.where(finite, cost - cost_new, -jnp.inf)
        jp = jac @ t.p
        predicted = -(jnp.dot(jac.T @ r, t.p) + 0.5 * jnp.sum(jp * jp))
        ratio = jnp.where(predicted > 0, actual / jnp.where(predicted > 0, predicted, 1.0),
                          jnp.where((predicted == 0) & (actual == 0), 1.0, 0.0))  # fmt: skip
        hit = t.pnorm > 0.95 * state.delta
        grown = jnp.where((ratio > 0.75) & hit, 2.0 * state.delta, state.delta)
        delta = jnp.where(ratio < 0.25, 0.25 * t.pnorm, grown)
        ftol = (actual < self.rtol * cost) & (ratio > 0.25)
        step, size = jnp.linalg.norm(t.p), jnp.linalg.norm(y)
        xtol = step < self.rtol * (self.rtol + size)
        return finite & (actual > 0), delta, ftol | xtol

    def _gtol(self, r, jac) -> Bool[Array, ""]:
        """The residuals are orthogonal to every column of the Jacobian (to `atol`)."""
        fnorm = jnp.linalg.norm(r)
        norms = _column_norms(jac)
        cosines = jnp.abs(jac.T @ r) / jnp.where(norms > 0, norms * fnorm, 1.0)
        return (fnorm == 0) | (jnp.max(jnp.where(norms > 0, cosines, 0.0)) <= self.atol)

    def terminate(self, fn, y, args, options, state: _LMState, tags):
        del fn, y, args, options, tags
        return state.terminate, state.result

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        del fn, args, options, state, tags, result
        return y, aux, {}


def _new_radius(delta, ratio, actred, dirder, pnorm, lam, improved) -> Float[Array, ""]:
    """MINPACK's trust-region update from the step's reduction ratio."""
    shrink = jnp.where(actred >= 0, 0.5, 0.5 * dirder / (dirder + 0.5 * actred))
    shrink = jnp.where(~improved | (shrink < 0.1), 0.1, shrink)
    small = shrink * jnp.minimum(delta, 10.0 * pnorm)
    grow = (lam == 0) | (ratio >= 0.75)
    return jnp.where(ratio <= 0.25, small, jnp.where(grow, 2.0 * pnorm, delta))
