"""Viscous Burgers equation."""

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Grid, conservative_divergence, laplacian

# `None` means "derive the initial field from the grid" (see `initial_state`).
_FROM_GRID = None


class Burgers(Model):
    r"""Viscous Burgers equation, the simplest model of nonlinear steepening and shocks.

    $$\frac{\partial u}{\partial t} + \nabla\cdot\Big(\frac{u^2}{2}\,\mathbf 1\Big)
    = \nu\,\nabla^2 u \qquad\Big(\text{1-D: } u_t + \big(\tfrac12 u^2\big)_x = \nu u_{xx}\Big)$$

    The flux $\tfrac12u^2$ (along every axis of the grid) is differenced in conservative form
    by [`difsim.fd.conservative_divergence`][] (`scheme` `"weno5"` or `"muscl"`, local
    Lax–Friedrichs splitting with speed $|u|$), the viscous term by the second-order
    Laplacian, both with `grid`'s boundary conditions. Split for IMEX solvers:
    `rhs_nonstiff` is the advection, `rhs_stiff` the diffusion.

    **Parameters:** `nu` (viscosity, m²/s; default $0.01/\pi$), `grid` (default: 256 cells
    on $[-1, 1]$ m, $u = 0$ at both ends). **Options** (static): `scheme`, `limiter`
    (MUSCL's slope limiter, default `"van_leer"`). **State:** `u` (velocity, m/s).

    **Default initial condition:** $u = -\sin(\pi x)$ on the default grid, generally
    $-\prod_i \sin\big(2\pi(x_i - m_i)/L_i\big)$ with $m_i$ the middle of axis $i$: the
    benchmark of Basdevant et al., whose front steepens into a shock at $x = 0$ by
    $t \approx 1/\pi$ s (maximum slope $|u_x| \approx 152$ at $t = 0.51$). Setting
    `state.u` replaces it.

    Source: J. M. Burgers, Adv. Appl. Mech. 1, 171 (1948); the default case:
    C. Basdevant et al., "Spectral and finite difference solutions of the Burgers
    equation", Comput. Fluids 14, 23 (1986); travelling-wave solution: G. B. Whitham,
    *Linear and Nonlinear Waves* (Wiley, 1974), §4.
    """

    nu: float = param(0.01 / jnp.pi, units="m^2/s", description="kinematic viscosity")
    grid: Grid = param(
        Grid.dirichlet(256, 2.0, origin=-1.0, units="m"),
        description="spatial grid and boundary conditions",
    )
    scheme: str = eqx.field(default="weno5", static=True)
    limiter: str = eqx.field(default="van_leer", static=True)
    state = State(u=Var(_FROM_GRID, units="m/s", description="velocity"))
    time_units: ClassVar[str] = "s"
    solver_defaults: ClassVar[dict[str, Any]] = {"solver": "tsit5", "controller": "pid"}

    def initial_state(self) -> State:
        """$-\\prod_i\\sin(2\\pi(x_i - m_i)/L_i)$ for `u`, unless `state.u` was set."""
        u = self.state.u
        if u is None:
            g = self.grid
            u = -1.0
            for x, o, length in zip(g.mesh(), g.origin, g.extent):
                u = u * jnp.sin(2 * jnp.pi * (x - (o + 0.5 * length)) / length)
        return self.state.with_values({"u": jnp.broadcast_to(u, self.grid.shape)})

    def rhs_nonstiff(self, t, s):
        ndim = self.grid.ndim

        def flux(u):
            return (0.5 * u * u,) * ndim

        divergence = conservative_divergence(
            s.u, flux, self.grid, speed=jnp.abs, scheme=self.scheme, limiter=self.limiter, t=t
        )
        return dict(u=-divergence)

    def rhs_stiff(self, t, s):
        return dict(u=self.nu * laplacian(s.u, self.grid, t=t))
