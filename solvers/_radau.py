r"""Radau IIA of order 5: the three-stage collocation method at the Radau points, with the
simplified Newton iteration, error estimate and starting values of Hairer & Wanner's
RADAU5, for stiff ODEs and for differential-algebraic systems $M y' = f(t, y)$ of index 1.

The stage increments $z_i = Y_i - y_0$ at $c = ((4 - \sqrt 6)/10, (4 + \sqrt 6)/10, 1)$
solve (Hairer & Wanner, *Solving ODEs II*, 2nd ed., §IV.8 and §VI.1)

$$(A^{-1} \otimes M)\,Z = h\,F(Z), \qquad F_i = f(t_0 + c_i h,\; y_0 + z_i),$$

and $y_1 = y_0 + z_3$ (stiffly accurate: L-stable, and for an index-1 DAE of order 5 in
every component). $A^{-1} = T \Lambda T^{-1}$ has one real eigenvalue $\hat\gamma$ and a
complex pair $\hat\alpha \pm i \hat\beta$, so each simplified Newton iteration solves one
real system with $\hat\gamma M - hJ$ and one complex system with $(\hat\alpha - i
\hat\beta) M - hJ$ (both factorised once per step; $J = \partial f / \partial y$ at
$(t_0, y_0)$), in place of one of size $3n$. It stops by the test of
[`StageNewton`][difsim.solvers.StageNewton] on the change of the stage values, and a
failure rejects the step (diffrax retries a shorter one).

The error estimate is the difference to an embedded method of order 3 with a stage at
$t_0$, filtered through the real system so that it stays bounded on stiff components:
$\mathrm{err} = (\hat\gamma M - hJ)^{-1}\big(h f(t_0, y_0) + M \sum_i e_i z_i\big)$ with
$e = (-(13 + 7\sqrt 6)/3,\; (-13 + 7\sqrt 6)/3,\; -1/3)$ (RADAU5's `DD1..3`; derived
here from the order conditions and checked against them in the tests). Where that estimate
exceeds the tolerance it is refined once, with $f(t_0, y_0 + \mathrm{err})$ in place of
$f(t_0, y_0)$ (Hairer & Wanner's remedy for its pessimism on very stiff problems).

The step is controlled with the tolerances as given (not RADAU5's transformed `rtol' =
0.1 rtol^(2/3)`; see `Radau5._allowance`), and neither the iteration nor the estimate is
asked for corrections below the rounding level of `f` (see `Radau5._setup`).

Dense output is the collocation polynomial (order 4 inside a step, one above the stage
order), and the next step's Newton iteration starts from its extrapolation. Derivatives
through the stage solves follow the implicit function theorem (`jax.lax.custom_root`):
exact for the converged stages, in forward and reverse mode, whatever the iteration did.
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

from difsim.solvers._rosenbrock import unit_interval
from difsim.solvers._stage_newton import NOISE_ULPS, StageNewton, chord_verdict


def _radau_coefficients():
    """The Butcher matrix's inverse, its real block form, the error weights and the
    dense-output map of Radau IIA 5, computed from the tableau (Hairer & Wanner, Table
    IV.5.6) rather than transcribed."""
    s6 = np.sqrt(6.0)
    c = np.array([(4 - s6) / 10, (4 + s6) / 10, 1.0])
    a = np.array(
        [
            [(88 - 7 * s6) / 360, (296 - 169 * s6) / 1800, (-2 + 3 * s6) / 225],
            [(296 + 169 * s6) / 1800, (88 + 7 * s6) / 360, (-2 - 3 * s6) / 225],
            [(16 - s6) / 36, (16 + s6) / 36, 1 / 9],
        ]
    )
    a_inv = np.linalg.inv(a)
    values, vectors = np.linalg.eig(a_inv)
    real = int(np.argmin(np.abs(values.imag)))
    pair = next(i for i in range(3) if i != real and values[i].imag > 0)
    t = np.column_stack([vectors[:, real].real, vectors[:, pair].real, vectors[:, pair].imag])
    block = np.linalg.solve(t, a_inv @ t)  # [[γ, 0, 0], [0, α, β], [0, -β, α]]
    gamma = block[0, 0]
    # (w2 + i w3) ↦ (α - iβ)(w2 + i w3) is the 2x2 block acting on (w2, w3).
    mu = complex(block[1, 1], -block[1, 2])
    # The embedded method y0 + h(γ0 f(t0, y0) + Σ b̂_i F_i), γ0 = 1/γ, of order 3:
    # Σ_i b̂_i c_i^(k-1) + γ0 δ_k1 = 1/k for k = 1, 2, 3.
    gamma0 = 1 / gamma
    b_hat = np.linalg.solve(np.vstack([c**k for k in range(3)]), [1 - gamma0, 1 / 2, 1 / 3])
    # h Σ (b̂ - b)_i F_i = Σ e_i z_i with hF = A⁻¹Z; scaled by 1/γ0 as the filter wants.
    err_weights = (b_hat - a[2]) @ a_inv / gamma0
    # z(θ) = θ K1 + θ² K2 + θ³ K3 through z(c_i) = z_i: K = V⁻¹ Z, V_ij = c_i^j.
    dense = np.linalg.inv(np.column_stack([c, c**2, c**3]))
    return c, a_inv, t, np.linalg.inv(t), gamma, mu, err_weights, dense


RADAU_C, RADAU_A_INV, _T, _T_INV, RADAU_GAMMA, RADAU_MU, RADAU_ERR, _DENSE = _radau_coefficients()


def _collocation(theta, y0, k):
    """`y0 + θ(K1 + θ(K2 + θ K3))`, `k` the `K_m` stacked on the leading axis."""
    return y0 + theta * (k[0] + theta * (k[1] + theta * k[2]))


class RadauInterpolation(dfx.AbstractLocalInterpolation):
    """The collocation polynomial of one Radau IIA step (`k`: its coefficients `K_1..3`
    stacked on a leading axis of every leaf; see the module docstring)."""

    t0: float
    t1: float
    y0: PyTree[Array]
    k: PyTree[Array]

    def evaluate(self, t0, t1=None, left: bool = True) -> PyTree[Array]:
        del left
        if t1 is not None:
            return jax.tree.map(jnp.subtract, self.evaluate(t1), self.evaluate(t0))
        theta = unit_interval(self.t0, self.t1, t0)
        return jax.tree.map(lambda y0, k: _collocation(theta, y0, k), self.y0, self.k)


class _Step(eqx.Module):
    """What one step's stage solve needs: the flattened right-hand side `fun(t, v)`, the
    start `(t0, y0)`, the step `h`, the mass diagonal and the two LU factorisations."""

    fun: Callable
    t0: Array
    y0: Array
    h: Array
    mass: Array
    real_lu: Any
    complex_lu: Any
    noise: Array  # (n,) the rounding level of a correction, per entry (see `_setup`)

    def residual(self, z):
        """`(A⁻¹ ⊗ M) Z - h F(Z)`, shape `(3, n)`; `Z` itself on a zero-length step
        (where the singular M of a DAE would leave it undetermined)."""
        f = jnp.stack([self.fun(self.t0 + c * self.h, self.y0 + zi) for c, zi in zip(RADAU_C, z)])
        r = jnp.asarray(RADAU_A_INV, z.dtype) @ z * self.mass[None] - self.h * f
        return jnp.where(self.h == 0, z, r)

    def correction(self, r):
        """The simplified Newton correction `-(A⁻¹ ⊗ M - h I ⊗ J)⁻¹ r`, by the transformed
        real and complex systems."""
        w = jnp.asarray(_T_INV, r.dtype) @ r
        d1 = lu_solve(self.real_lu, w[0])
        dc = lu_solve(self.complex_lu, w[1] + 1j * w[2])
        return -(jnp.asarray(_T, r.dtype) @ jnp.stack([d1, dc.real, dc.imag]))


class Radau5(dfx.AbstractImplicitSolver, dfx.AbstractAdaptiveSolver):
    r"""Radau IIA of order 5 (Hairer & Wanner's RADAU5): three implicit stages, L-stable
    and stiffly accurate, with an embedded error estimate of order 3 and the collocation
    polynomial as dense output. For stiff ODEs and index-1 DAEs of moderate size: each
    step forms the dense Jacobian of the flattened state by `jax.jacfwd` and factorises
    one real and one complex $n \times n$ matrix ($O(n^3)$). See the module docstring for
    the equations.

    Use with `diffrax.PIDController`: its tolerances are the stage iteration's
    (`root_finder`, a [`StageNewton`][difsim.solvers.StageNewton] whose `rtol`/`atol` the
    controller fills in, and whose `kappa` is the named solver's `root_tol`).

    **Arguments:**

    - `root_finder`: where the stage iteration reads `rtol`, `atol`, `norm`, `kappa` and
      `max_iterations` (its own Newton iteration is not used: Radau's stages are solved
      in transformed coordinates).
    - `mass`: as [`Rodas5P`][difsim.solvers.Rodas5P]'s: `None` (an ODE), or the diagonal of
      a constant, possibly singular mass matrix, one number per entry of the flattened
      state (a tuple: static); a zero entry makes that component algebraic.
    """

    term_structure: ClassVar = AbstractTerm
    interpolation_cls: ClassVar[Callable[..., RadauInterpolation]] = RadauInterpolation
    root_finder: StageNewton = dfx.with_stepsize_controller_tols(StageNewton)()
    # diffrax's interface for implicit solvers; the iteration's budget is the root
    # finder's `max_iterations` (also 10 by default), which its forecast plans for.
    root_find_max_steps: int = eqx.field(static=True, default=10)
    mass: tuple[float, ...] | None = eqx.field(default=None, static=True)

    def order(self, terms):
        return 5

    def error_order(self, terms):
        # The embedded solution has order 3: its local error, the estimate, is O(h⁴).
        return 4

    def init(self, terms, t0, t1, y0, args):
        flat, _ = ravel_pytree(y0)
        zero = jnp.zeros((), flat.dtype)
        return zero, zero, jnp.zeros((3, *flat.shape), flat.dtype), flat

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        flat0, unravel = ravel_pytree(y0)
        dtype = flat0.dtype
        h, t0 = jnp.asarray(t1 - t0, dtype), jnp.asarray(t0, dtype)

        def fun(t, v):
            return ravel_pytree(terms.vf(t, unravel(v), args))[0]

        st, f0 = self._setup(fun, t0, flat0, h)
        guess = _starting_values(solver_state, made_jump, t0, h, flat0, st.mass * f0)
        z, converged = lax.custom_root(
            lambda z: st.residual(z), guess, lambda g, z0: self._iterate(st, g, z0),
            _tangent_solve,
            has_aux=True,
        )  # fmt: skip
        ok = lax.stop_gradient(converged) > 0.5
        y1 = flat0 + z[2]
        big = jnp.maximum(jnp.abs(flat0), jnp.abs(y1))  # as the controller measures
        # Below the rounding level of a constraint the estimate is noise: measured
        # against it there (in the controller's units: it divides by `_allowance`).
        # Not on differential entries: their rounding averages out over the steps.
        floor = jnp.where(st.mass == 0, st.noise, 0.0)
        allowance = jnp.maximum(self._allowance(big), floor)
        err = self._error(st, f0, z, allowance)
        err = err * self._allowance(big) / allowance
        y_error = jnp.where(ok, err, jnp.inf)
        result = dfx.RESULTS.where(ok, dfx.RESULTS.successful, dfx.RESULTS.nonlinear_divergence)
        k = jnp.asarray(_DENSE, dtype) @ z
        dense_info = dict(y0=y0, k=jax.tree.map(lambda *xs: jnp.stack(xs), *map(unravel, k)))
        return unravel(y1), unravel(y_error), dense_info, (t0, h, k, flat0), result

    def _setup(self, fun, t0, flat0, h) -> tuple[_Step, Array]:
        """The step's stage problem, and `f(t0, y0)` (from the Jacobian's evaluation)."""
        n = flat0.shape[0]
        if self.mass is not None and len(self.mass) != n:
            raise ValueError(f"Radau5: mass has {len(self.mass)} entries, the state {n}")
        ones = jnp.ones(n, flat0.dtype)
        mass = ones if self.mass is None else jnp.asarray(self.mass, flat0.dtype)

        # J only shapes the iteration and filters the error: no derivative is taken of it
        # (the stages' derivatives come from the residual, by implicit differentiation).
        # f0 too is needed only without derivatives (the error estimate, the first guess).
        def both(v):
            out = fun(t0, v)
            return out, out

        jac, f0 = jax.jacfwd(both, has_aux=True)(flat0)
        jac, f0 = lax.stop_gradient(jac), lax.stop_gradient(f0)
        hc = lax.stop_gradient(h)
        eye = jnp.eye(n, dtype=flat0.dtype)

        def factor(shift):
            # A zero-length step would factorise the singular M of a DAE.
            return lu_factor(jnp.where(hc == 0, eye, shift * jnp.diag(mass) - hc * jac))

        real = factor(RADAU_GAMMA)
        # f_i is evaluated to ~eps |J_i| |y| only (its terms' size, not its own: they may
        # cancel), and a stage value corrected to that through the Newton matrix: the
        # floor below which a correction or an error estimate is rounding, whatever atol
        # asks. Robertson's y1 + y2 + y3 = 1 with y1 ≈ 1 fixes y3 to 1e-16 only, and its
        # y1' = -0.04 y1 + 1e4 y2 y3 cancels to 1e-9 of its terms.
        eps = jnp.finfo(flat0.dtype).eps
        rounding = NOISE_ULPS * eps * (jnp.abs(jac) @ jnp.abs(flat0))
        noise = jnp.abs(lu_solve(real, hc * rounding))
        return _Step(fun, t0, flat0, h, mass, real, factor(RADAU_MU), noise), f0

    def _allowance(self, y):
        """The error a step may make in each entry of `y`: the controller's `atol + rtol
        |y|`. Not RADAU5's transformed `rtol' = 0.1 rtol^(2/3)`, which offsets the order-3
        estimate of an order-5 solution but lets one step err by `rtol'`: on Robertson's
        problem, whose final value is mostly the last steps' error, that missed the
        reference by 2-300 rtol at rtol 1e-8 and 1e-10 (RADAU5 also scales `atol` so).
        The price is a solution more accurate than asked: 8.5e-8 at rtol 1e-4 on
        Robertson's DAE, 2.9e-7 on Akzo Nobel's (`experiments/benchmarks/bench_dae.py`)."""
        rf = self.root_finder
        return rf.atol + rf.rtol * jnp.abs(y)

    def _iterate(self, st: _Step, residual, z0):
        """`(Z, converged)`: the simplified Newton iteration from `z0`, stopped by
        `chord_verdict` on the weighted change of the stage values. A failed iteration
        returns zero stages (finite, for the implicit derivative of a rejected step)."""
        rf = self.root_finder

        def cond(carry):
            _, k, _, _, done = carry
            return ~done & (k < rf.max_iterations)

        def body(carry):
            z, k, size, _, _ = carry
            dz = st.correction(residual(z))
            z = z + dz
            allowance = jnp.maximum(self._allowance(st.y0[None] + z), st.noise[None])
            new_size = jnp.asarray(rf.norm(dz / allowance), size.dtype)
            converged, failed = chord_verdict(
                new_size, size, k + 1,
                rtol=rf.rtol, kappa=rf.kappa, max_iterations=rf.max_iterations,
            )  # fmt: skip
            return z, k + 1, new_size, converged, converged | failed

        inf = jnp.array(jnp.inf, z0.dtype)
        start = (z0, jnp.array(0), inf, jnp.array(False), jnp.array(False))
        z, _, _, converged, _ = lax.while_loop(cond, body, start)
        # The flag as a number: jax 0.10 gives a boolean aux of `custom_root` a boolean
        # tangent, which its JVP rule then rejects (it wants float0).
        return jnp.where(converged, z, 0.0), converged.astype(z.dtype)

    def _error(self, st: _Step, f0, z, allowance):
        """The filtered error estimate (module docstring), refined once where it exceeds
        the tolerance.

        The constraints' residual at `y0` is left out (subtracted from `f`'s algebraic
        entries): `y0` is consistent, and what residual it has is rounding, which the
        filter turns into an error that no step size shrinks. On Robertson's problem
        (`y1 + y2 + y3 = 1` with y1 ≈ 1 and atol 1e-18) it held the estimate at 64x the
        tolerance, and the solve at steps of 1e-11 s."""
        carried = st.mass * (jnp.asarray(RADAU_ERR, z.dtype) @ z)
        defect = jnp.where(st.mass == 0, f0, 0.0)
        err = lu_solve(st.real_lu, st.h * (f0 - defect) + carried)

        def refine(err):
            f = st.fun(st.t0, st.y0 + err)
            return lu_solve(st.real_lu, st.h * (f - defect) + carried)

        big = self.root_finder.norm(err / allowance) >= 1
        return lax.cond(big, refine, lambda e: e, err)


def _starting_values(state, made_jump, t0, h, y0, slope):
    """The stage increments' first guess: the previous step's collocation polynomial
    extrapolated to this step's stage times; on the first step or after a jump, Euler's
    `c_i h M f(t0, y0)` (`slope`; algebraic entries held), whose error is O(h²) where a
    zero guess's is O(h) (RADAU5 starts from zero)."""
    t_prev, h_prev, k_prev, y_prev = state
    theta = unit_interval(t_prev, t_prev + h_prev, t0 + jnp.asarray(RADAU_C, y0.dtype) * h)
    extrapolated = jax.vmap(lambda th: _collocation(th, y_prev, k_prev))(theta) - y0[None]
    usable = (h_prev != 0) & ~jnp.asarray(made_jump) & jnp.all(jnp.isfinite(extrapolated))
    euler = jnp.asarray(RADAU_C, y0.dtype)[:, None] * h * slope[None]
    return lax.stop_gradient(jnp.where(usable, extrapolated, euler))


def _tangent_solve(linear, b):
    """Solve `linear(x) = b` for the stages' implicit derivative: the residual's exact
    Jacobian (at the converged stages), dense, of size 3n."""
    jac = jax.jacfwd(linear)(jnp.zeros_like(b))
    size = b.size
    return jnp.linalg.solve(jac.reshape(size, size), b.reshape(size)).reshape(b.shape)
