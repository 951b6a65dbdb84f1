r"""Noise: how a model's `diffusion` enters its stochastic differential equation.

A model with a `diffusion(self, t, s)` method is an SDE
$$\mathrm{d}X = f(t, X)\,\mathrm{d}t + g(t, X)\,\mathrm{d}W_t$$
with drift $f$ = `rhs` and diffusion $g$. Its class attribute `noise` ([`Noise`][]) says
which Brownian motion $W$ drives it and in which calculus the stochastic integral is meant:

- diagonal noise (the default, `ds.Noise()`): one independent Brownian motion per entry of
  the state; `diffusion` returns, like `rhs`, one entry per state variable (of its shape),
  and `dX_i = f_i dt + g_i dW_i`. Variables left out have no noise.
- general noise (`ds.Noise(dim=m)`): `m` Brownian motions shared by all variables;
  `diffusion` returns for each variable its row(s), of shape `(*var_shape, m)`, and
  `dX_i = f_i dt + Σ_j g_ij dW_j`.

This module turns those declarations into diffrax objects: the diffusion as an array-valued
vector field ([`DiffusionField`][]), the term multiplying it with the Brownian increments
([`NoiseTerm`][]), and the checks that name a variable whose diffusion does not fit.
"""

import dataclasses
from collections.abc import Mapping

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difsim._core._state import State
from difsim._core._vector_field import Layout

CALCULI = ("ito", "stratonovich")


@dataclasses.dataclass(frozen=True)
class Noise:
    """A model's noise: which Brownian motions drive it, and the calculus.

    ```python
    import jax
    import jax.numpy as jnp
    import difsim as ds


    class Ornstein(ds.Model):
        theta: float = 1.0
        sigma: float = 0.5
        state = ds.State(x=0.0)
        noise = ds.Noise()  # diagonal, Itô (the defaults)

        def rhs(self, t, s):
            return dict(x=-self.theta * s.x)

        def diffusion(self, t, s):
            return dict(x=self.sigma)


    sol = ds.simulate(Ornstein(), t0=0.0, t1=1.0, save="final", key=jax.random.key(0),
                      solver="euler", dt0=0.01)
    assert jnp.isfinite(sol.ys["x"]).all()
    ```

    **Arguments:**

    - `dim`: `None` (default) for diagonal noise, one Brownian motion per state entry; or
      the number `m ≥ 1` of Brownian motions of general (matrix) noise.
    - `calculus`: `"ito"` (default) or `"stratonovich"`: how `g dW` is integrated. For
      additive noise (a diffusion independent of the state) the two agree.
    """

    dim: int | None = None
    calculus: str = "ito"

    def __post_init__(self):
        if self.dim is not None and (
            isinstance(self.dim, bool) or not isinstance(self.dim, int | np.integer) or self.dim < 1
        ):
            raise ValueError(
                f"Noise(dim=...) takes the number of Brownian motions (an integer >= 1), or "
                f"None for diagonal noise; got {self.dim!r}"
            )
        if self.calculus not in CALCULI:
            raise ValueError(
                f"Noise(calculus=...) must be 'ito' or 'stratonovich', got {self.calculus!r}"
            )

    @property
    def diagonal(self) -> bool:
        """Whether each state entry has its own Brownian motion."""
        return self.dim is None

    def describe(self) -> str:
        kind = "diagonal" if self.diagonal else f"general, {self.dim} Brownian motions"
        return f"{kind}, {'Itô' if self.calculus == 'ito' else 'Stratonovich'}"


class DiffusionField(eqx.Module):
    """`(t, y, model) -> g` for diffrax: `model.diffusion` packed like the state.

    Diagonal noise gives an array of the state's shape (a dict for an unpacked layout),
    zero for variables `diffusion` leaves out; general noise with `dim` Brownian motions
    gives `(n_vars, *shape, dim)` (a dict of `(*shape, dim)`).
    """

    layout: Layout
    dim: int | None = eqx.field(static=True)

    def __call__(self, t, y, model):
        out = model.diffusion(t, self.layout.view(y))
        if isinstance(out, State):
            out = out.values
        tail = () if self.dim is None else (self.dim,)
        dtype = self.layout.dtype
        arrays = [
            jnp.zeros(shape + tail, dtype)
            if name not in out
            else jnp.broadcast_to(jnp.asarray(out[name], dtype), shape + tail)
            for name, shape in zip(self.layout.names, self.layout.shapes)
        ]
        if self.layout.packed:
            return jnp.stack(arrays)
        return dict(zip(self.layout.names, arrays))


class NoiseTerm(dfx.AbstractTerm):
    r"""The diffusion term $g(t, y)\,\mathrm{d}W$ of an SDE, for diffrax.

    Like `diffrax.ControlTerm`, with the product chosen by the noise: elementwise for
    diagonal noise (the Brownian motion has the state's shape, so a field's diffusion never
    becomes a dense matrix), a contraction over the last axis for general noise.
    """

    diffusion: DiffusionField
    control: dfx.AbstractBrownianPath

    def vf(self, t, y, args):
        return self.diffusion(t, y, args)

    def contr(self, t0, t1, **kwargs):
        # Clipped to the path's range: under `vmap`, a lane whose solve has ended still runs
        # the loop body of the others (masked) past its `t1`, and the tree's range check
        # would fail the whole batch. A live step never leaves the range: a no-op there.
        lo, hi = self.control.t0, self.control.t1
        t1 = None if t1 is None else jnp.clip(t1, lo, hi)
        return self.control.evaluate(jnp.clip(t0, lo, hi), t1, **kwargs)

    def prod(self, vf, control):
        if self.diffusion.dim is None:
            return jax.tree.map(lambda g, dw: g * dw, vf, control)
        return jax.tree.map(lambda g: jnp.tensordot(g, control, axes=1), vf)


def brownian_shape(layout: Layout, noise: Noise):
    """The shape (a pytree of `jax.ShapeDtypeStruct`) of the Brownian motion of `noise`."""
    dtype = layout.dtype
    if not noise.diagonal:
        return jax.ShapeDtypeStruct((noise.dim,), dtype)
    if layout.packed:
        return jax.ShapeDtypeStruct((len(layout.names), *layout.shapes[0]), dtype)
    return {n: jax.ShapeDtypeStruct(s, dtype) for n, s in zip(layout.names, layout.shapes)}


def check_noise(model, layout: Layout) -> Noise:
    """The model's [`Noise`][], after checking what `diffusion` returns (traced once, no
    FLOPs): a dict (or `State`) whose keys are state variables, each entry of the
    variable's shape (diagonal noise) or `(*shape, dim)` (general noise).

    **Raises:** `TypeError`/`ValueError` naming the model and the variable.
    """
    cls = type(model).__name__
    noise = type(model).noise
    if not isinstance(noise, Noise):
        raise TypeError(
            f"{cls}.noise must be a ds.Noise (e.g. noise = ds.Noise(dim=2)), got {noise!r}; "
            "a parameter called 'noise' hides that declaration: rename the parameter"
        )
    t = jax.ShapeDtypeStruct((), layout.dtype)
    y = {n: jax.ShapeDtypeStruct(s, layout.dtype) for n, s in zip(layout.names, layout.shapes)}
    out = jax.eval_shape(lambda t, v: model.diffusion(t, State.from_info(layout.info, v)), t, y)
    if isinstance(out, State):
        out = out.values
    if not isinstance(out, Mapping):
        got = f"an array of shape {out.shape}" if hasattr(out, "shape") else type(out).__name__
        raise TypeError(
            f"{cls}.diffusion must return a dict with an entry per noisy state variable "
            f"({', '.join(layout.names)}), got {got}"
        )
    for name in out:
        if name not in layout.names:
            raise ValueError(
                f"{cls}.diffusion returned {name!r}, which is not a state variable of {cls} "
                f"(variables: {', '.join(layout.names)})"
            )
    for name, shape in zip(layout.names, layout.shapes):
        if name in out:
            _check_entry(cls, name, tuple(np.shape(out[name])), shape, noise)
    return noise


def _check_entry(cls: str, name: str, got: tuple, shape: tuple, noise: Noise) -> None:
    want = shape if noise.diagonal else (*shape, noise.dim)
    try:
        fits = np.broadcast_shapes(got, want) == want
    except ValueError:
        fits = False
    if not noise.diagonal and (not got or got[-1] != noise.dim):
        fits = False  # a missing noise axis would silently give every W_j the same weight
    if fits:
        return
    if noise.diagonal:
        expected = f"the variable's shape {shape} (diagonal noise: one Brownian motion per entry)"
    else:
        expected = (
            f"{want}: the variable's shape {shape} then one column per Brownian motion "
            f"(noise = ds.Noise(dim={noise.dim}))"
        )
    raise ValueError(
        f"{cls}.diffusion returned shape {got} for state variable {name!r}; expected {expected}"
    )


def is_additive(model, layout: Layout, noise: Noise) -> bool:
    """Whether the diffusion does not depend on the state (additive noise): traced once with
    a forward-mode tangent on the state; an output with no dependence has no tangent."""
    field = DiffusionField(layout, noise.dim)
    y = {n: jax.ShapeDtypeStruct(s, layout.dtype) for n, s in zip(layout.names, layout.shapes)}

    def tangents(t, y):
        packed = layout.pack(y)
        ones = jax.tree.map(jnp.ones_like, packed)
        return eqx.filter_jvp(lambda y: field(t, y, model), (packed,), (ones,))[1]

    out = jax.eval_shape(tangents, jax.ShapeDtypeStruct((), layout.dtype), y)
    return not jax.tree.leaves(out)
