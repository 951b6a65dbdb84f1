"""Linear wave equation as a first-order system."""

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Grid, laplacian

# `None` means "derive the initial field from the grid" (see `initial_state`).
_FROM_GRID = None


class Wave(Model):
    r"""Linear wave equation, written as a first-order system in $u$ and $v = u_t$.

    $$\frac{\partial^2 u}{\partial t^2} = c^2\,\nabla^2 u
    \quad\Longleftrightarrow\quad
    \frac{\partial u}{\partial t} = v,\qquad \frac{\partial v}{\partial t} = c^2\,\nabla^2 u$$

    $\nabla^2$ is the finite-difference Laplacian ([`difsim.fd.laplacian`][], `order` 2 or 4)
    with `grid`'s boundary conditions on $u$ (Dirichlet: fixed ends; Neumann: free ends).
    [`energy`][] is $E = \tfrac12\int (v^2 - c^2 u\,\nabla^2_h u)\,dV$, which equals
    $\tfrac12\int(u_t^2 + c^2|\nabla u|^2)\,dV$ up to the discretisation and is exactly
    conserved by the semi-discrete system for `order=2` with periodic or homogeneous
    boundaries (the discrete Laplacian is then symmetric).

    **Parameters:** `c` (wave speed, m/s; default 1), `grid` (default: a string of 1 m,
    128 cells, fixed ends $u = 0$). **Option** (static): `order`. **State:** `u`
    (displacement, m), `v` (velocity $u_t$, m/s).

    **Default initial condition:** a plucked string at rest: $u = \exp(-|\mathbf x -
    \mathbf x_c|^2/w^2)$ centred in the domain with $w$ = a twentieth of the smallest extent,
    $v = 0$. It splits into two pulses moving at $\pm c$ that reflect inverted at fixed
    ends. Setting `state.u` or `state.v` replaces it.

    Source: W. A. Strauss, *Partial Differential Equations: An Introduction*, 2nd ed.
    (Wiley, 2008), ch. 2 (d'Alembert's solution, energy conservation) and §4.1.
    """

    c: float = param(1.0, units="m/s", description="wave speed")
    grid: Grid = param(
        Grid.dirichlet(128, 1.0, units="m"), description="spatial grid and boundary conditions"
    )
    order: int = eqx.field(default=2, static=True)
    state = State(
        u=Var(_FROM_GRID, units="m", description="displacement"),
        v=Var(_FROM_GRID, units="m/s", description="velocity (du/dt)"),
    )
    time_units: ClassVar[str] = "s"
    solver_defaults: ClassVar[dict[str, Any]] = {"solver": "tsit5", "controller": "pid"}

    def __check_init__(self):
        if self.order not in (2, 4):
            raise ValueError(f"Wave: order must be 2 or 4, got {self.order!r}")

    def initial_state(self) -> State:
        """A plucked string at rest, for each of `u`, `v` not set explicitly."""
        g = self.grid
        u, v = self.state.u, self.state.v
        if u is None:
            width = 0.05 * min(g.extent)
            r2 = sum(
                (x - (o + 0.5 * length)) ** 2 for x, o, length in zip(g.mesh(), g.origin, g.extent)
            )
            u = jnp.exp(-r2 / width**2)
        if v is None:
            v = jnp.zeros(g.shape)
        return self.state.with_values(
            {"u": jnp.broadcast_to(u, g.shape), "v": jnp.broadcast_to(v, g.shape)}
        )

    def rhs(self, t, s):
        return dict(u=s.v, v=self.c**2 * laplacian(s.u, self.grid, order=self.order, t=t))

    def energy(self, s) -> Any:
        r"""Discrete energy $\tfrac12\int(v^2 - c^2u\,\nabla_h^2u)\,dV$ of a state (a `State`
        or a mapping such as `sol.ys`, with any leading axes such as time), in J per unit
        mass density."""
        lap = laplacian(s["u"], self.grid, order=self.order)
        return 0.5 * self.grid.integrate(s["v"] ** 2 - self.c**2 * s["u"] * lap)
