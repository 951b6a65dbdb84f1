"""Part 4 of bench_pde.py ("where the KS time goes"): the zoo's Kuramoto–Sivashinsky
written other ways, to compare with the zoo model and exponax.

- `PhysicalKS`: the zoo model without its Fourier-space hook (`rhs_nonstiff_spectrum`):
  the same non-stiff term returned in physical space, so ETDRK4 transforms every stage back
  and the term's output forward again;
- `raw_diffrax_ks`: diffrax and difsim's ETDRK4 on hand-written physical-space terms (what
  difsim's model layer adds, if anything).

Imported by bench_pde.py after it has enabled float64.
"""

from collections.abc import Callable

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np

import difsim as ds
from difsim.solvers import ETDRK4


class PhysicalKS(ds.models.KuramotoSivashinsky):
    """The zoo model with its non-stiff term in physical space (no spectral hook)."""

    rhs_nonstiff_spectrum = ds.Model.rhs_nonstiff_spectrum  # undo the hook

    def rhs_nonstiff(self, t, s):
        derivative = ds.spectral.derivative_symbol(self.grid, "x", dtype=s.u.dtype)
        multiplier = jnp.where(ds.spectral.dealias_mask(self.grid), -0.5 * derivative, 0)
        return dict(
            u=ds.spectral.irfftn(multiplier * ds.spectral.rfftn(s.u**2, self.grid), self.grid)
        )


def raw_diffrax_ks(n: int, length: float, dt: float, t1: float, steps: int) -> Callable:
    """A jitted `u0 (n,) -> u(t1)`: diffrax + difsim's ETDRK4 on hand-written terms (one FFT
    pair per evaluation), `steps` fixed steps of `dt` on the periodic `[0, length)`."""
    k = 2 * np.pi * np.fft.rfftfreq(n, length / n)
    derivative = np.where(np.arange(n // 2 + 1) <= 2 / 3 * (n // 2), -0.5j * k, 0)[None]
    symbol = (k**2 - k**4)[None]

    def nonstiff(t, y, args):
        return jnp.fft.irfft(derivative * jnp.fft.rfft(y**2, axis=-1), n, axis=-1)

    def stiff(t, y, args):
        return jnp.fft.irfft(symbol * jnp.fft.rfft(y, axis=-1), n, axis=-1)

    terms = dfx.MultiTerm(dfx.ODETerm(nonstiff), dfx.ODETerm(stiff))

    def solve(u0):
        sol = dfx.diffeqsolve(
            terms, ETDRK4(), 0.0, t1, dt, u0[None], saveat=dfx.SaveAt(t1=True),
            stepsize_controller=dfx.ConstantStepSize(), max_steps=steps + 1,
        )  # fmt: skip
        return sol.ys[0, 0]

    return jax.jit(solve)
