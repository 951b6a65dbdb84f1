"""The fixed-step loop of one block of stochastic lanes: one `lax.while_loop` in which every
lane takes the same steps, each with its own Brownian increments and its own status.

The steps are those of diffrax's `ConstantStepSize` (`num = ceil((t1 - t0) / dt0)` steps,
step `k` ending at `t0 + (t1 - t0) k / num`, the first at `t0 + dt0`, the last at `t1`),
so a lane sees the increments of the same lattice steps as a diffrax solve of its key. A
lane whose state turns NaN or infinite is `Status.NONFINITE` at that step and stops (its
later saves stay NaN); one that has not reached `t1` after `max_steps` steps is
`Status.MAX_STEPS`.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from difsim._core import Layout, Noise
from difsim._ensemble._control import all_finite, clip_floor
from difsim._ensemble._field import BatchField, BlockRHS, Lanes, per_lane
from difsim._ensemble._loop import RUNNING, Plan, block_outputs
from difsim._ensemble._noise import BlockNoise
from difsim._ensemble._sde_methods import AbstractSDEMethod
from difsim._status import Status

# The entry of a block's points that holds each lane's PRNG key data (uint32, `(lanes,
# *key_shape)`): a name no parameter can have. Keys travel with the points so that blocks,
# padding and sharding treat them alike.
KEY_DATA = "__key_data__"


class SDEPlan(eqx.Module):
    """What a stochastic block solve needs besides its data (all static): the `method`,
    the state's `layout` and the model's `noise` (which shape the Brownian path), the
    Lévy area the path draws (`levy_area`, a diffrax type), and as [`Plan`][]'s,
    `max_steps`, `final_only`, `reverse`, `checkpoints`."""

    method: AbstractSDEMethod
    layout: Layout = eqx.field(static=True)
    noise: Noise = eqx.field(static=True)
    levy_area: type = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    final_only: bool = eqx.field(static=True)
    reverse: bool = eqx.field(static=True, default=False)
    checkpoints: int | None = eqx.field(static=True, default=None)

    while_loop = Plan.while_loop


class Carry(NamedTuple):
    k: Int[Array, ""]  # the next step's index (every lane's)
    ta: Float[Array, ""]  # its start
    y: Lanes
    status: Int[Array, " lanes"]
    steps: Int[Array, " lanes"]
    cursor: Int[Array, ""]  # index of the next save time
    saved: dict[str, Array]  # {var: (lanes, time + 1, *shape)}: the last row is scratch


def solve_sde_block(field: BatchField, plan: SDEPlan, points, t0, t1, ts, dt0):
    """Integrate one block of stochastic lanes with fixed steps `dt0` from `t0` to `t1`.
    `points`: `{key: (lanes, *shape)}` with the lanes' key data under `KEY_DATA`; `ts`:
    save times `(time,)` on the steps, or `None` (final state only).

    **Returns:** `(ys, stats)` as [`solve_block`][]'s (no step is ever rejected).
    """
    points = dict(points)
    keys = jax.random.wrap_key_data(points.pop(KEY_DATA))
    f = BlockRHS(field, points)
    g = BlockNoise(field, points, keys, (t0, t1, dt0), plan.layout, plan.noise, plan.levy_area)
    lanes = keys.shape[0]
    y0 = field.initial(points, lanes)
    dtype = field.dtype
    dt0 = jnp.asarray(dt0, dtype)  # the step in the state's precision, as `simulate` takes it
    # diffrax's ConstantStepSize: the count of steps, and each step's end from its index.
    num = jnp.ceil((t1 - t0) / jnp.nextafter(dt0, jnp.inf)).astype(jnp.int32)
    floor = clip_floor(t1)

    def end_of(k):  # the end of the step with index k - 1 (k >= 1)
        t = t0 + (t1 - t0) * (k.astype(dtype) / num.astype(dtype))
        t = jnp.where(k == num, t1, t)
        t = jnp.where(k == 1, jnp.minimum(t0 + dt0, t1), jnp.where(t > floor, t1, t))
        return t

    n = 1 if ts is None else ts.shape[0]
    marks = None if ts is None else jnp.round((ts - t0) / dt0).astype(jnp.int32)
    saved = {k: jnp.full((lanes, n + 1, *v.shape[1:]), jnp.nan, dtype) for k, v in y0.items()}
    ok = all_finite(y0)
    status = jnp.where(ok, RUNNING, int(Status.NONFINITE)).astype(jnp.int32)
    zero = jnp.zeros((), jnp.int32)
    carry = Carry(zero, jnp.asarray(t0, dtype), y0, status, jnp.zeros((lanes,), jnp.int32),
                  zero, saved)  # fmt: skip
    if ts is not None:
        carry = _save(carry, marks, n, y0, ok)

    def body(c: Carry) -> Carry:
        running = c.status == RUNNING
        tb = end_of(c.k + 1)
        ta_l, tb_l = jnp.full((lanes,), c.ta, dtype), jnp.full((lanes,), tb, dtype)
        y1 = plan.method.step(f, g, ta_l, tb_l, c.y, g.increment(c.ta, tb, plan.method.levy))
        finite = all_finite(y1)
        good = running & finite
        y = jax.tree.map(lambda new, old: jnp.where(per_lane(good, new), new, old), y1, c.y)
        steps = c.steps + running
        status = jnp.where(running & ~finite, int(Status.NONFINITE), c.status)
        status = jnp.where(good & (tb >= t1), int(Status.SUCCESS), status)
        out_of_steps = (status == RUNNING) & (steps >= plan.max_steps)
        status = jnp.where(out_of_steps, int(Status.MAX_STEPS), status)
        c = Carry(c.k + 1, tb, y, status, steps, c.cursor, c.saved)
        return c if ts is None else _save(c, marks, n, y1, good)

    carry = plan.while_loop(
        lambda c: jnp.any(c.status == RUNNING), body, carry,
        max_steps=plan.max_steps, buffers=lambda c: c.saved,
    )  # fmt: skip
    ys = block_outputs(carry.status, carry.y, carry.saved, ts)
    zeros = jnp.zeros((lanes,), jnp.int32)
    stats = dict(status=carry.status, num_steps=carry.steps,
                 num_accepted_steps=carry.steps, num_rejected_steps=zeros)  # fmt: skip
    return ys, stats


def _save(c: Carry, marks, n: int, y: Lanes, good) -> Carry:
    """Write `y` of the lanes `good` if the lattice point `c.k` is the next save time's
    (save times are increasing and on the lattice: at most one per point). Lanes that
    stopped leave their row NaN."""
    hit = (c.cursor < n) & (marks[jnp.minimum(c.cursor, n - 1)] == c.k)
    row = jnp.where(hit, c.cursor, n)  # else the scratch row
    saved = {
        k: c.saved[k].at[:, row].set(jnp.where(per_lane(good, y[k]), y[k], jnp.nan))
        for k in c.saved
    }
    return c._replace(cursor=c.cursor + hit, saved=saved)
