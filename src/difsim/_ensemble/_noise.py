"""The noise of a block of stochastic trajectories: each lane's diffusion, its product with
a Brownian increment, and the increments themselves.

The increments come from difsim's own step-lattice Brownian path
([`difsim._core.StepBrownianPath`][], `brownian="steps"`), evaluated lane by lane with
each lane's key over the very steps the diffrax engine takes: a lane's path is the path
`simulate(..., key=key, brownian="steps")` integrates against, draw for draw.
"""

from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from difsim._core import Layout, Noise, StepBrownianPath, brownian_shape
from difsim._ensemble._field import BatchField, Lanes, per_lane


class Increment(NamedTuple):
    """A step's Brownian increment `w` and, for methods that ask for it, its space-time
    Lévy area `hh` (else `None`). Diagonal noise: `{var: (lanes, *var_shape)}`; general
    noise with `m` Brownian motions: `(lanes, m)`, shared by every variable."""

    w: Any
    hh: Any = None


class BlockNoise(eqx.Module):
    """`g(t, y)`, the diffusion of one block with its lanes' points bound, the product
    `g · dW` and each lane's Brownian increments.

    `t` is `(lanes,)`; `y` and `g(t, y)` are [`Lanes`][] (general noise: each variable
    `(lanes, *var_shape, m)`). `keys`: each lane's PRNG key, `(lanes,)`; `span`: the
    solve's `(t0, t1, dt0)`, which place the step lattice of the path.
    """

    field: BatchField
    points: dict[str, Any]
    keys: Any
    span: tuple[Any, Any, Any]
    layout: Layout = eqx.field(static=True)
    noise: Noise = eqx.field(static=True)
    levy_area: type = eqx.field(static=True)

    def __call__(self, t, y: Lanes) -> Lanes:
        return jax.vmap(self.field.diffusion_one, in_axes=(0, 0, 0, None))(
            t, y, self.points, self.noise.dim
        )

    def prod(self, g: Lanes, w) -> Lanes:
        """`g · w`: elementwise for diagonal noise, summed over the Brownian motions for
        general noise (as the diffrax engine's `NoiseTerm.prod`)."""
        if self.noise.diagonal:
            return {k: g[k] * w[k] for k in g}
        return {k: jnp.einsum("l...m,lm->l...", g[k], w) for k in g}

    def increment(self, ta, tb, levy: bool) -> Increment:
        """Every lane's increment over the step `[ta, tb]` (scalars: the lanes step
        together), with its space-time Lévy area when `levy`."""
        t0, t1, dt = self.span
        shape = brownian_shape(self.layout, self.noise)

        def one(key):
            path = StepBrownianPath(t0, t1, dt, key, shape, self.levy_area)
            return path.evaluate(ta, tb, use_levy=levy)

        out = jax.vmap(one)(self.keys)
        if not levy:
            return Increment(self._per_var(out))
        return Increment(self._per_var(out.W), self._per_var(out.H))

    def _per_var(self, x) -> Any:
        """An increment shaped like the path (a stacked array for a packed layout) as
        the block's layout: one entry per variable (diagonal) or `(lanes, m)`."""
        if not self.noise.diagonal:
            return x
        if self.layout.packed:
            return {name: x[:, i] for i, name in enumerate(self.layout.names)}
        return dict(x)


def scaled(h: Float[Array, " lanes"], tree: Lanes) -> Lanes:
    """`h · tree` with `h` per lane."""
    return {k: per_lane(h, v) * v for k, v in tree.items()}


def added(*trees: Lanes) -> Lanes:
    """The sum of trees of one layout, left to right."""
    first, *rest = trees
    return {k: sum((t[k] for t in rest), first[k]) for k in first}
