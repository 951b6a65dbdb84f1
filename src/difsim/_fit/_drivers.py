"""The optimizers of a fit: optax and optimistix behind one interface, [`AbstractDriver`][].

A driver holds one optimizer and takes one step on a problem; the loop (`_loop.py`) runs
the steps. Optimizers are chosen by name from the tables below, or passed as objects.
"""

import abc
import functools
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import optax
import optimistix as optx
from jaxtyping import Array, Bool, Float, Int

from difsim._fit._lm import TrustRegionLM
from difsim._fit._problem import AbstractProblem
from difsim._status import result_index

OPTAX_OPTIMIZERS = {
    "adam": optax.adam,
    "adamw": optax.adamw,
    "adabelief": optax.adabelief,
    "rmsprop": optax.rmsprop,
    "sgd": optax.sgd,
    "lbfgs": None,  # optax.lbfgs: line search, no learning rate
}
OPTIMISTIX_SOLVERS = {
    # difsim's trust-region Levenberg–Marquardt (`_lm.py`), with scipy trf's rules: the
    # default, from bench_fit_robustness.py; and with MINPACK lmder's.
    "trust_region": functools.partial(TrustRegionLM, factor=1.0, scaled=False, policy="trf"),
    "minpack": functools.partial(TrustRegionLM, factor=100.0, scaled=True, policy="minpack"),
    "levenberg_marquardt": optx.LevenbergMarquardt,
    "gauss_newton": optx.GaussNewton,
    "dogleg": optx.Dogleg,
    "bfgs": optx.BFGS,
    "nonlinear_cg": optx.NonlinearCG,
}
OPTIMIZERS = (*OPTIMISTIX_SOLVERS, *OPTAX_OPTIMIZERS)
# Reverse mode through diffrax's checkpointed loop, forward mode, or reverse mode by the
# ensemble engine's discrete adjoint of its own steps (`simulate(adjoint="discrete")`).
ADJOINTS = ("checkpoint", "forward", "discrete")
REVERSE = ("checkpoint", "discrete")


@functools.lru_cache(maxsize=64)
def named_optax(name: str, learning_rate, clip: float | None = None):
    """The optax optimizer `name` at `learning_rate` (a number or an optax schedule, a
    function of the step count), after clipping the gradient to global norm `clip`."""
    # Cached: the same name and rate give the same (hashable) object, so the compiled
    # block is reused across fits instead of being recompiled for every new closure.
    if name == "lbfgs":
        opt = optax.lbfgs()
    else:
        opt = OPTAX_OPTIMIZERS[name](learning_rate)
    return _with_extra_args(opt, clip)


@functools.lru_cache(maxsize=64)
def _with_extra_args(optimizer: optax.GradientTransformation, clip: float | None = None):
    # Cached so that passing the same optax object again reuses the compiled block.
    if clip is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(clip), optimizer)
    return optax.with_extra_args_support(optimizer)


def make_driver(optimizer: Any, *, learning_rate, tol: float, adjoint: str, clip=None):
    """An [`AbstractDriver`][] for an optimizer name, an optax transformation or an
    optimistix solver; `clip` (optax only) bounds each gradient's global norm."""
    if not callable(learning_rate):
        if isinstance(learning_rate, bool) or not float(learning_rate) > 0:
            raise ValueError(
                f"learning_rate must be a positive number or an optax schedule, got "
                f"{learning_rate!r}"
            )
        learning_rate = float(learning_rate)
    if clip is not None and (isinstance(clip, bool) or not float(clip) > 0):
        raise ValueError(f"clip must be a positive gradient norm, got {clip!r}")
    clip = None if clip is None else float(clip)
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key in OPTAX_OPTIMIZERS:
            return OptaxDriver(named_optax(key, learning_rate, clip), adjoint, key)
        if key in OPTIMISTIX_SOLVERS:
            _no_clip(clip, key)
            return OptimistixDriver(OPTIMISTIX_SOLVERS[key](rtol=tol, atol=tol), adjoint, key)
        raise ValueError(
            f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}, or pass "
            "an optax GradientTransformation or an optimistix solver"
        )
    if isinstance(optimizer, optx.AbstractLeastSquaresSolver | optx.AbstractMinimiser):
        _no_clip(clip, type(optimizer).__name__)
        return OptimistixDriver(optimizer, adjoint, type(optimizer).__name__)
    if isinstance(optimizer, optax.GradientTransformation):
        return OptaxDriver(_with_extra_args(optimizer, clip), adjoint, "optax")
    raise TypeError(
        f"optimizer must be a name ({', '.join(OPTIMIZERS)}), an optax GradientTransformation "
        f"or an optimistix least-squares solver or minimiser, got {type(optimizer).__name__}"
    )


def _no_clip(clip, name: str) -> None:
    if clip is not None:
        raise ValueError(
            f"clip bounds the gradient steps of optax optimizers; {name} takes its own "
            "(trust-region or line-search) steps: remove clip, or choose e.g. 'adam'"
        )


class Step(eqx.Module):
    """What one optimizer step did (each field batched under a multistart).

    **Fields:** `u` and `state`: the next iterate `(p,)` (unconstrained) and optimizer
    state; `point`: the iterate the step judged, `(p,)`; `loss`, `grad_norm`: the
    objective and its gradient's norm there (NaN when costly); `converged`: the
    optimizer's own convergence test passed; `result`: optimistix's result index
    (`0` = successful; always `0` for optax), kept so that a failure keeps its message.
    """

    u: Float[Array, " p"]
    state: Any
    point: Float[Array, " p"]
    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    converged: Bool[Array, ""]
    result: Int[Array, ""]


class AbstractDriver(eqx.Module):
    """One optimizer family: its state and one step on a problem."""

    adjoint: eqx.AbstractVar[str]
    name: eqx.AbstractVar[str]

    def prepare(self, problem: AbstractProblem, u: Array) -> tuple["AbstractDriver", Any]:
        """This driver made ready for `problem` (a copy, for solvers that need setup), and
        the optimizer state at `u`."""
        return self, self.init(problem, u)

    @abc.abstractmethod
    def init(self, problem: AbstractProblem, u: Array) -> Any:
        """The optimizer state (arrays only) at `u`."""

    @abc.abstractmethod
    def step(self, problem: AbstractProblem, u: Array, state: Any, good_u: Array) -> Step:
        """One step from iterate `u` (with optimizer `state`); `good_u` is the last
        iterate with a finite loss, where a rejected step may fall back to."""

    @property
    def has_convergence_test(self) -> bool:
        return False

    @property
    def tolerances(self) -> tuple[float, float] | None:
        """The optimizer's `(rtol, atol)`, for the final-point test of its result; `None`
        where it has none (optax)."""
        return None


def value_and_grad(problem: AbstractProblem, u: Array, adjoint: str):
    """Loss and its gradient w.r.t. `u`: reverse mode through the solve (its checkpointed
    loop, or the discrete adjoint of the engine's steps), or forward mode (one batched
    tangent solve per free variable)."""
    if adjoint in REVERSE:
        return jax.value_and_grad(problem.loss)(u)
    basis = jnp.eye(u.shape[0], dtype=u.dtype)
    values, tangents = jax.vmap(lambda e: jax.jvp(problem.loss, (u,), (e,)))(basis)
    return values[0], tangents


def forward_jacobian(problem: AbstractProblem, u: Array):
    """Residuals `(m,)` and their Jacobian `(m, p)` by forward mode (batched tangents)."""
    basis = jnp.eye(u.shape[0], dtype=u.dtype)
    r, cols = jax.vmap(lambda e: jax.jvp(problem.residuals, (u,), (e,)))(basis)
    return r[0], cols.T


@eqx.filter_custom_vjp
def _residuals_forward(u, problem):
    return problem.residuals(u)


@_residuals_forward.def_fwd
def _(perturbed, u, problem):
    # The Jacobian comes from forward mode (p tangents) once; every reverse-mode
    # product the least-squares solver asks for is then a matrix product with it.
    return forward_jacobian(problem, u)


@_residuals_forward.def_bwd
def _(jac, cotangent, perturbed, u, problem):
    return cotangent @ jac


class OptaxDriver(AbstractDriver):
    optimizer: optax.GradientTransformationExtraArgs = eqx.field(static=True)
    adjoint: str = eqx.field(static=True)
    name: str = eqx.field(static=True)

    def init(self, problem, u):
        return self.optimizer.init(u)

    def step(self, problem, u, state, good_u):
        loss, grad = value_and_grad(problem, u, self.adjoint)
        finite = jnp.isfinite(loss) & jnp.all(jnp.isfinite(grad))
        updates, new_state = self.optimizer.update(
            grad, state, u, value=loss, grad=grad, value_fn=problem.loss
        )
        # A rejected step goes back halfway towards the last good iterate (a backtrack),
        # keeping the optimizer's state as it was.
        new_u = jnp.where(finite, optax.apply_updates(u, updates), 0.5 * (u + good_u))
        new_state = jax.tree.map(lambda a, b: jnp.where(finite, a, b), new_state, state)
        gnorm = jnp.sqrt(jnp.sum(grad * grad))
        zero = jnp.zeros((), jnp.int32)
        return Step(new_u, new_state, u, loss, gnorm, jnp.array(False), zero)


def _residual_fn(y, args):
    problem, adjoint = args
    if adjoint == "forward":
        return _residuals_forward(y, problem), None
    return problem.residuals(y), None


def _loss_fn(y, args):
    # Minimisers linearise the loss; a custom JVP supplies `grad · tangent` from one
    # gradient evaluation (reverse or forward mode, as the adjoint says), which also lets
    # them run through the checkpointed solve (which has no forward mode of its own).
    problem, adjoint = args

    @jax.custom_jvp
    def loss(y):
        return problem.loss(y)

    @loss.defjvp
    def _(primals, tangents):
        value, grad = value_and_grad(problem, primals[0], adjoint)
        return value, jnp.dot(grad, tangents[0])

    return loss(y), None


class OptimistixDriver(AbstractDriver):
    solver: Any  # optx.AbstractLeastSquaresSolver | optx.AbstractMinimiser
    adjoint: str = eqx.field(static=True)
    name: str = eqx.field(static=True)
    # Set by `prepare`: the solver state's non-array part, and the structure of its array
    # part. Kept fixed so that every step's state has the same pytree type (optimistix
    # holds traced jaxprs in it, compared by identity).
    static_state: Any = None
    treedef: Any = eqx.field(default=None, static=True)

    @property
    def least_squares(self) -> bool:
        return isinstance(self.solver, optx.AbstractLeastSquaresSolver)

    @property
    def has_convergence_test(self) -> bool:
        return True

    @property
    def tolerances(self):
        rtol, atol = getattr(self.solver, "rtol", None), getattr(self.solver, "atol", None)
        return None if rtol is None or atol is None else (float(rtol), float(atol))

    def _fn_options(self):
        # Always the reverse-mode interface: with a materialised Jacobian (or gradient) in
        # the solver state, the state holds no traced functions, so the compiled block is
        # reused by later fits of the same shape.
        if self.least_squares:
            return _residual_fn, {"jac": "bwd"}
        return _loss_fn, {"autodiff_mode": "bwd"}

    def _full_state(self, problem, u):
        fn, options = self._fn_options()
        args = (problem, self.adjoint)
        f_struct = jax.eval_shape(lambda: fn(u, args)[0])
        return self.solver.init(fn, u, args, options, f_struct, None, frozenset())

    def prepare(self, problem, u):
        dynamic, static = _partitioned_state(self, problem, u)
        treedef = jax.tree.structure(dynamic)
        return OptimistixDriver(self.solver, self.adjoint, self.name, static, treedef), dynamic

    def _dynamic(self, state):
        return jax.tree.unflatten(self.treedef, jax.tree.leaves(eqx.filter(state, eqx.is_array)))

    def init(self, problem, u):
        return self._dynamic(self._full_state(problem, u))

    def step(self, problem, u, state, good_u):
        fn, options = self._fn_options()
        args = (problem, self.adjoint)
        state = eqx.combine(state, self.static_state)
        new_u, new_state, _ = self.solver.step(fn, u, args, options, state, frozenset())
        terminate, result = self.solver.terminate(fn, new_u, args, options, new_state, frozenset())
        loss, gnorm = _state_loss(new_state)
        if loss is None:
            loss = problem.loss(new_u)
        converged = terminate & (result == optx.RESULTS.successful)
        index = jnp.asarray(result_index(result), jnp.int32)
        return Step(new_u, self._dynamic(new_state), new_u, loss, gnorm, converged, index)


@eqx.filter_jit
def _partitioned_state(driver, problem, u):
    # Compiled and cached: a later fit of the same shape skips tracing the solver's init
    # (which traces the Jacobian of the residuals), and gets the very same static part,
    # so the compiled block is reused too.
    return eqx.partition(driver._full_state(problem, u), eqx.is_array)


def _state_loss(state):
    """Loss (and gradient norm, NaN when costly) at the accepted iterate, read from the
    solver state where it keeps the function information (optimistix's `f_info`)."""
    info = getattr(state, "f_info", None)
    if not isinstance(info, optx.FunctionInfo):
        return None, jnp.nan
    loss = info.as_min()
    grad = getattr(info, "grad", None)
    if grad is None and isinstance(info, optx.FunctionInfo.ResidualJac):
        if isinstance(info.jac, lx.PyTreeLinearOperator | lx.MatrixLinearOperator):
            grad = info.compute_grad()
    gnorm = jnp.nan if grad is None else jnp.sqrt(jnp.sum(grad * grad))
    return loss, jnp.asarray(gnorm, loss.dtype)
