r"""Variable-order, variable-step BDF (the numerical differentiation formulas of MATLAB's
`ode15s`, orders 1 to 5) for stiff ODEs and index-1 DAEs $M y' = f(t, y)$.

The solution's history is kept as modified divided differences, scaled to the current step
$h$: $D_0 = y_n$, and $D_j$ the $j$-th backward difference of the interpolating polynomial
on the grid $t_n, t_n - h, \ldots$ (Shampine & Reichelt, *The MATLAB ODE suite*, SIAM J.
Sci. Comput. 18, 1997, §2.3; the same scheme as scipy's `BDF`). A step of order $k$
predicts $y^{(0)} = \sum_{j \le k} D_j$ and solves for the correction $d = y_{n+1} -
y^{(0)}$

$$M\,(d + \psi) = \frac{h}{\alpha_k} f(t_{n+1}, y^{(0)} + d), \qquad \psi =
\frac{1}{\alpha_k}\sum_{j=1}^{k} \gamma_j D_j,$$

with $\gamma_k = \sum_{j \le k} 1/j$, $\alpha_k = (1 - \kappa_k)\gamma_k$ and Klopfenstein
and Shampine's $\kappa_k$ (the NDFs: orders 1-4 more accurate than BDF at the same
stability, order 5 plain BDF). The local error is $(\kappa_k\gamma_k + 1/(k+1))\,d$. After
$k + 1$ steps of one size the estimates for orders $k \pm 1$ (from $D_k$ and $D_{k+2}$)
choose the order and step that promise the longest next step.

A simplified Newton iteration solves for $d$ with $M - (h/\alpha_k)J$, the Jacobian $J$
kept across steps and refreshed only when the iteration fails with a stale one (the
factorisation is redone when $h/\alpha_k$ changes); it stops by
[`StageNewton`][difsim.solvers.StageNewton]'s test. Derivatives through the correction
follow the implicit function theorem (`jax.lax.custom_root`), exact in forward and reverse
mode whatever Jacobian the iteration used.

The step size and order are the solver's choice, not a PID controller's: pair it with
[`BDFController`][difsim.solvers.BDFController], which accepts or rejects from the error
norm the step reports and applies the step factor it proposes (difsim does this for the
named `"bdf"`).
"""

from collections.abc import Callable
from typing import Any, ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from diffrax import AbstractTerm
from jax import lax
from jax.flatten_util import ravel_pytree
from jax.scipy.linalg import lu_factor, lu_solve
from jaxtyping import Array, PyTree

from difsim.solvers._stage_newton import NOISE_ULPS, StageNewton, chord_verdict

MAX_ORDER = 5
# Klopfenstein–Shampine's NDF coefficients (Shampine & Reichelt 1997, Table 1); order 5
# is left as BDF, whose NDF would lose too much stability.
_KAPPA = np.array([0.0, -0.1850, -1 / 9, -0.0823, -0.0415, 0.0])
_GAMMA = np.concatenate([[0.0], np.cumsum(1 / np.arange(1, MAX_ORDER + 1))])
_ALPHA = (1 - _KAPPA) * _GAMMA
_ERROR_CONST = _KAPPA * _GAMMA + 1 / np.arange(1, MAX_ORDER + 2)
# Step factors: at most 10x up, at least 0.2x down after an error-test failure, 0.5x after
# a failed iteration (Shampine & Reichelt's choices).
MAX_FACTOR, MIN_FACTOR, NEWTON_FAIL_FACTOR = 10.0, 0.2, 0.5
# A stale Jacobian is refreshed rather than iterated on for long.
NEWTON_BUDGET = 4


def rescale_matrix(order, factor, dtype):
    r"""The `(MAX_ORDER + 1)²` matrix `RU` with which the differences `D[:order + 1]`
    become those of the same polynomial on a grid of step `factor·h` (Shampine & Reichelt
    §2.3: $D' = (RU)^T D$); the identity beyond `order`."""
    idx = jnp.arange(MAX_ORDER + 1)
    i, j = idx[:, None], idx[None, 1:]
    inside = (idx[:, None] <= order) & (idx[None, :] <= order)
    eye = jnp.eye(MAX_ORDER + 1, dtype=dtype)

    def r(f):
        # R_ij = Π_{m=1..i} (m - 1 - f j) / m for j ≥ 1, R_0j = 1; column 0 is e_0.
        terms = jnp.where(i >= 1, (i - 1 - f * j) / jnp.maximum(i, 1), 1.0)
        body = jnp.cumprod(terms, axis=0).astype(dtype)
        return jnp.where(inside, jnp.concatenate([eye[:, :1], body], 1), eye)

    return r(factor) @ r(jnp.ones((), dtype))


def rescale(d, order, factor):
    """The differences `d` (`(MAX_ORDER + 3, n)`) of order `order` rescaled to a step
    `factor` times theirs; the rows above `order` untouched."""
    ru = rescale_matrix(order, factor, d.dtype)
    return d.at[: MAX_ORDER + 1].set(ru.T @ d[: MAX_ORDER + 1])


def _predict(d, order):
    """`(y⁽⁰⁾, ψ)` of a step of order `order` (module docstring)."""
    rows = jnp.arange(MAX_ORDER + 3)[:, None]
    used = rows <= order
    y_pred = jnp.sum(jnp.where(used, d, 0.0), axis=0)
    gamma = jnp.zeros(MAX_ORDER + 3, d.dtype).at[: MAX_ORDER + 1].set(_GAMMA)
    weights = jnp.where(used[:, 0] & (rows[:, 0] >= 1), gamma, 0.0)
    return y_pred, weights @ d / jnp.asarray(_ALPHA, d.dtype)[order]


def _update(d, order, correction):
    """The differences after an accepted step of order `order` with `correction`:
    `D_{k+2} = d - D_{k+1}`, `D_{k+1} = d`, then `D_i += D_{i+1}` for `i = k … 0`."""
    d = d.at[order + 2].set(correction - d[order + 1]).at[order + 1].set(correction)
    for i in reversed(range(MAX_ORDER + 1)):
        d = d.at[i].set(jnp.where(i <= order, d[i] + d[i + 1], d[i]))
    return d


def _interpolate(t, t1, h, d, order):
    """The step's interpolating polynomial at `t`: `D_0 + Σ_j D_j Π_{m<j} (t - t1 + m h) /
    ((m + 1) h)`, for `d` of shape `(MAX_ORDER + 1, ...)` (one leaf)."""
    m = jnp.arange(MAX_ORDER, dtype=d.dtype)
    p = jnp.cumprod((t - t1 + m * h) / ((m + 1) * h))
    p = jnp.where(jnp.arange(1, MAX_ORDER + 1) <= order, p, 0.0)
    return d[0] + jnp.tensordot(p, d[1:], axes=1)


class BDFInterpolation(dfx.AbstractLocalInterpolation):
    """The interpolating polynomial of one BDF step (`d`: its differences `D_0..5`
    stacked on a leading axis of every leaf, scaled to the step; `order`: how many are
    used)."""

    t0: float
    t1: float
    d: PyTree[Array]
    order: Array

    def evaluate(self, t0, t1=None, left: bool = True) -> PyTree[Array]:
        del left
        if t1 is not None:
            return jax.tree.map(jnp.subtract, self.evaluate(t1), self.evaluate(t0))
        h = self.t1 - self.t0
        return jax.tree.map(lambda d: _interpolate(t0, self.t1, h, d, self.order), self.d)


class BDFError(eqx.Module):
    """What a BDF step tells [`BDFController`][difsim.solvers.BDFController]: the weighted
    RMS norm of its error estimate (`inf` when its iteration failed) and the factor by which
    it asks the next step (after acceptance, or the retry after rejection) to change."""

    norm: Array
    factor: Array


class BDFState(eqx.Module):
    """The solver state between steps: differences `d` (`(MAX_ORDER + 3, n)`) scaled to the
    step `h`, the `order`, steps taken since `h` or the order last changed (`equal`), the
    Jacobian `jac`, the factorisation `lu` of `M - c·jac` and its `c`, and whether `jac` was
    evaluated for this step (`fresh`)."""

    d: Array
    h: Array
    order: Array
    equal: Array
    jac: Array
    lu: Any
    c: Array
    fresh: Array


def _factor(mass, c, jac):
    """The LU factorisation of `M - c J` (`M` diagonal), as floats: `(lu, pivots)`."""
    lu, piv = lu_factor(jnp.diag(mass) - c * jac)
    return lu, piv.astype(lu.dtype)


def _lu(pair):
    lu, piv = pair
    return lu, piv.astype(jnp.int32)


class _Correction(eqx.Module):
    """One step's equation for the correction `d` (module docstring) and what its simplified
    Newton iteration needs."""

    fun: Callable
    t1: Array
    y_pred: Array
    psi: Array
    c: Array
    mass: Array
    scale: Array  # atol + rtol |y⁽⁰⁾|: the iteration's weights
    noise: Array  # (n,) the rounding level of a correction, per entry (the error test's floor)

    def residual(self, corr):
        """`M (d + ψ) - c f(t_{n+1}, y⁽⁰⁾ + d)`, shape `(n,)`."""
        return self.mass * (corr + self.psi) - self.c * self.fun(self.t1, self.y_pred + corr)

    def jacobian(self):
        return lax.stop_gradient(jax.jacfwd(lambda v: self.fun(self.t1, v))(self.y_pred))


class BDF(dfx.AbstractImplicitSolver, dfx.AbstractAdaptiveSolver):
    r"""Variable-order (1-5) variable-step BDF in the NDF form of MATLAB's `ode15s`
    (Shampine & Reichelt 1997): one nonlinear solve of size $n$ per step, the Jacobian
    reused across steps. For stiff ODEs and index-1 DAEs; the method of choice for long
    stiff solves at moderate accuracy, where Radau5 and Rodas5P pay for several stages per
    step. See the module docstring for the equations.

    Use with [`BDFController`][difsim.solvers.BDFController] (the solver chooses its steps
    and orders; a PID controller cannot read its error report). Its tolerances are the
    iteration's (`root_finder`, a [`StageNewton`][difsim.solvers.StageNewton] whose
    `rtol`/`atol`/`norm` the controller fills in and whose `kappa` is the named solver's
    `root_tol`; at most `NEWTON_BUDGET` = 4 iterations before the Jacobian is refreshed).

    **Arguments:**

    - `root_finder`: as above (its own Newton iteration is not used).
    - `mass`: as [`Rodas5P`][difsim.solvers.Rodas5P]'s: `None` (an ODE), or the diagonal of
      a constant, possibly singular mass matrix, one number per entry of the flattened
      state (a tuple: static); a zero entry makes that component algebraic.
    - `max_order`: the highest order used, 1 to 5 (`ode15s`'s `MaxOrder`; 2 keeps the
      method A-stable, for problems with eigenvalues near the imaginary axis).
    """

    term_structure: ClassVar = AbstractTerm
    interpolation_cls: ClassVar[Callable[..., BDFInterpolation]] = BDFInterpolation
    root_finder: StageNewton = dfx.with_stepsize_controller_tols(StageNewton)()
    root_find_max_steps: int = eqx.field(static=True, default=NEWTON_BUDGET)
    mass: tuple[float, ...] | None = eqx.field(default=None, static=True)
    max_order: int = eqx.field(static=True, default=MAX_ORDER)

    def __check_init__(self):
        if not (isinstance(self.max_order, int) and 1 <= self.max_order <= MAX_ORDER):
            raise ValueError(
                f"BDF: max_order must be an integer from 1 to 5, got {self.max_order!r}"
            )

    def order(self, terms):
        return self.max_order

    def error_order(self, terms):
        # The first step's (order 1: local error O(h²)), which is what a controller's
        # initial step heuristic needs; later orders are the solver's own business.
        return 2

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def init(self, terms, t0, t1, y0, args):
        flat0, unravel = ravel_pytree(y0)
        h = jnp.asarray(t1 - t0, flat0.dtype)
        return self._start(_flat_fun(terms, unravel, args), jnp.asarray(t0, flat0.dtype), flat0, h)

    def _mass(self, flat):
        n = flat.shape[0]
        if self.mass is not None and len(self.mass) != n:
            raise ValueError(f"BDF: mass has {len(self.mass)} entries, the state {n}")
        return jnp.ones(n, flat.dtype) if self.mass is None else jnp.asarray(self.mass, flat.dtype)

    def _start(self, fun, t0, flat0, h) -> BDFState:
        """Order 1 from `(t0, y0)` with step `h`: `D_1 = h y'(t0)` (zero for algebraic
        entries), the Jacobian at `(t0, y0)` factorised."""
        mass = self._mass(flat0)
        f0 = fun(t0, flat0)
        slope = jnp.where(mass != 0, f0 / jnp.where(mass != 0, mass, 1.0), 0.0)
        d = jnp.zeros((MAX_ORDER + 3, *flat0.shape), flat0.dtype)
        d = d.at[0].set(flat0).at[1].set(h * slope)
        jac = lax.stop_gradient(jax.jacfwd(lambda v: fun(t0, v))(flat0))
        c = lax.stop_gradient(h / _ALPHA[1])
        one, zero = jnp.ones((), jnp.int32), jnp.zeros((), jnp.int32)
        return BDFState(d, h, one, zero, jac, _factor(mass, c, jac), c, jnp.array(True))

    def step(self, terms, t0, t1, y0, args, solver_state: BDFState, made_jump):
        flat0, unravel = ravel_pytree(y0)
        dtype = flat0.dtype
        h, t0, t1 = (jnp.asarray(x, dtype) for x in (t1 - t0, t0, t1))
        fun = _flat_fun(terms, unravel, args)
        st = solver_state
        if made_jump is not False:  # a discontinuity: the history no longer applies
            st = lax.cond(made_jump, lambda: self._start(fun, t0, flat0, h), lambda: st)
        rescaled = self._rescaled(st, h)
        eq, corr, conv, iters, jac, lu = self._correct(fun, st, rescaled, t1, h)
        rf = self.root_finder
        y1 = eq.y_pred + corr
        # Below a constraint's rounding level the estimate is noise (as in Radau5); not on
        # differential entries, whose rounding averages out over the steps.
        floor = jnp.where(eq.mass == 0, eq.noise, 0.0)
        scale = lax.stop_gradient(jnp.maximum(rf.atol + rf.rtol * jnp.abs(y1), floor))
        order = st.order
        err_norm = lax.stop_gradient(rf.norm(_error_const(order, dtype) * corr / scale))
        err_norm = jnp.where(conv, err_norm, jnp.inf)
        safety = 0.9 * (2 * NEWTON_BUDGET + 1) / (2 * NEWTON_BUDGET + iters)
        shrink = jnp.maximum(MIN_FACTOR, safety * err_norm ** (-1 / (order + 1)))
        shrink = jnp.where(conv, shrink, NEWTON_FAIL_FACTOR)
        d = _update(rescaled, order, corr)
        equal = jnp.where(h == st.h, st.equal, 0) + 1
        new_order, grow = self._choose(d, order, err_norm, scale, safety)
        settle = equal < order + 1  # not yet k + 1 steps of this size: keep h and k
        new_order = jnp.where(settle, order, new_order)
        factor = jnp.where(err_norm <= 1, jnp.where(settle, 1.0, grow), shrink)
        state = BDFState(
            d, h, new_order, jnp.where(settle, equal, 0).astype(jnp.int32),
            jac, lu, eq.c, jnp.array(False),
        )  # fmt: skip
        result = dfx.RESULTS.where(conv, dfx.RESULTS.successful, dfx.RESULTS.nonlinear_divergence)
        rows = jax.tree.map(lambda *xs: jnp.stack(xs), *map(unravel, d[: MAX_ORDER + 1]))
        dense_info = dict(d=rows, order=order)
        y_error = BDFError(err_norm, lax.stop_gradient(factor).astype(dtype))
        return unravel(y1), y_error, dense_info, state, result

    def _rescaled(self, st: BDFState, h):
        """The differences rescaled from the step they hold to `h` (unchanged when equal)."""
        return jnp.where(h == st.h, st.d, rescale(st.d, st.order, h / st.h))

    def _choose(self, d, order, err_norm, scale, safety):
        """`(order, factor)` for the next step from the error estimates of orders `k - 1`,
        `k` and `k + 1` after an accepted step (`d`: the updated differences): the one
        promising the longest step, at most `max_order`."""
        norm = self.root_finder.norm
        lower = norm(_error_const(order - 1, d.dtype) * d[order] / scale)
        upper = norm(_error_const(order + 1, d.dtype) * d[order + 2] / scale)
        inf = jnp.array(jnp.inf, err_norm.dtype)
        lower = jnp.where(order > 1, lax.stop_gradient(lower), inf)
        upper = jnp.where(order < self.max_order, lax.stop_gradient(upper), inf)
        norms = jnp.stack([lower, err_norm, upper])
        factors = norms ** (-1 / (order + jnp.arange(3, dtype=norms.dtype)))
        best = jnp.argmax(factors)
        return (order + best - 1).astype(jnp.int32), jnp.minimum(MAX_FACTOR, safety * factors[best])

    def _correct(self, fun, st: BDFState, d, t1, h):
        """The correction equation of a step `h` from the differences `d` (rescaled to it),
        its solution, and the iteration's report: `(equation, correction, converged,
        iterations, jac, lu)`; the Jacobian refreshed (at the prediction) when the iteration
        failed with a stale one."""
        mass = self._mass(d[0])
        y_pred, psi = _predict(d, st.order)
        c = lax.stop_gradient(h / jnp.asarray(_ALPHA, d.dtype)[st.order])
        rf = self.root_finder
        lu = lax.cond(c == st.c, lambda: st.lu, lambda: _factor(mass, c, st.jac))
        # As Radau5's floor: a correction below the rounding of f (~eps |J||y| per entry,
        # through the Newton matrix) is noise, whatever atol asks. The error test of a
        # constraint is floored by it (`step`); without that, Robertson's DAE (y1 + y2 + y3
        # = 1 at atol 1e-18) stalled at rtol 1e-10. Flooring the iteration's weights too
        # cost accuracy there (641 rtol against 490), so they are left as they are.
        if self.mass is None or all(m != 0 for m in self.mass):
            noise = jnp.zeros_like(y_pred)  # no constraint to floor: skip the solve
        else:
            eps = jnp.finfo(d.dtype).eps
            rounding = NOISE_ULPS * eps * (jnp.abs(st.jac) @ jnp.abs(y_pred))
            noise = jnp.abs(lu_solve(_lu(lu), c * rounding))
        scale = rf.atol + rf.rtol * jnp.abs(y_pred)
        eq = _Correction(fun, t1, y_pred, psi, c, mass, lax.stop_gradient(scale), noise)

        def solve(residual, guess):
            start = (*self._chord(eq, residual, guess, lu), st.jac, lu, st.fresh)

            def retry(carry):
                jac = eq.jacobian()
                new_lu = _factor(mass, c, jac)
                return (*self._chord(eq, residual, guess, new_lu), jac, new_lu, jnp.array(True))

            out = lax.while_loop(lambda s: (s[1] < 0.5) & ~s[-1], retry, start)
            corr, conv, iters, jac, lu_out, _ = out
            return corr, (conv, iters, jac, lu_out)

        zero = jnp.zeros_like(y_pred)
        corr, (conv, iters, jac, lu_out) = lax.custom_root(
            lambda x: eq.residual(x), zero, solve, _tangent_solve, has_aux=True
        )
        return eq, corr, lax.stop_gradient(conv) > 0.5, lax.stop_gradient(iters), jac, lu_out

    def _chord(self, eq: _Correction, residual, guess, lu):
        """`(d, converged, iterations)`: the simplified Newton iteration with `lu`, stopped
        by `chord_verdict` (as floats: `custom_root` wants float auxiliaries)."""
        rf = self.root_finder
        budget = min(NEWTON_BUDGET, rf.max_iterations)

        def body(carry):
            corr, k, size, _, _ = carry
            delta = -lu_solve(_lu(lu), residual(corr))
            new_size = jnp.asarray(rf.norm(delta / eq.scale), size.dtype)
            converged, failed = chord_verdict(
                new_size, size, k + 1, rtol=rf.rtol, kappa=rf.kappa, max_iterations=budget
            )
            return corr + delta, k + 1, new_size, converged, converged | failed

        inf = jnp.array(jnp.inf, guess.dtype)
        start = (guess, jnp.array(0), inf, jnp.array(False), jnp.array(False))
        corr, k, _, conv, _ = lax.while_loop(lambda s: ~s[-1] & (s[1] < budget), body, start)
        return jnp.where(conv, corr, 0.0), conv.astype(corr.dtype), k.astype(corr.dtype)


def _error_const(order, dtype):
    """The error constant of `order` (traced); order 6, asked of order 5 and masked, is 0."""
    return jnp.asarray(np.concatenate([_ERROR_CONST, [0.0]]), dtype)[order]


def _flat_fun(terms, unravel, args):
    def fun(t, v):
        return ravel_pytree(terms.vf(t, unravel(v), args))[0]

    return fun


def _tangent_solve(linear, b):
    """Solve `linear(x) = b` for the correction's implicit derivative: the residual's exact
    Jacobian `M - c ∂f/∂y` at the solution, dense."""
    return jnp.linalg.solve(jax.jacfwd(linear)(jnp.zeros_like(b)), b)
