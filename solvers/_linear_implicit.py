r"""Linear-implicit IMEX steppers: an explicit non-stiff part and a linear (affine) stiff part.

The stiff part may be affine, $L(t, y) = A(t)\,y + b(t)$ — boundary values make $L(t, 0) =
b(t) \neq 0$ — so each step solves one linear system $(I - \theta h A)\,y = r$ with lineax,
where $A$ is the Jacobian of the stiff vector field (`jax.linearize` at zero: exact for an
affine term, and transposable, so reverse-mode gradients flow through the solve).

For any other stiff term the linearisation at zero is wrong, so `init` checks that the term
is affine (`_affine.py`: probes, tolerance, cost) and a term that is not fails the solve's
first step (`diffrax.RESULTS.nonlinear_divergence`); `check_stiff_term` runs the same check
before a solve, with a message (difsim's `simulate` and `sweep` call it).
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from diffrax import AbstractTerm, LocalLinearInterpolation, MultiTerm
from equinox import AbstractClassVar, AbstractVar
from jax import lax
from jax.flatten_util import ravel_pytree
from jaxtyping import PyTree

from difsim.solvers._affine import check_affine, is_affine

LINEAR_SOLVERS = ("gmres", "bicgstab", "cg", "tridiagonal")

LinearSolverSpec = str | lx.AbstractLinearSolver


def _tree_axpy(a, x, y):
    """`a * x + y` on pytrees."""
    return jax.tree.map(lambda xi, yi: a * xi + yi, x, y)


class AbstractLinearImplicit(dfx.AbstractSolver):
    r"""IMEX one-step methods for `MultiTerm(non-stiff term, affine stiff term)` whose implicit
    part needs one linear solve per step (no Newton iteration).

    Subclasses declare the linear solver fields and `theta`, the weight of the implicit
    stage ($\theta = 1$: backward Euler, $\frac12$: trapezoidal).

    The stiff term must be affine in the state: `init` compares it with its linearisation
    at zero at the initial state and a random one, at the first step's two ends (to
    $\sqrt{\varepsilon}$ of the terms' size; see `difsim.solvers._affine`), and if it is
    not, the first step fails with `diffrax.RESULTS.nonlinear_divergence` (difsim:
    `Status.NONLINEAR_SOLVER`) and the solve stops; likewise (`RESULTS.breakdown`,
    `Status.LINEAR_SOLVER`) a stiff term that `"tridiagonal"` finds not tridiagonal.
    `check_stiff_term` does the same before a solve and raises a `ValueError` naming the
    term.
    """

    linear_solver: AbstractVar[LinearSolverSpec]
    rtol: AbstractVar[float | None]
    atol: AbstractVar[float | None]
    theta: AbstractClassVar[float]

    term_structure: ClassVar = MultiTerm[tuple[AbstractTerm, AbstractTerm]]
    interpolation_cls: ClassVar[Callable[..., LocalLinearInterpolation]] = LocalLinearInterpolation

    def __check_init__(self):
        spec = self.linear_solver
        if isinstance(spec, str):
            if spec not in LINEAR_SOLVERS:
                choices = ", ".join(repr(s) for s in LINEAR_SOLVERS)
                raise ValueError(
                    f"{type(self).__name__} linear_solver must be one of {choices} or a "
                    f"lineax solver, got {spec!r}"
                )
        elif not isinstance(spec, lx.AbstractLinearSolver):
            raise TypeError(
                f"{type(self).__name__} linear_solver must be a name or a lineax solver, got "
                f"{type(spec).__name__}"
            )

    @abc.abstractmethod
    def _combine(self, explicit, t1, h, stage, f0, args):
        """The new state from the implicit stage `stage` (and `f0`, the non-stiff term)."""

    def init(self, terms, t0, t1, y0, args):
        # Checked once per solve: the stiff term must be affine (see `_affine.py` for the
        # tolerance and cost) and, for the tridiagonal solver, a tridiagonal operator on
        # the flattened state. The verdict is the solver state, which `step` turns into its
        # result. A check whose output fed nothing would be dropped from the compiled
        # program as dead code: the `eqx.error_if` that stood here was, and a non-affine
        # stiff term ran to SUCCESS. A result also holds under EQX_ON_ERROR=nan.
        _, stiff = terms.terms
        verdict = dfx.RESULTS.where(
            is_affine(stiff.vf, (t0, t1), y0, args),
            dfx.RESULTS.successful,
            # No nonlinear solve is made, so none converges: one linear solve with the
            # linearisation at zero does not solve a step's nonlinear equation.
            dfx.RESULTS.nonlinear_divergence,
        )
        if _is_tridiagonal(self.linear_solver):
            # The probed band is not the operator: the linear solves would solve the wrong
            # systems ("try a different solver", says this result's message).
            tridiagonal = ~(_tridiagonal_defect(stiff.vf, t0, y0, args) > 0)
            verdict = dfx.RESULTS.where(tridiagonal, verdict, dfx.RESULTS.breakdown)
        return verdict

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del made_jump
        y1, result = self._step(terms, t0, t1, y0, args)
        # A stiff term that `init` refused fails the first step (diffrax then stops), and
        # its state is NaN: diffrax's loop saves the state of a failed fixed step.
        accepted = solver_state == dfx.RESULTS.successful
        result = dfx.RESULTS.where(accepted, result, solver_state)
        y1 = jax.tree.map(lambda y: jnp.where(accepted, y, jnp.nan), y1)
        return y1, None, dict(y0=y0, y1=y1), solver_state, result

    def check_stiff_term(self, vector_field, t0, t1, y0, args, *, name: str) -> None:
        """Raise a `ValueError` naming `name` (e.g. `"Heat.rhs_stiff"`) if the stiff
        `vector_field(t, y, args)` is not affine in the state, or (`"tridiagonal"`) not a
        tridiagonal operator: what `init` checks, before a solve and with a message.
        Skipped (silently) if anything is traced; the solve then fails at its first step."""
        check_affine(self, vector_field, t0, t1, y0, args, name=name)
        if not _is_tridiagonal(self.linear_solver) or _traced((t0, y0, args)):
            return
        excess = float(_tridiagonal_defect(vector_field, t0, y0, args))
        if excess > 0:
            raise ValueError(
                f"{name} is not a tridiagonal operator on the flattened state, which "
                f"{type(self).__name__}(linear_solver='tridiagonal') needs (its response to "
                f"a random state differs from the probed band by {excess:.3g} more than "
                "rounding): that takes a 1-D operator with non-periodic boundaries and no "
                "coupling of variables in the stiff part; use linear_solver='gmres'"
            )

    def _step(self, terms, t0, t1, y0, args):
        """`(y1, diffrax result)` of one step, for an affine stiff term."""
        explicit, stiff = terms.terms
        # Steps in the state's precision (times may be float64 for a float32 state).
        h = jnp.asarray(t1 - t0, _dtype(y0))
        theta_h = self.theta * h
        f0 = explicit.vf(t0, y0, args)
        # Right-hand side of (I - θhA) y = y0 + (1-θ)h L(t0, y0) + h F(t0, y0) + θh b(t1).
        rhs = _tree_axpy(h, f0, y0)
        if self.theta != 1:
            rhs = _tree_axpy((1 - self.theta) * h, stiff.vf(t0, y0, args), rhs)
        b1, jvp = jax.linearize(lambda y: stiff.vf(t1, y, args), _zeros(y0))
        rhs = _tree_axpy(theta_h, b1, rhs)
        stage, result = self._solve(jvp, theta_h, rhs, y0)
        y1 = self._combine(explicit, t1, h, stage, f0, args)
        y1 = jax.tree.map(lambda new, old: new.astype(old.dtype), y1, y0)
        return y1, result

    def func(self, terms, t0, y0, args):
        explicit, stiff = terms.vf(t0, y0, args)
        return jax.tree.map(jnp.add, explicit, stiff)

    def _solve(self, jvp, theta_h, rhs, guess):
        """Solve `(I - θh A) y = rhs`, `A = jvp`; returns `(y, diffrax result)`."""
        spec = self.linear_solver
        flat, unravel = ravel_pytree(rhs)
        if _is_tridiagonal(spec):
            diagonal, lower, upper = _probe_tridiagonal(jvp, unravel, flat)
            operator = lx.TridiagonalLinearOperator(
                1 - theta_h * diagonal, -theta_h * lower, -theta_h * upper
            )
            sol = lx.linear_solve(operator, flat, lx.Tridiagonal(), throw=False)
            return unravel(sol.value), dfx.RESULTS.promote(sol.result)
        solver = self._lineax_solver(flat.dtype)
        inner = solver.solver if isinstance(solver, ScaledKrylov) else solver
        symmetric = isinstance(inner, lx.CG)
        tags = (lx.symmetric_tag, lx.positive_semidefinite_tag) if symmetric else ()
        operator = lx.FunctionLinearOperator(
            lambda v: _tree_axpy(-theta_h, jvp(v), v),
            jax.eval_shape(lambda: rhs),
            tags=tags,
        )
        options = {}
        if isinstance(inner, lx.GMRES | lx.BiCGStab | lx.CG):
            options["y0"] = lax.stop_gradient(guess)  # the old state: a good first guess
        sol = lx.linear_solve(operator, rhs, solver, options=options, throw=False)
        return sol.value, dfx.RESULTS.promote(sol.result)

    def _lineax_solver(self, dtype) -> lx.AbstractLinearSolver:
        spec = self.linear_solver
        if not isinstance(spec, str):
            return spec
        # Default rtol eps^(2/3) (about 4e-11 in float64, 2e-5 in float32): well below the
        # time-stepping error, yet reachable by a Krylov method in that precision.
        rtol = float(jnp.finfo(dtype).eps) ** (2 / 3) if self.rtol is None else self.rtol
        cls = dict(gmres=lx.GMRES, bicgstab=lx.BiCGStab, cg=lx.CG)[spec]
        if self.atol is None:
            return ScaledKrylov(cls(rtol=rtol, atol=0.0))
        return cls(rtol=rtol, atol=self.atol)


class ScaledKrylov(lx.AbstractLinearSolver):
    r"""A lineax Krylov solver (`lx.GMRES`, `lx.BiCGStab`, `lx.CG`) whose absolute tolerance
    is set at each solve from the right-hand side $b$: `max(rtol * max|b|, eps)`.

    lineax stops when $|r_i| \le \mathrm{atol} + \mathrm{rtol}\,|b_i|$ for every entry, so a
    fixed `atol` is meaningless for states of size 1e-9 or 1e9, and `atol = 0` never
    converges where $b_i = 0$. The floor `eps` (of the dtype) is there because lineax's GMRES
    reports a breakdown once the residual's 2-norm falls below `eps` unless converged, which
    happens in Newton iterations whose residual tends to zero.
    """

    solver: lx.AbstractLinearSolver

    def init(self, operator, options):
        return self.solver.init(operator, options)

    def compute(self, state, vector, options):
        eps = jnp.finfo(_dtype(vector)).eps
        atol = jnp.maximum(self.solver.rtol * _max_abs(vector), eps)
        solver = eqx.tree_at(lambda s: s.atol, self.solver, atol)
        return solver.compute(state, vector, options)

    def transpose(self, state, options):
        return self.solver.transpose(state, options)

    def conj(self, state, options):
        return self.solver.conj(state, options)

    def assume_full_rank(self):
        return self.solver.assume_full_rank()


class BackwardEuler(AbstractLinearImplicit):
    r"""IMEX Euler (1st order): forward Euler for the non-stiff term $F$, backward Euler for
    the affine stiff term $L(t, y) = A(t) y + b(t)$:

    $$(I - h A(t_1))\, y_1 = y_0 + h F(t_0, y_0) + h\, b(t_1).$$

    L-stable in the stiff part; one linear solve per step. `terms` is
    `MultiTerm(ODETerm(F), ODETerm(L))`; the state may be any pytree of arrays
    (`linear_solver="tridiagonal"`: its flattening must give a tridiagonal operator).

    **Arguments:**

    - `linear_solver`: `"gmres"` (default; matrix-free, any operator), `"bicgstab"`,
        `"cg"` (only when $A$ is symmetric negative semi-definite, e.g. a finite-difference
        Laplacian with Dirichlet/Neumann boundaries: then $I - h A$ is symmetric positive
        definite and CG is the cheapest), `"tridiagonal"` (1-D operators: the three
        diagonals are probed with three stencil-coloured vectors, then a direct solve), or
        any lineax solver (`lx.CG` gets the symmetric/positive tags).
    - `rtol`, `atol`: tolerances of the Krylov solvers, per entry of the residual:
        $|r_i| \le$ `atol` $+$ `rtol` $|b_i|$ (default `rtol = eps**(2/3)` of the state's
        dtype; `atol = None`: `rtol * max|b|` or more, see [`ScaledKrylov`][]). Ignored for
        `"tridiagonal"` and lineax instances.
    """

    linear_solver: LinearSolverSpec = eqx.field(default="gmres", static=True)
    rtol: float | None = eqx.field(default=None, static=True)
    atol: float | None = eqx.field(default=None, static=True)
    theta: ClassVar[float] = 1.0

    def order(self, terms):
        return 1

    def _combine(self, explicit, t1, h, stage, f0, args):
        return stage


class CrankNicolson(AbstractLinearImplicit):
    r"""Crank–Nicolson for the affine stiff term with Heun for the non-stiff term (2nd order).

    The IMEX Runge–Kutta pair with the trapezoidal rule as implicit and Heun's method as
    explicit tableau (both $c = (0, 1)$, $b = (\tfrac12, \tfrac12)$), stiffly accurate in
    the implicit part, so one linear solve per step:

    $$(I - \tfrac{h}{2} A_1)\, Y = y_0 + \tfrac{h}{2} L(t_0, y_0) + h F(t_0, y_0)
      + \tfrac{h}{2} b_1, \qquad y_1 = Y + \tfrac{h}{2}\big(F(t_1, Y) - F(t_0, y_0)\big),$$

    with $L(t, y) = A(t) y + b(t)$, $A_1 = A(t_1)$, $b_1 = b(t_1)$. With $F = 0$ this is the
    Crank–Nicolson method exactly (A-stable, not L-stable: very stiff modes decay with
    alternating sign). A multistep CNAB2 would need one solve too, but a start-up step and
    a history in the solver state that breaks at every step-size change; this is self-starting.
    Two evaluations of $F$ and two of $L$ (plus one linearisation) per step.

    **Arguments:** as [`BackwardEuler`][].
    """

    linear_solver: LinearSolverSpec = eqx.field(default="gmres", static=True)
    rtol: float | None = eqx.field(default=None, static=True)
    atol: float | None = eqx.field(default=None, static=True)
    theta: ClassVar[float] = 0.5

    def order(self, terms):
        return 2

    def _combine(self, explicit, t1, h, stage, f0, args):
        correction = jax.tree.map(jnp.subtract, explicit.vf(t1, stage, args), f0)
        return _tree_axpy(0.5 * h, correction, stage)


def _no_gradient(tree: PyTree) -> PyTree:
    return jax.tree.map(lambda x: lax.stop_gradient(x) if eqx.is_array(x) else x, tree)


def _is_tridiagonal(spec) -> bool:
    return isinstance(spec, str) and spec == "tridiagonal"


def _dtype(tree: PyTree):
    return jnp.result_type(*jax.tree.leaves(tree))


def _zeros(tree: PyTree) -> PyTree:
    return jax.tree.map(jnp.zeros_like, tree)


def _max_abs(tree: PyTree):
    leaves = [jnp.max(jnp.abs(x)) for x in jax.tree.leaves(tree) if jnp.size(x)]
    return jnp.max(jnp.stack(leaves)) if leaves else jnp.zeros(())


def _sqrt_eps(x):
    return jnp.sqrt(jnp.finfo(x.dtype).eps)


def _probe_tridiagonal(jvp, unravel, flat):
    """`(diagonal, lower, upper)` of the linear map `jvp` (on the flattened state), from its
    response to three vectors that colour every third entry: columns of one colour do not
    share a row of a tridiagonal matrix, so each response holds one diagonal entry per row.
    """
    (n,) = flat.shape
    index = jnp.arange(n)
    colours = (index[None, :] % 3 == jnp.arange(3)[:, None]).astype(flat.dtype)  # (3, n)
    responses = jax.vmap(lambda p: ravel_pytree(jvp(unravel(p)))[0])(colours)
    diagonal = responses[index % 3, index]
    lower = responses[index[:-1] % 3, index[:-1] + 1]  # A[i+1, i]
    upper = responses[(index[:-1] + 1) % 3, index[:-1]]  # A[i, i+1]
    return diagonal, lower, upper


def _tridiagonal_defect(vector_field, t, y0, args):
    """How far (beyond rounding, `sqrt(eps)` relative) the linearisation of `vector_field`
    at zero differs from the tridiagonal band `_probe_tridiagonal` reads off it, on a random
    state: positive if the operator is not tridiagonal (periodic, 2-D, coupled variables)."""
    y0, args = _no_gradient((y0, args))
    _, jvp = jax.linearize(lambda y: vector_field(t, y, args), _zeros(y0))
    flat, unravel = ravel_pytree(y0)
    v = jax.random.normal(jax.random.key(0), flat.shape, flat.dtype)
    diagonals = _probe_tridiagonal(jvp, unravel, flat)
    band = lx.TridiagonalLinearOperator(*diagonals).mv(v)
    error = _max_abs(ravel_pytree(jvp(unravel(v)))[0] - band)
    scale = sum(_max_abs(d) for d in diagonals) * _max_abs(v)
    return error - _sqrt_eps(flat) * scale


def _traced(tree: PyTree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))
