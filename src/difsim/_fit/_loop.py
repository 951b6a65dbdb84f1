"""The optimisation loop of a fit: optax and optimistix behind one jit-compiled step.

Steps run inside `lax.scan` in blocks of [`BLOCK`][] (one compiled program, no Python per
step); between blocks the host updates the progress bar and writes the checkpoint. Each
step either advances or is rejected: a non-finite loss or gradient (a failed solve) keeps
the last good parameters, and too many rejections in a row stop the fit.
"""

import abc
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optax
import optimistix as optx
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from difsim._fit._shooting import AbstractProblem
from difsim._io import atomic_write_stream

BLOCK = 50  # steps per compiled block (fixed, so a resumed fit replays the same program)

OPTAX_OPTIMIZERS = {
    "adam": optax.adam,
    "adamw": optax.adamw,
    "adabelief": optax.adabelief,
    "rmsprop": optax.rmsprop,
    "sgd": optax.sgd,
    "lbfgs": None,  # optax.lbfgs: line search, no learning rate
}
OPTIMISTIX_SOLVERS = {
    "levenberg_marquardt": optx.LevenbergMarquardt,
    "gauss_newton": optx.GaussNewton,
    "dogleg": optx.Dogleg,
    "bfgs": optx.BFGS,
    "nonlinear_cg": optx.NonlinearCG,
}
OPTIMIZERS = (*OPTIMISTIX_SOLVERS, *OPTAX_OPTIMIZERS)
ADJOINTS = ("checkpoint", "forward")

# Run states of one start (`Carry.code`).
RUNNING, CONVERGED, DIVERGED, FAILED = 0, 1, 2, 3


@functools.lru_cache(maxsize=64)
def named_optax(name: str, learning_rate: float) -> optax.GradientTransformationExtraArgs:
    # Cached: the same name and rate give the same (hashable) object, so the compiled
    # block is reused across fits instead of being recompiled for every new closure.
    if name == "lbfgs":
        opt = optax.lbfgs()
    else:
        opt = OPTAX_OPTIMIZERS[name](learning_rate)
    return optax.with_extra_args_support(opt)


@functools.lru_cache(maxsize=64)
def _with_extra_args(optimizer: optax.GradientTransformation):
    # Cached so that passing the same optax object again reuses the compiled block.
    return optax.with_extra_args_support(optimizer)


def make_driver(optimizer: Any, *, learning_rate: float, tol: float, adjoint: str):
    """An [`AbstractDriver`][] for an optimizer name, an optax transformation or an
    optimistix solver."""
    if isinstance(optimizer, str):
        key = optimizer.lower()
        if key in OPTAX_OPTIMIZERS:
            return OptaxDriver(named_optax(key, float(learning_rate)), adjoint, key)
        if key in OPTIMISTIX_SOLVERS:
            return OptimistixDriver(OPTIMISTIX_SOLVERS[key](rtol=tol, atol=tol), adjoint, key)
        raise ValueError(
            f"unknown optimizer {optimizer!r}; choose one of {', '.join(OPTIMIZERS)}, or pass "
            "an optax GradientTransformation or an optimistix solver"
        )
    if isinstance(optimizer, optx.AbstractLeastSquaresSolver | optx.AbstractMinimiser):
        return OptimistixDriver(optimizer, adjoint, type(optimizer).__name__)
    if isinstance(optimizer, optax.GradientTransformation):
        return OptaxDriver(_with_extra_args(optimizer), adjoint, "optax")
    raise TypeError(
        f"optimizer must be a name ({', '.join(OPTIMIZERS)}), an optax GradientTransformation "
        f"or an optimistix least-squares solver or minimiser, got {type(optimizer).__name__}"
    )


class Carry(eqx.Module):
    """Loop state of one start (batched under multistart)."""

    u: Float[Array, " p"]  # current iterate (unconstrained)
    state: Any  # the optimizer's state (arrays only)
    step: Int[Array, ""]
    good_u: Float[Array, " p"]  # last iterate with a finite loss
    best_u: Float[Array, " p"]
    best_loss: Float[Array, ""]
    fails: Int[Array, ""]  # consecutive rejected steps
    done: Bool[Array, ""]
    code: Int[Array, ""]  # RUNNING, CONVERGED, DIVERGED or FAILED
    result: Int[Array, ""]  # optimistix result index (0 = successful)


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
    def step(self, problem: AbstractProblem, c: Carry):
        """`(new_u, new_state, point, loss, grad_norm, converged, failed)`: `loss` is the
        objective at `point` (the iterate the step judged)."""

    @property
    def has_convergence_test(self) -> bool:
        return False


def value_and_grad(problem: AbstractProblem, u: Array, adjoint: str):
    """Loss and its gradient w.r.t. `u`: reverse mode through the checkpointed solve, or
    forward mode (one batched tangent solve per free variable)."""
    if adjoint == "checkpoint":
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

    def step(self, problem, c):
        loss, grad = value_and_grad(problem, c.u, self.adjoint)
        finite = jnp.isfinite(loss) & jnp.all(jnp.isfinite(grad))
        updates, new_state = self.optimizer.update(
            grad, c.state, c.u, value=loss, grad=grad, value_fn=problem.loss
        )
        # A rejected step goes back halfway towards the last good iterate (a backtrack),
        # keeping the optimizer's state as it was.
        new_u = jnp.where(finite, optax.apply_updates(c.u, updates), 0.5 * (c.u + c.good_u))
        new_state = jax.tree.map(lambda a, b: jnp.where(finite, a, b), new_state, c.state)
        gnorm = jnp.sqrt(jnp.sum(grad * grad))
        return new_u, new_state, c.u, loss, gnorm, jnp.array(False), jnp.array(False)


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

    def step(self, problem, c):
        fn, options = self._fn_options()
        args = (problem, self.adjoint)
        state = eqx.combine(c.state, self.static_state)
        new_u, new_state, _ = self.solver.step(fn, c.u, args, options, state, frozenset())
        terminate, result = self.solver.terminate(fn, new_u, args, options, new_state, frozenset())
        loss, gnorm = _state_loss(new_state)
        if loss is None:
            loss = problem.loss(new_u)
        failed = result != optx.RESULTS.successful
        return new_u, self._dynamic(new_state), new_u, loss, gnorm, terminate & ~failed, failed


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


def init_carry(driver: AbstractDriver, problem: AbstractProblem, u: Array, state=None) -> Carry:
    loss = jnp.asarray(jnp.inf, u.dtype)
    state = driver.init(problem, u) if state is None else state
    # Explicit (strong) dtypes: a carry read back from a checkpoint must have exactly the
    # types of a fresh one, or the compiled block would be compiled again.
    zero, false = jnp.zeros((), jnp.int32), jnp.zeros((), bool)
    return Carry(u, state, zero, u, u, loss, zero, false, zero + RUNNING, zero)


def _advance(driver, problem, c: Carry, max_failures):
    new_u, new_state, point, loss, gnorm, converged, failed = driver.step(problem, c)
    if driver.has_convergence_test:
        # Optimistix rejects bad trial points itself; a step that did not move (rejected)
        # or landed on a non-finite loss counts as a failure.
        valid = jnp.isfinite(loss)
        ok = valid & (jnp.any(new_u != c.u) | converged | (c.step == 0))
    else:
        valid = ok = jnp.isfinite(loss) & jnp.isfinite(gnorm)
    fails = jnp.where(ok, 0, c.fails + 1).astype(c.fails.dtype)
    better = valid & (loss < c.best_loss)
    diverged = fails >= max_failures
    code = jnp.select([failed, converged, diverged], [FAILED, CONVERGED, DIVERGED], RUNNING)
    code = code.astype(c.code.dtype)
    result = new_state.result._value if hasattr(new_state, "result") else jnp.array(0)
    new = Carry(
        u=new_u,
        state=new_state,
        step=c.step + 1,
        good_u=jnp.where(valid, point, c.good_u),
        best_u=jnp.where(better, point, c.best_u),
        best_loss=jnp.where(better, loss, c.best_loss),
        fails=fails,
        done=code != RUNNING,
        code=code,
        result=jnp.asarray(result, c.result.dtype),
    )
    return new, jnp.stack([loss, gnorm, ok.astype(loss.dtype)])


def _block(driver, problem, carry, target, max_failures, length: int):
    def body(c, _):
        def advance(c):
            return _advance(driver, problem, c, max_failures)

        def hold(c):
            return c, jnp.full(3, jnp.nan, c.u.dtype)

        return lax.cond(~c.done & (c.step < target), advance, hold, c)

    return lax.scan(body, carry, None, length=length)


_run_block = eqx.filter_jit(_block)
_run_block_batched = eqx.filter_jit(
    eqx.filter_vmap(_block, in_axes=(None, None, eqx.if_array(0), None, None, None))
)


# ---------------------------------------------------------------- checkpoints
_MAGIC = b"DIFSIM-FIT-CHECKPOINT 1\n"


def save_checkpoint(path: Path, header: dict, history: np.ndarray, carry: Carry) -> None:
    """Write header, history and loop state to `path` atomically (temp file + rename)."""

    def write(f) -> None:
        f.write(_MAGIC)
        f.write(json.dumps(header).encode() + b"\n")
        np.lib.format.write_array(f, np.ascontiguousarray(history), allow_pickle=False)
        eqx.tree_serialise_leaves(f, carry)

    atomic_write_stream(path, write)


def load_checkpoint(path: Path, header: dict, like: Carry) -> tuple[np.ndarray, Carry]:
    """History and loop state from `path`; raises if it belongs to a different fit."""
    with open(path, "rb") as f:
        if f.readline() != _MAGIC:
            raise ValueError(f"checkpoint {str(path)!r} is not a difsim fit checkpoint")
        saved = json.loads(f.readline())
        for key, value in header.items():
            if saved.get(key) != value:
                raise ValueError(
                    f"checkpoint {str(path)!r} belongs to a different fit ({key}: "
                    f"{saved.get(key)!r} there, {value!r} now); delete it or use another path"
                )
        history = np.lib.format.read_array(f, allow_pickle=False)
        carry = eqx.tree_deserialise_leaves(f, like)
    return history, carry


# ---------------------------------------------------------------- the loop
def run(
    driver: AbstractDriver,
    problem: AbstractProblem,
    u0: Array,
    *,
    steps: int,
    max_failures: int,
    checkpoint: str | os.PathLike | None,
    progress: bool | None,
) -> tuple[Carry, np.ndarray]:
    """Optimise from `u0` (`(p,)`, or `(starts, p)` for a multistart) for up to `steps`.

    **Returns:** the final carry and the history, `(steps_done, 3)` or
    `(steps_done, starts, 3)`, holding loss, gradient norm and an accepted flag per step.
    """
    batched = u0.ndim == 2
    path = None if checkpoint is None else Path(checkpoint)
    if steps == 0 and (path is None or not path.exists()):
        # Nothing to optimise (e.g. only the loss or the covariance at the guess is wanted).
        init = jax.vmap(init_carry, in_axes=(None, None, 0, None)) if batched else init_carry
        return init(driver, problem, u0, ()), np.zeros((0, *u0.shape[:-1], 3))
    driver, state0 = driver.prepare(problem, u0[0] if batched else u0)
    if batched:
        carry = jax.vmap(lambda u: init_carry(driver, problem, u))(u0)
        block = _run_block_batched
    else:
        carry = init_carry(driver, problem, u0, state0)
        block = _run_block
    history = np.zeros((0, *u0.shape[:-1], 3))
    header = dict(
        free=list(problem.names),
        optimizer=driver.name,
        shape=list(u0.shape),
        coord=problem.data.coord,
        n=int(problem.data.times.shape[0]),
    )
    if path is not None and path.exists():
        history, carry = load_checkpoint(path, header, carry)
    done_steps = history.shape[0]
    if progress is None:
        progress = sys.stderr.isatty()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=min(done_steps, steps), desc=f"fit ({driver.name})")
    target = jnp.asarray(steps)
    max_failures = jnp.asarray(max_failures)  # traced: any value reuses the compiled block
    try:
        while done_steps < steps and not bool(np.all(np.asarray(carry.done))):
            carry, records = block(driver, problem, carry, target, max_failures, BLOCK)
            records = np.asarray(records)
            if batched:
                records = np.swapaxes(records, 0, 1)
            # Held (inactive) steps record NaN in every column; the active ones are a prefix.
            ran = ~np.all(np.isnan(records.reshape(records.shape[0], -1)), axis=1)
            taken = int(np.sum(ran))
            history = np.concatenate([history, records[:taken]])
            done_steps += taken
            if path is not None:
                save_checkpoint(path, header, history, carry)
            if bar is not None and taken:
                _show(bar, taken, history, batched)
            if taken < BLOCK:
                break  # the step budget is reached, or every start has finished
    finally:
        if bar is not None:
            bar.close()
    return carry, history


def _show(bar, taken: int, history: np.ndarray, batched: bool) -> None:
    last = history[-1]
    if batched:
        losses = np.where(np.isfinite(last[:, 0]), last[:, 0], np.inf)
        last = last[int(np.argmin(losses))]
    bar.update(taken)
    bar.set_postfix(loss=f"{last[0]:.6g}", grad=f"{last[1]:.3g}")


def result_message(code: int, result: int, steps: int, driver: AbstractDriver, fails: int) -> str:
    """Human-readable outcome of one start."""
    if code == CONVERGED:
        return f"converged: the {driver.name} tolerance was met after {steps} steps"
    if code == DIVERGED:
        return (
            f"stopped after {fails} consecutive rejected steps (non-finite loss or failed "
            "solves); the best parameters found so far are kept. Try a smaller learning rate, "
            "bounds on the parameters (ds.Bounded) or a better initial guess"
        )
    if code == FAILED:
        message = optx.RESULTS._index_to_message.get(int(result), f"code {result}")
        return f"the optimizer failed: {message}"
    if driver.has_convergence_test:
        return f"stopped after {steps} steps without meeting the tolerance; raise steps"
    return (
        f"completed {steps} steps (optax optimizers have no convergence test: check that "
        "the loss history has flattened)"
    )
