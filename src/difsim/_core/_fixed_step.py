"""Fixed-step solves as nested `lax.scan`s over a diffrax solver's `step`.

With a constant step and save times on the step lattice, the step counts are known at
trace time: the solver's `step` runs in a `lax.scan` per save interval (no save-time checks
or interpolation), and reverse-mode gradients checkpoint blocks of ~√n steps, so memory
grows like √n in the number of steps (not n), trading one extra forward pass
(experiments/benchmarks/bench_pde.py, "memory"). Per-step speed matches diffrax's loop.
"""

import dataclasses
import math
from typing import NamedTuple

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

_LATTICE_RTOL = 1e-9  # how close save times must be to multiples of the step
# Steps × state entries up to which reverse mode stores every step instead of checkpointing
# blocks: ≤ 128 KiB per stored stage in float64, and for a state of 1024 entries or more no
# more steps than the 16 that are always stored (an implicit step may store a Jacobian).
_STORE_ALL = 2**14


class ScanPlan(NamedTuple):
    """Static step counts of a fixed-step solve (hashable: part of the compiled function)."""

    first: int  # steps from t0 to the first save
    every: int  # steps between consecutive saves
    n_saves: int
    checkpoint: bool  # checkpoint blocks of steps for reverse-mode gradients
    dt: float  # the step


def plan_scan(ts, t0, t1, dt0, *, final_only, fixed_step, event, adjoint, progress, max_steps):
    """A [`ScanPlan`][] when the solve can run as scans (fixed step, no event, save times on
    the lattice `t0 + k·dt0`, all concrete), else `None` (diffrax's loop runs)."""
    eligible_adjoint = isinstance(
        adjoint, (dfx.RecursiveCheckpointAdjoint, dfx.DirectAdjoint, dfx.ForwardMode)
    )
    if not fixed_step or event is not None or progress or not eligible_adjoint or dt0 is None:
        return None
    try:
        t0, t1, dt = float(np.asarray(t0)), float(np.asarray(t1)), float(np.asarray(dt0))
        saves = np.asarray([t1] if final_only else ts, dtype=float)
    except Exception:  # traced under jit/vmap: step counts are unknown at trace time
        return None
    if dt <= 0 or saves[-1] != t1:
        return None
    k = (saves - t0) / dt
    steps = np.rint(k).astype(np.int64)
    if np.any(np.abs(k - steps) > _LATTICE_RTOL * np.maximum(1.0, np.abs(k))):
        return None
    gaps = np.diff(steps)
    if gaps.size and (np.any(gaps != gaps[0]) or gaps[0] <= 0):
        return None
    if steps[-1] > max_steps:
        return None  # diffrax's loop reports MAX_STEPS
    every = int(gaps[0]) if gaps.size else 0
    checkpoint = isinstance(adjoint, dfx.RecursiveCheckpointAdjoint)
    return ScanPlan(int(steps[0]), every, int(steps.size), checkpoint, dt)


def _max_abs(tree) -> jax.Array:
    """max |x| over the leaves: NaN if any is NaN, inf if any is infinite."""
    return jnp.max(jnp.stack([jnp.max(jnp.abs(x)) for x in jax.tree.leaves(tree)]))


def scan_solve(terms, solver, t0, dt, y0, args, plan: ScanPlan):
    """Run `plan`'s steps of `solver` from `(t0, y0)`.

    **Returns:** `(reached, ys, result, num_steps)`: per save whether it was reached before
    any failure (shape `(n_saves,)`), the saved states (leading axis `n_saves`), diffrax's
    `RESULTS` of the first failure (or success), and the number of steps taken.
    """
    if getattr(solver, "scan_kind", "") is None and not plan.checkpoint:
        # Runge–Kutta stages in a loop that forward mode can differentiate (diffrax's
        # default stage loop is reverse-mode only; diffrax makes the same switch).
        solver = eqx.tree_at(lambda s: s.scan_kind, solver, "bounded", is_leaf=lambda x: x is None)
    if hasattr(solver, "step_size") and solver.step_size is None:
        # Every step below has length dt (to rounding): ETDRK4 can precompute for it.
        solver = dataclasses.replace(solver, step_size=plan.dt)
    state = solver.init(terms, t0, t0 + dt, y0, args)
    ok_result = dfx.RESULTS.successful

    def one(carry, k):
        y, state, result, count = carry
        t = t0 + k * dt  # from the step index: no accumulated rounding in t
        y1, _, _, state1, res = solver.step(terms, t, t + dt, y, args, state, made_jump=False)
        # The first failure (e.g. a Newton solve that did not converge) is reported, as
        # diffrax's loop would stop there; the steps after it run on (their results are
        # blanked: every later save is marked unreached), which costs less per step than
        # freezing the state with selects. max |y| is one reduction, NaN if any is NaN.
        finite = jnp.isfinite(_max_abs(y1))
        res = dfx.RESULTS.where(finite, res, dfx.RESULTS.nonfinite)
        going = result == ok_result
        result = dfx.RESULTS.where(going, res, result)
        return (y1, state1, result, count + going.astype(count.dtype)), None

    def run(carry, start, n):
        """`n` steps from step index `start`, in √n-sized checkpointed blocks if asked."""
        if n == 0:
            return carry
        if not plan.checkpoint or n <= 16 or n * size_of_state <= _STORE_ALL:
            # Short or small: storing every step costs little memory, and one flat loop
            # runs faster than nested ones (~1 µs per block on a CPU).
            return jax.lax.scan(one, carry, start + jnp.arange(n))[0]
        size = math.isqrt(n)
        blocks, rest = divmod(n, size)

        @jax.checkpoint
        def block(carry, b):
            return jax.lax.scan(one, carry, start + b * size + jnp.arange(size))[0], None

        carry = jax.lax.scan(block, carry, jnp.arange(blocks))[0]
        return jax.lax.scan(one, carry, start + blocks * size + jnp.arange(rest))[0]

    size_of_state = sum(math.prod(jnp.shape(x)) for x in jax.tree.leaves(y0))
    count = jnp.zeros((), jnp.int32)
    carry = run((y0, state, ok_result, count), 0, plan.first)

    def save_interval(carry, i):
        carry = run(carry, plan.first + i * plan.every, plan.every)
        return carry, (carry[0], carry[2] == ok_result)

    first = (carry[0], carry[2] == ok_result)
    if plan.n_saves > 1:
        carry, (ys, reached) = jax.lax.scan(save_interval, carry, jnp.arange(plan.n_saves - 1))
        ys = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), first[0], ys)
        reached = jnp.concatenate([first[1][None], reached])
    else:
        ys = jax.tree.map(lambda a: a[None], first[0])
        reached = first[1][None]
    return reached, ys, carry[2], carry[3]
