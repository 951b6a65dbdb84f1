"""Per-lane adaptive step-size control with the semantics of diffrax's `PIDController`.

Same error norm (the RMS over every state entry of `err / (atol + rtol·max(|y0|, |y1|))`),
same acceptance test (`norm < 1`), same step factor (`safety · norm^(-1/order)`, clipped
to `[1, factormax]` after an accepted step and `[factormin, safety]` after a rejected one),
same first-step heuristic (Hairer, Nørsett & Wanner, *Solving ODEs I*, II.4) and the same
rounding of a step that ends within 100 ulps of `t1`. Only the integral coefficient is
used (diffrax's default `pcoeff = dcoeff = 0`). Each lane has its own `t`, `dt` and
decision, so the error of every trajectory matches a diffrax solve of it alone.
"""

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax
from jaxtyping import Array, Bool, Float

from difsim._ensemble._field import Lanes


def lane_rms(tree: Lanes) -> Float[Array, " lanes"]:
    """Root mean square over every entry of every variable, per lane."""
    leaves = jax.tree.leaves(tree)
    total = sum(jnp.sum(x * x, axis=tuple(range(1, x.ndim))) for x in leaves)
    count = sum(x[0].size for x in leaves)
    return jnp.sqrt(total / count)


def scaled_error(y0: Lanes, y1: Lanes, y_err: Lanes, rtol, atol) -> Float[Array, " lanes"]:
    """diffrax's error norm of one step, per lane."""
    scaled = jax.tree.map(
        lambda a, b, e: e / (atol + rtol * jnp.maximum(jnp.abs(a), jnp.abs(b))), y0, y1, y_err
    )
    return lane_rms(scaled)


def all_finite(tree: Lanes) -> Bool[Array, " lanes"]:
    """Whether every entry of a lane is finite."""
    return jnp.stack(
        [jnp.all(jnp.isfinite(x), axis=tuple(range(1, x.ndim))) for x in jax.tree.leaves(tree)]
    ).all(axis=0)


# diffrax 0.7's `diffeqsolve` starts an adaptive ODE solve with `dt0=None` at a step of
# 0.01 (its first-step heuristic only runs on a bare `ODETerm`, and the terms it integrates
# are wrapped): the engine does the same, so both take the same steps.
DIFFRAX_FIRST_STEP = 0.01


@dataclasses.dataclass(frozen=True)
class Controller:
    """The integral controller's constants: `rtol`, `atol`, the error order of the method
    (its step exponent is `1/order`), `safety`, `factormin`, `factormax`. Hashable: part
    of what the compiled solve specialises on."""

    rtol: float
    atol: float
    error_order: float
    safety: float = 0.9
    factormin: float = 0.2
    factormax: float = 10.0

    def decide(self, err: Float[Array, " lanes"], finite: Bool[Array, " lanes"]):
        """`(accept, factor)` per lane from the scaled error norm. A non-finite candidate
        (the step went somewhere the model is not defined) is rejected with the smallest
        factor — never a NaN step."""
        accept = finite & (err < 1)
        inv = 1 / jnp.where(finite & (err > 0), err, 1.0)
        raw = self.safety * inv ** (1 / self.error_order)
        raw = jnp.where(finite & (err > 0), raw, jnp.where(finite, self.factormax, 0.0))
        lo = jnp.where(accept, 1.0, self.factormin)
        hi = jnp.where(accept, self.factormax, self.safety)
        return accept, lax.stop_gradient(jnp.clip(raw, lo, hi))


def clip_floor(t1):
    """`t1` less 100 ulps: a next step ending beyond it is rounded to end at `t1`."""
    return lax.fori_loop(0, 100, lambda _, t: jnp.nextafter(t, -jnp.inf), t1)


def next_interval(tprev, tnext, accept, factor, t1, floor):
    """The next step `(tprev, tnext)` per lane, as diffrax's step loop computes it."""
    start = jnp.where(accept, tnext, tprev)
    end = start + (tnext - tprev) * factor
    clipped = jnp.where(accept, t1, start + 0.5 * (t1 - start))
    return start, jnp.where(end > floor, clipped, end)
