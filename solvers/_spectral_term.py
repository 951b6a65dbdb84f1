"""`SpectralODETerm`: an ODE term that can also give its vector field's Fourier spectrum."""

from collections.abc import Callable

import diffrax as dfx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree


class SpectralODETerm(dfx.AbstractTerm):
    r"""An ODE term $f(t, y)$ on a periodic grid that can also return $\hat f = \mathrm{rfftn}(f)$.

    Spectral solvers ([`ETDRK4`][]) work on Fourier coefficients. Given only $f$ in
    physical space, each of their stages must transform the stage to physical space and
    $f$ back to Fourier space, on top of the transforms $f$ does itself (a pseudo-spectral
    nonlinearity). `spectrum` skips both: it gets the stage in *both* spaces and returns
    $\hat f$ directly, so a term such as $-\tfrac12 \partial_x (u^2)$ costs one transform
    pair per stage instead of two. Under `jit`, whichever of the two inputs `spectrum` does
    not read is never computed (XLA removes the unused transform).

    Every other solver sees an ordinary `diffrax.ODETerm` with `vector_field`.

    **Arguments:**

    - `vector_field`: `(t, y, args) -> f`, the term in physical space; `y` and `f` real
        arrays of shape `(*vars, *grid)`.
    - `spectrum`: `(t, y, y_hat, args) -> f_hat`, where `y_hat = rfftn(y)` and
        `f_hat = rfftn(f)` over the trailing (spatial) axes, unnormalised
        (`jnp.fft.rfftn`'s convention): complex arrays of shape
        `(*vars, n_0, ..., n_{d-1} // 2 + 1)`. It must agree with `vector_field`; ETDRK4
        checks that once per solve.
    """

    vector_field: Callable[..., PyTree[Array]]
    spectrum: Callable[..., PyTree[Array]]

    def vf(self, t, y, args):
        return self.vector_field(t, y, args)

    def contr(self, t0, t1, **kwargs):
        return t1 - t0

    def prod(self, vf, control):
        return jax.tree.map(lambda v: control * v, vf)


def spectral_part(term: dfx.AbstractTerm) -> Callable | None:
    """`(t, y, y_hat, args) -> f_hat` of a (possibly wrapped) [`SpectralODETerm`][], else None."""
    direction = 1
    # diffeqsolve wraps every term in its (private) `WrapTerm`, which carries the time
    # direction: look through it, and evaluate at the time `WrapTerm.vf` would.
    while type(term).__name__ == "WrapTerm" and hasattr(term, "direction"):
        direction = direction * term.direction
        term = term.term
    if not isinstance(term, SpectralODETerm):
        return None
    return lambda t, y, y_hat, args: jnp.asarray(term.spectrum(t * direction, y, y_hat, args))
