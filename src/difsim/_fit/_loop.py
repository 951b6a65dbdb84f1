"""The optimisation loop of a fit: one jit-compiled block of optimizer steps, repeated.

Steps run inside `lax.scan` in blocks of [`BLOCK`][] (one compiled program, no Python per
step); between blocks the host updates the progress display and writes the checkpoint. Each
step either advances or is rejected: a non-finite loss or gradient (a failed solve) keeps
the last good parameters, and too many rejections in a row stop the fit. The outcome of
each start is a [`Status`][] code held in the loop state.
"""

import hashlib
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jax import lax
from jaxtyping import Array, Bool, Float, Int

from difsim._core import Model
from difsim._fit._checkpoint import load_checkpoint, save_checkpoint
from difsim._fit._curriculum import Curriculum
from difsim._fit._drivers import AbstractDriver
from difsim._fit._problem import AbstractProblem
from difsim._io import Progress, code_text, progress as progress_display
from difsim._status import Status, library_message

BLOCK = 50  # steps per compiled block (fixed, so a resumed fit replays the same program)


class Carry(eqx.Module):
    """Loop state of one start (batched under multistart)."""

    u: Float[Array, " p"]  # current iterate (unconstrained)
    state: object  # the optimizer's state (arrays only)
    step: Int[Array, ""]
    good_u: Float[Array, " p"]  # last iterate with a finite loss
    best_u: Float[Array, " p"]
    best_loss: Float[Array, ""]
    fails: Int[Array, ""]  # consecutive rejected steps
    done: Bool[Array, ""]
    # The outcome so far, a Status code: while running, what running out of steps would
    # mean (FIT_MAX_STEPS, or COMPLETED for optimizers without a convergence test).
    code: Int[Array, ""]
    result: Int[Array, ""]  # optimistix's result index (0 = successful), for its message


def budget_status(driver: AbstractDriver) -> Status:
    """The outcome of a start that used all its steps."""
    return Status.FIT_MAX_STEPS if driver.has_convergence_test else Status.COMPLETED


def init_carry(driver: AbstractDriver, problem: AbstractProblem, u: Array, state=None) -> Carry:
    loss = jnp.asarray(jnp.inf, u.dtype)
    state = driver.init(problem, u) if state is None else state
    # Explicit (strong) dtypes: a carry read back from a checkpoint must have exactly the
    # types of a fresh one, or the compiled block would be compiled again.
    zero, false = jnp.zeros((), jnp.int32), jnp.zeros((), bool)
    code = zero + int(budget_status(driver))
    return Carry(u, state, zero, u, u, loss, zero, false, code, zero)


def _advance(driver: AbstractDriver, problem, c: Carry, max_failures):
    s = driver.step(problem.at_step(c.step), c.u, c.state, c.good_u)
    failed = s.result != 0
    if driver.has_convergence_test:
        # Optimistix rejects bad trial points itself; a step that did not move (rejected)
        # or landed on a non-finite loss counts as a failure.
        valid = jnp.isfinite(s.loss)
        ok = valid & (jnp.any(s.u != c.u) | s.converged | (c.step == 0))
    else:
        valid = ok = jnp.isfinite(s.loss) & jnp.isfinite(s.grad_norm)
    fails = jnp.where(ok, 0, c.fails + 1).astype(c.fails.dtype)
    better = valid & (s.loss < c.best_loss)
    if isinstance(problem, Curriculum):  # an earlier stage's loss is of fewer data
        better = better & problem.final_stage(c.step)
    diverged = fails >= max_failures
    ends = (failed, s.converged, diverged)
    outcomes = (Status.OPTIMIZER_FAILED, Status.CONVERGED, Status.DIVERGED)
    code = jnp.select(ends, [int(o) for o in outcomes], c.code).astype(c.code.dtype)
    new = Carry(
        u=s.u,
        state=s.state,
        step=c.step + 1,
        good_u=jnp.where(valid, s.point, c.good_u),
        best_u=jnp.where(better, s.point, c.best_u),
        best_loss=jnp.where(better, s.loss, c.best_loss),
        fails=fails,
        done=failed | s.converged | diverged,
        code=code,
        result=s.result.astype(c.result.dtype),
    )
    return new, jnp.stack([s.loss, s.grad_norm, ok.astype(s.loss.dtype)])


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


def run(
    driver: AbstractDriver,
    problem: AbstractProblem,
    u0: Array,
    *,
    steps: int,
    max_failures: int,
    checkpoint: str | os.PathLike | None,
    progress: bool | None,
    monitor=None,
) -> tuple[Carry, np.ndarray]:
    """Optimise from `u0` (`(p,)`, or `(starts, p)` for a multistart) for up to `steps`;
    a `Monitor` (`_monitor.py`) evaluates after every block, picks the result and may stop
    the fit early.

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
    else:
        carry = init_carry(driver, problem, u0, state0)
    history = np.zeros((0, *u0.shape[:-1], 3))
    header = dict(
        free=list(problem.names),
        optimizer=driver.name,
        shape=list(u0.shape),
        coord=problem.data.coord,
        n=int(problem.data.times.shape[0]),
        problem=problem_identity(problem),
    )
    if isinstance(problem, Curriculum):  # the stages are the fit's own
        header["curriculum"] = problem.stages().tolist()
    if monitor is not None:  # its record is saved too, so a resumed fit picks the same
        header["monitor"] = monitor.kind
    header["problem"] = header.pop("problem")  # checked last: the settings' errors say more
    if path is not None and path.exists():
        history, carry = _resume(path, header, carry, monitor)
    initial = min(history.shape[0], steps)
    task = progress_display(steps, what=f"fit ({driver.name})", one="step", many="steps",
                            show=progress, initial=initial, upper_bound=True)  # fmt: skip
    with task:
        carry, history = _blocks(driver, problem, carry, history, steps, max_failures, path,
                                 header, task, monitor)  # fmt: skip
        if isinstance(problem, Curriculum):
            carry = _unstaged(carry, problem, batched)
        if monitor is not None:
            carry = _monitored(carry, monitor, problem)
        _finish(task, carry, history)
    return carry, history


def _resume(path: Path, header: dict, carry: Carry, monitor):
    """History and carry from the checkpoint at `path` (and the monitor's record)."""
    if monitor is None:
        return load_checkpoint(path, header, carry)
    like = (carry, jnp.zeros_like(carry.u))
    history, (carry, best), state = load_checkpoint(path, header, like, with_state=True)
    if state is None:
        raise ValueError(
            f"checkpoint {str(path)!r} holds no {monitor.kind} record; delete it or use "
            "another path"
        )
    monitor.restore(state, best)
    return history, carry


def _save(path: Path, header: dict, history, carry: Carry, monitor) -> None:
    if monitor is None:
        save_checkpoint(path, header, history, carry)
        return
    record, best = monitor.state(carry.u)
    best = jnp.asarray(best, carry.u.dtype)
    save_checkpoint(path, header, history, (carry, best), state=record)


def _unstaged(carry: Carry, problem: Curriculum, batched: bool) -> Carry:
    """A curriculum that ended before its last stage (stopped early, diverged): the
    last good iterate as the result, with its loss on all the data."""
    loss = jax.vmap(problem.full().loss) if batched else problem.full().loss
    missing = ~jnp.isfinite(carry.best_loss)
    if not bool(np.any(np.asarray(missing))):
        return carry
    fill = jnp.asarray(loss(carry.good_u), carry.best_loss.dtype)
    best_u = jnp.where(missing[..., None], carry.good_u, carry.best_u)
    best_loss = jnp.where(missing, fill, carry.best_loss)
    return eqx.tree_at(lambda c: (c.best_u, c.best_loss), carry, (best_u, best_loss))


def _monitored(carry: Carry, monitor, problem: AbstractProblem) -> Carry:
    """The carry with the monitor's best iterate as the result (its full training loss as
    the best loss), and a stopped-early fit marked done."""
    if monitor.best_u is not None:
        best = jnp.asarray(monitor.best_u, carry.u.dtype)
        loss = jnp.asarray(problem.full().loss(best), carry.best_loss.dtype)
        carry = eqx.tree_at(lambda c: (c.best_u, c.best_loss), carry, (best, loss))
    if monitor.stopped:
        code = jnp.asarray(int(Status.COMPLETED), carry.code.dtype)
        carry = eqx.tree_at(lambda c: (c.done, c.code), carry, (jnp.asarray(True), code))
    return carry


def _blocks(driver, problem, carry, history, steps, max_failures, path, header, task, monitor):
    """Run blocks of steps until the budget is spent or every start has finished."""
    batched = history.ndim == 3
    block = _run_block_batched if batched else _run_block
    target = jnp.asarray(steps)
    max_failures = jnp.asarray(max_failures)  # traced: any value reuses the compiled block
    done_steps = history.shape[0]
    stopped = monitor is not None and monitor.stopped  # resumed after an early stop
    while done_steps < steps and not stopped and not bool(np.all(np.asarray(carry.done))):
        carry, records = block(driver, problem, carry, target, max_failures, BLOCK)
        records = np.asarray(records)
        if batched:
            records = np.swapaxes(records, 0, 1)
        # Held (inactive) steps record NaN in every column; the active ones are a prefix.
        ran = ~np.all(np.isnan(records.reshape(records.shape[0], -1)), axis=1)
        taken = int(np.sum(ran))
        history = np.concatenate([history, records[:taken]])
        done_steps += taken
        # Evaluated before the save: a fit killed after it resumes with this evaluation.
        stopped = monitor is not None and taken and monitor.observe(done_steps, carry.u)
        if path is not None:
            _save(path, header, history, carry, monitor)
        if taken:
            _show(task, history, batched)
        if stopped:
            break
        if taken < BLOCK:
            break  # the step budget is reached, or every start has finished
    return carry, history


def _show(task: Progress, history: np.ndarray, batched: bool) -> None:
    last = history[-1]
    if batched:
        losses = np.where(np.isfinite(last[:, 0]), last[:, 0], np.inf)
        last = last[int(np.argmin(losses))]
    task.note(f"loss {last[0]:.6g}, |grad| {last[1]:.3g}")
    task.update(history.shape[0])


def _finish(task: Progress, carry: Carry, history: np.ndarray) -> None:
    """Close the display where the fit ended: a fit that converged (or stopped) before its
    step budget ends there, so its bar closes full rather than stuck at "12/256"."""
    codes = np.atleast_1d(np.asarray(carry.code))
    if not bool(np.all(np.asarray(carry.done))):
        task.finish(task.total)  # the budget is spent
        return
    ends = sorted({Status(int(c)).name.lower().replace("_", " ") for c in codes})
    task.finish(history.shape[0], message=" / ".join(ends))


# What to try when an optimizer stopped short of a minimum (`Status.FIT_STALLED`).
STALLED_ADVICE = (
    "The best parameters found are kept. The optimizer is stuck on a rugged or badly scaled "
    "loss: try several starts (multistart=(16, 0)), multiple shooting "
    "(multiple_shooting=ds.MultipleShooting(4)), the default optimizer 'trust_region', or "
    "tighter solver tolerances (rtol, atol) if the loss is noisy"
)


def result_message(status: Status, result: int, steps: int, driver: AbstractDriver, fails: int):
    """What happened to one start that ended with `status`, in words (`result`: its last
    optimistix result index)."""
    if status == Status.CONVERGED:
        return f"converged: the {driver.name} tolerance was met after {steps} steps"
    if status == Status.FIT_STALLED:
        return (
            f"stalled: {driver.name} stopped after {steps} steps (its own test passed on its "
            "last steps), but the result is not a minimum"
        )
    if status == Status.DIVERGED:
        return (
            f"stopped after {fails} consecutive rejected steps (no trial point lowered the "
            "loss: a non-finite loss, failed solves, or a loss already flat to rounding); the "
            "best parameters found so far are kept. Try a smaller learning rate, bounds on the "
            "parameters (ds.Bounded) or a better initial guess"
        )
    if status == Status.OPTIMIZER_FAILED:
        # optimistix's own words: Status has one member for all its failures.
        message = library_message(optx.RESULTS, result)
        return (
            f"the optimizer failed after {steps} steps; the best parameters found so far are "
            f"kept. {driver.name} says: {message}"
        )
    if status == Status.FIT_MAX_STEPS:
        return f"stopped after {steps} steps without meeting the tolerance; raise steps"
    return (
        f"completed {steps} steps (optax optimizers have no convergence test: check that "
        "the loss history has flattened)"
    )


def problem_identity(problem: AbstractProblem) -> str:
    """`"sha256:<hex>"` of what decides a fit's numbers besides its settings: every array
    of `problem` (the data's times, values and weights; the model's parameters and initial
    state) with its dtype and shape, and the code of each model class in it
    (`difsim._io.code_text`). A checkpoint of the same settings over edited data or model
    code is then another fit's, refused rather than resumed from."""
    digest = hashlib.sha256()
    for leaf in jax.tree.leaves(eqx.filter(problem, eqx.is_array)):
        if jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key):  # a stochastic fit's keys
            leaf = jax.random.key_data(leaf)
        value = np.asarray(leaf)
        digest.update(f"{value.dtype.str}{value.shape}".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    models = jax.tree.leaves(problem, is_leaf=lambda x: isinstance(x, Model))
    for cls in dict.fromkeys(type(m) for m in models if isinstance(m, Model)):
        digest.update(code_text(cls).encode())
    return "sha256:" + digest.hexdigest()
