"""Heat (diffusion) equation on a 1-, 2- or 3-D grid."""

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Dirichlet, Grid, Periodic, laplacian

# `None` means "derive the initial field from the grid" (see `initial_state`).
_FROM_GRID = None


def _fundamental_mode(grid: Grid, dtype: Any = None) -> Any:
    r"""The slowest-decaying non-constant eigenfunction of $\nabla^2$ with the grid's
    homogeneous boundary types, sampled on the grid (amplitude 1, shape `grid.shape`).

    Per axis, with $\xi = (x - x_0)/L \in [0, 1]$: periodic $\sin 2\pi\xi$, Dirichlet on both
    sides $\sin\pi\xi$, Neumann on both $\cos\pi\xi$, Dirichlet–Neumann $\sin(\pi\xi/2)$,
    Neumann–Dirichlet $\cos(\pi\xi/2)$; the product over the axes.
    """
    u = 1.0
    for i, x in enumerate(grid.mesh(dtype)):
        low, high = grid.bc[i]
        xi = (x - grid.origin[i]) / grid.extent[i]
        if isinstance(low, Periodic):
            factor = jnp.sin(2 * jnp.pi * xi)
        else:
            # A quarter wave when the two sides differ, a half wave when they agree.
            k = jnp.pi if type(low) is type(high) else jnp.pi / 2
            factor = jnp.sin(k * xi) if isinstance(low, Dirichlet) else jnp.cos(k * xi)
        u = u * factor
    return u


class Heat(Model):
    r"""Heat (diffusion) equation on the model's grid, in 1, 2 or 3 dimensions.

    $$\frac{\partial u}{\partial t} = D\,\nabla^2 u + s$$

    $\nabla^2$ is the finite-difference Laplacian of [`difsim.fd.laplacian`][] (central,
    `order` 2 or 4) with the boundary conditions of `grid` (time-dependent boundary values
    are evaluated at $t$). The right-hand side is split for IMEX and implicit solvers:
    `rhs_stiff` $= D\nabla^2u$, `rhs_nonstiff` $= s$.

    **Parameters:** `D` (diffusivity, m²/s; default $1.11\times10^{-4}$, copper), `source`
    ($s$, K/s: a number or a field of `grid.shape`; default 0), `grid` (default: a
    10 cm rod, 64 cells, $u = 0$ at both ends). **Option** (static): `order` (2 or 4).
    **State:** `u` (temperature excess over the boundary temperature, K).

    **Default initial condition:** the slowest-decaying eigenmode of the grid's boundary
    types, per axis with $\xi = (x - x_0)/L$: $\sin 2\pi\xi$ (periodic), $\sin\pi\xi$
    (Dirichlet), $\cos\pi\xi$ (Neumann), quarter waves for mixed sides. For the default rod,
    $\sin(\pi x/L)$ decays as $e^{-D\pi^2 t/L^2}$ (time constant $L^2/(\pi^2 D) \approx 9$ s).
    Setting `state.u` (a number or a field) replaces it.

    Source: J. Crank, *The Mathematics of Diffusion*, 2nd ed. (Oxford, 1975), ch. 4;
    diffusivity of copper (1.11e-4 m²/s at 300 K): F. P. Incropera et al., *Fundamentals of
    Heat and Mass Transfer*, 6th ed. (Wiley, 2007), Table A.1.
    """

    D: float = param(1.11e-4, units="m^2/s", description="thermal diffusivity")
    source: float = param(0.0, units="K/s", description="heat source (number or field)")
    grid: Grid = param(
        Grid.dirichlet(64, 0.1, units="m"), description="spatial grid and boundary conditions"
    )
    order: int = eqx.field(default=2, static=True)
    state = State(
        u=Var(_FROM_GRID, units="K", description="temperature excess"),
    )
    time_units: ClassVar[str] = "s"
    # Crank–Nicolson: second order and unconditionally stable, so the step follows accuracy,
    # not the grid (0.05 s resolves the default rod's 9 s decay to ~1e-5).
    solver_defaults: ClassVar[dict[str, Any]] = {
        "solver": "crank_nicolson",
        "dt0": 0.05,
        "controller": "constant",
    }

    def __check_init__(self):
        if self.order not in (2, 4):
            raise ValueError(f"Heat: order must be 2 or 4, got {self.order!r}")

    def initial_state(self) -> State:
        """The grid's fundamental mode for `u`, unless `state.u` was set."""
        u = self.state.u
        u = _fundamental_mode(self.grid) if u is None else jnp.broadcast_to(u, self.grid.shape)
        return self.state.with_values({"u": u})

    def rhs_nonstiff(self, t, s):
        return dict(u=jnp.broadcast_to(jnp.asarray(self.source, s.u.dtype), s.u.shape))

    def rhs_stiff(self, t, s):
        return dict(u=self.D * laplacian(s.u, self.grid, order=self.order, t=t))
