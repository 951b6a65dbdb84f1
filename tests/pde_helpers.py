"""Small hand-written PDE models for tests of the core (independent of difsim's operators)."""

import jax.numpy as jnp

import difsim as ds


def periodic_laplacian(u, grid):
    """Second-order periodic Laplacian by `jnp.roll` (a reference independent of ds.fd)."""
    axes = range(u.ndim - grid.ndim, u.ndim)
    return sum(
        (jnp.roll(u, 1, a) - 2 * u + jnp.roll(u, -1, a)) / dx**2 for a, dx in zip(axes, grid.dx)
    )


class ReactionDiffusion(ds.Model):
    """u_t = D ∇²u - u v, v_t = D ∇²v on a periodic grid (exact for tests of the plumbing)."""

    D: float = 0.01
    grid: ds.Grid = ds.Grid.periodic((32, 16), (1.0, 1.0))
    state = ds.State(u=ds.Var(None, units="mol/m^3"), v=ds.Var(None, units="mol/m^3"))

    def initial_state(self):
        x, y = self.grid.mesh()
        u = jnp.sin(2 * jnp.pi * x) * jnp.cos(2 * jnp.pi * y)
        v = 1.0 + 0.5 * jnp.cos(2 * jnp.pi * x)
        values = {k: v0 if v0 is not None else new for (k, v0), new in
                  zip(self.state.items(), (u, v))}  # fmt: skip
        return self.state.with_values(values)

    def rhs(self, t, s):
        return dict(
            u=self.D * periodic_laplacian(s.u, self.grid) - s.u * s.v,
            v=self.D * periodic_laplacian(s.v, self.grid),
        )


class Heat1D(ds.Model):
    """u_t = D u_xx, periodic: the Fourier mode sin(2πx) decays like exp(-D λ t)."""

    D: float = 1.0
    grid: ds.Grid = ds.Grid.periodic((32,), 1.0)
    state = ds.State(u=ds.Var(None, units="K"))

    solver_defaults = {"solver": "heun", "dt0": 1e-4, "controller": "constant", "rtol": 1e-9}

    def initial_state(self):
        u0 = self.state.u
        return self.state.with_values(
            {"u": jnp.sin(2 * jnp.pi * self.grid.x) if u0 is None else u0}
        )

    def rhs(self, t, s):
        return dict(u=self.D * periodic_laplacian(s.u, self.grid))
