"""Kuramoto–Sivashinsky equation in one dimension, Fourier spectral on a periodic domain."""

import math
from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Grid, dealias_mask, derivative_symbol, irfftn, rfftn, wavenumbers


class KuramotoSivashinsky(Model):
    r"""Kuramoto–Sivashinsky equation: the standard example of spatiotemporal chaos in 1-D.

    $$u_t = -u_{xx} - u_{xxxx} - u u_x = -u_{xx} - u_{xxxx} - \tfrac12 (u^2)_x$$

    on a periodic domain $[0, L)$. Long waves ($|k| < 1$) grow, short ones are damped by
    the fourth derivative, and the nonlinear term carries energy between them; the mean
    of $u$ is conserved. Dimensionless: the domain length $L$ is the only parameter
    (chaotic for $L \gtrsim 22$).

    **Discretisation:** Fourier pseudo-spectral. `rhs_stiff` is the linear part,
    symbol $k^2 - k^4$; the non-stiff part is $-\tfrac12 (u^2)_x$ in conservative form with
    the product dealiased by the 2/3 rule, given as its spectrum
    (`rhs_nonstiff_spectrum`, so ETDRK4 costs one FFT pair per stage). The default solver
    is ETDRK4 with a fixed step `dt0 = 0.25` (as in Kassam & Trefethen).

    **Parameters:** `grid` (periodic 1-D [`Grid`][], default 256 points on
    $L = 32\pi$). **State:** `u` (dimensionless). By default `u` is derived from the grid:
    $u_0 = \cos(2\pi x/L)\,(1 + \sin(2\pi x/L))$, which on $L = 32\pi$ is Kassam &
    Trefethen's $\cos(x/16)(1 + \sin(x/16))$. Set `state.u` to use another field (the
    `None` placeholder means "from the grid"). Time in model units.

    Source: Y. Kuramoto and T. Tsuzuki, Prog. Theor. Phys. 55, 356 (1976);
    G. I. Sivashinsky, Acta Astronaut. 4, 1177 (1977). Domain, initial condition and
    time step: A.-K. Kassam and L. N. Trefethen, "Fourth-order time-stepping for stiff
    PDEs", SIAM J. Sci. Comput. 26, 1214 (2005), §6 (N = 128 there; 256 here).
    """

    grid: Grid = param(
        Grid.periodic(256, 32 * math.pi), description="periodic 1-D grid (length L = 32π)"
    )
    state = State(u=Var(None, units="1", description="KS field u"))
    time_units: ClassVar[str] = "1"  # dimensionless (model units), like space
    solver_defaults: ClassVar = {"solver": "etdrk4", "dt0": 0.25, "controller": "constant"}

    def __check_init__(self):
        if self.grid.ndim != 1 or not self.grid.is_periodic:
            raise ValueError(
                f"KuramotoSivashinsky needs a periodic 1-D grid, got {self.grid.describe()}"
            )

    def initial_state(self) -> State:
        """Kassam & Trefethen's initial field, unless `state.u` was set."""
        declared = self.state
        if declared["u"] is not None:
            return declared
        (length,) = self.grid.extent
        phase = 2 * math.pi / length * self.grid.x
        return declared.with_values({"u": jnp.cos(phase) * (1 + jnp.sin(phase))})

    def rhs_nonstiff_spectrum(self, t, s, s_hat):
        # The spectrum of -(u²/2)_x, dealiased: one forward FFT from the physical field (ETDRK4
        # then needs no transform of its own output; experiments/benchmarks/bench_pde.py).
        # `rhs_nonstiff` (for other solvers) is its inverse FFT.
        derivative = derivative_symbol(self.grid, "x", dtype=s.u.dtype)
        multiplier = jnp.where(dealias_mask(self.grid), -0.5 * derivative, 0)
        return dict(u=multiplier * rfftn(s.u**2, self.grid))

    def rhs_stiff(self, t, s):
        (k,) = wavenumbers(self.grid, dtype=s.u.dtype)
        return dict(u=irfftn((k**2 - k**4) * rfftn(s.u, self.grid), self.grid))
