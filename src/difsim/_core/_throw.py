"""`throw=True`: a failed solve raises [`SolveError`][difsim.SolveError], or, where the
status cannot be read (inside `jax.jit` or `jax.vmap`), guards every output with an
equinox runtime error carrying the same message."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difsim._core._solution import Solution
from difsim._status import SolveError, Status, max_steps_message


def concrete_status(status) -> Status | None:
    """`status` as a [`Status`][] when it can be read on the host (an eager call, one
    solve), else `None` (traced, or a batch)."""
    try:
        value = np.asarray(status)
    except Exception:  # traced: only compiled code can see it
        return None
    return Status(int(value)) if value.ndim == 0 else None


def raise_if_failed(sol: Solution, name: str, *, stiff: bool, sharded: bool) -> Solution:
    """`sol`, after raising if its solve failed.

    `name`: the model class's name; `stiff`: whether the solver is one for stiff problems
    (it decides the `MAX_STEPS` hint); `sharded`: fields split across devices.

    **Raises:** [`SolveError`][difsim.SolveError] when `sol.status` is concrete (an eager
    call) and not a success; under a trace, the outputs are guarded instead.
    """
    code = concrete_status(sol.status)
    if code is None:
        return _guarded(sol, name, stiff=stiff, sharded=sharded)
    if code.ok:
        return sol
    accepted, rejected = int(sol.num_accepted_steps), int(sol.num_rejected_steps)
    message = _message(name, code, stiff, rejected > accepted)
    steps = f"after {accepted + rejected:,} steps ({accepted:,} accepted, {rejected:,} rejected)"
    where = "" if sol.t_end is None else f", at t = {float(sol.t_end):.6g}"
    head, _, hint = message.partition(": ")
    raise SolveError(f"{head} {steps}{where}: {hint}", status=code, solution=sol)


def _message(name: str, status: Status, stiff: bool, mostly_rejected: bool) -> str:
    text = status.message
    if status == Status.MAX_STEPS:
        text = max_steps_message(stiff, mostly_rejected)
    return f"simulate({name}) failed [{status.name}]: {text}"


def _guarded(sol: Solution, name: str, *, stiff: bool, sharded: bool) -> Solution:
    """`sol` with `eqx.branched_error_if` on its outputs: on every one, so that no read
    of them skips the check (under an outer jit, a check attached to `ts` alone is dead
    code, silently dropped, whenever the caller reads only `ys`)."""
    status = sol.status
    failed = ~((status == Status.SUCCESS) | (status == Status.EVENT))
    messages = [_message(name, s, stiff, False) for s in Status]
    # MAX_STEPS's message depends on the rejections: one more entry, at the end.
    messages.append(_message(name, Status.MAX_STEPS, stiff, True))
    mostly_rejected = sol.num_rejected_steps > sol.num_accepted_steps
    index = jnp.where((status == Status.MAX_STEPS) & mostly_rejected, len(Status), status)
    extras = (sol.t_end, sol.y_end, sol.events, sol.dense)
    if not sharded:
        status, ts, ys, extras = checked_outputs(
            (status, sol.ts, sol.ys, extras), failed, index, messages=tuple(messages)
        )
    else:
        # The check's host callback would gather sharded fields onto one device: guard the
        # small outputs only (read `status` or `ts` to be sure it runs under jit).
        status, ts, t_end = checked_outputs(
            (status, sol.ts, sol.t_end), failed, index, messages=tuple(messages)
        )
        ys, extras = sol.ys, (t_end, *extras[1:])
    t_end, y_end, events, dense = extras
    return dataclasses.replace(
        sol, ts=ts, ys=ys, status=status, t_end=t_end, y_end=y_end, events=events, dense=dense
    )


@eqx.filter_custom_jvp
def checked_outputs(outputs, failed, index, *, messages: tuple[str, ...]):
    """`outputs`, a tuple whose first entry is the integer status, guarded by an equinox
    runtime error `messages[index]` when `failed` (traced values: under `jit`/`vmap`)."""
    return eqx.branched_error_if(outputs, failed, index, list(messages))


@checked_outputs.def_jvp
def _checked_outputs_jvp(primals, tangents, *, messages):
    # equinox passes tangents through its check untouched: under `jax.jit(jax.grad(...))`
    # the checked primal outputs are then dead code, the check is dropped, and a failed
    # solve gives a finite gradient with no error. Here the tangents depend on the checked
    # status (times 1), so the check runs wherever a derivative is used.
    outputs, failed, index = primals
    out = checked_outputs(outputs, failed, index, messages=messages)
    live = out[0] >= 0  # always true: statuses are >= 0
    return out, jax.tree.map(lambda t: t * live.astype(t.dtype), tangents[0])
