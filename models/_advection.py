"""Linear advection of a scalar at constant velocity."""

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Grid, advection

# `None` means "derive the initial field from the grid" (see `initial_state`).
_FROM_GRID = None


class LinearAdvection(Model):
    r"""Linear advection: a profile carried unchanged at constant velocity $\mathbf c$.

    $$\frac{\partial u}{\partial t} + \nabla\cdot(\mathbf c\,u) = 0
    \quad(= \partial_t u + \mathbf c\cdot\nabla u\ \text{for constant}\ \mathbf c)$$

    Discretised in conservative (finite-volume) form by [`difsim.fd.advection`][] with upwind
    fluxes reconstructed by `scheme` (`"weno5"`, fifth order on smooth profiles, or
    `"muscl"`), so $\int u\,dV$ is conserved to rounding on a periodic grid. Inflow
    boundaries take their values from `grid`'s conditions.

    **Parameters:** `c` (velocity, m/s: a number, the same along every axis, or one value
    per axis; default 1), `grid` (default: periodic, 128 points on 1 m). **Options**
    (static): `scheme`, `limiter` (MUSCL's slope limiter, default `"van_leer"`).
    **State:** `u` (advected quantity, in units of your choice).

    **Default initial condition:** a Gaussian pulse $\exp(-|\mathbf x - \mathbf x_c|^2/w^2)$
    centred in the domain, $w$ = a tenth of the smallest extent; on the default grid it
    returns to its start every $L/c = 1$ s. Setting `state.u` replaces it.

    Source: R. J. LeVeque, *Finite Volume Methods for Hyperbolic Problems* (Cambridge, 2002),
    ch. 2 and 6; WENO5: G.-S. Jiang and C.-W. Shu, J. Comput. Phys. 126, 202 (1996).
    """

    c: float = param(1.0, units="m/s", description="advection velocity (one per axis)")
    grid: Grid = param(
        Grid.periodic(128, 1.0, units="m"), description="spatial grid and boundary conditions"
    )
    scheme: str = eqx.field(default="weno5", static=True)
    limiter: str = eqx.field(default="van_leer", static=True)
    state = State(u=Var(_FROM_GRID, units="1", description="advected quantity"))
    time_units: ClassVar[str] = "s"
    solver_defaults: ClassVar[dict[str, Any]] = {"solver": "tsit5", "controller": "pid"}

    def __check_init__(self):
        shape = jnp.shape(self.c)
        if shape not in ((), (self.grid.ndim,)):
            raise ValueError(
                f"LinearAdvection: c must be a number or one value per grid axis "
                f"({self.grid.ndim}), got shape {shape}"
            )

    def velocity(self) -> tuple[Any, ...]:
        """The velocity as one component per grid axis."""
        c = jnp.asarray(self.c)
        return tuple(c if c.ndim == 0 else c[i] for i in range(self.grid.ndim))

    def initial_state(self) -> State:
        """A Gaussian pulse centred in the domain for `u`, unless `state.u` was set."""
        u = self.state.u
        if u is None:
            g = self.grid
            width = 0.1 * min(g.extent)
            r2 = sum(
                (x - (o + 0.5 * length)) ** 2 for x, o, length in zip(g.mesh(), g.origin, g.extent)
            )
            u = jnp.exp(-r2 / width**2)
        return self.state.with_values({"u": jnp.broadcast_to(u, self.grid.shape)})

    def rhs(self, t, s):
        return dict(
            u=advection(
                s.u, self.velocity(), self.grid, scheme=self.scheme, limiter=self.limiter, t=t
            )
        )
