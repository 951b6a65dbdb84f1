"""Incompressible Navier–Stokes in two dimensions: vorticity form, Fourier spectral."""

import math
from typing import ClassVar

import jax
import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import (
    Grid,
    dealias_mask,
    derivative_symbol,
    inverse_laplacian,
    inverse_laplacian_symbol,
    irfftn,
    rfftn,
    spectral_gradient,
    spectral_laplacian,
    wavenumbers,
)


class NavierStokes2D(Model):
    r"""Two-dimensional incompressible Navier–Stokes equations in vorticity form, with
    optional Kolmogorov forcing and linear drag, on a doubly periodic domain.

    $$\omega_t + \mathbf u \cdot \nabla \omega = \nu \nabla^2 \omega - \mu \omega
    - A k_f \cos(k_f y),\qquad \mathbf u = (\psi_y, -\psi_x),\quad \nabla^2 \psi = -\omega$$

    $\omega = \partial_x u_y - \partial_y u_x$ is the vorticity and $\psi$ the stream
    function. The last term is the curl of the body force $A \sin(k_f y)\,\hat{\mathbf x}$
    (Kolmogorov flow); `forcing = 0` and `drag = 0` give freely decaying flow, in which
    the kinetic energy $E = \tfrac12 \int |\mathbf u|^2$ decays as
    $\mathrm dE/\mathrm dt = -\nu \int \omega^2$ ([`energy`][], [`enstrophy`][]).

    **Discretisation:** Fourier pseudo-spectral; the advection term is computed in
    physical space from the vorticity's spectrum, and with the forcing dealiased by the 2/3
    rule (so `k_f` must lie in the kept band). `rhs_stiff` is the linear part
    $\nu \nabla^2 \omega - \mu \omega$, `rhs_nonstiff_spectrum` the advection and the
    forcing (ETDRK4 uses it directly: five FFTs per stage, not ten). The
    default solver is ETDRK4 with a fixed step `dt0 = 0.005`, stable for velocities up to
    about 5 on the default grid (the explicit advection limits the step: $\Delta t \,
    |\mathbf u|_{\max} k_{\max} \lesssim 2.8$, with $k_{\max}$ the largest kept
    wavenumber); scale it with the grid spacing. At $Re = 1000$ the default 256² grid
    resolves the enstrophy cascade (the spectrum falls by five decades before the 2/3
    cut-off); on 128² it piles up at the cut-off: raise `nu` (e.g. 4e-3) there.

    **Parameters:** `nu` (kinematic viscosity, 1e-3, length²/time), `drag` ($\mu$, 0.1,
    1/time), `forcing` ($A$, 1, length/time²), `k_f` (forcing wavenumber, 4, 1/length),
    `seed` (of the random initial field, 0), `grid` (periodic, 256² on $[0, 2\pi)^2$).
    **State:** `omega` (vorticity, 1/time). By default `omega` is derived from the grid: a
    random field (seeded) with energy spectrum $\propto k^4 e^{-2 (k/4)^2}$, peaked at
    $k = 4$, scaled to unit root-mean-square velocity. Setting `state.omega` keeps that
    field. Time in model units.

    Source: Kolmogorov flow at $Re = 1/\nu = 1000$ with forcing $\sin(4y)$ and drag 0.1
    as in D. Kochkov et al., "Machine learning–accelerated computational fluid
    dynamics", PNAS 118, e2101784118 (2021). Vorticity–stream-function formulation and
    dealiasing: C. Canuto, M. Y. Hussaini, A. Quarteroni and T. A. Zang, *Spectral
    Methods in Fluid Dynamics* (Springer, 1988).
    """

    nu: float = param(1e-3, units="1", description="kinematic viscosity")
    drag: float = param(0.1, units="1", description="linear drag coefficient mu")
    forcing: float = param(1.0, units="1", description="amplitude A of the force A sin(k_f y) x̂")
    k_f: float = param(4.0, units="1", description="wavenumber of the forcing")
    seed: int = param(0, units="1", description="random seed of the initial vorticity")
    grid: Grid = param(
        Grid.periodic((256, 256), (2 * math.pi, 2 * math.pi)),
        description="periodic 2-D grid",
    )
    state = State(omega=Var(None, units="1", description="vorticity"))
    time_units: ClassVar[str] = "1"  # dimensionless (model units), like space
    solver_defaults: ClassVar = {"solver": "etdrk4", "dt0": 0.005, "controller": "constant"}

    def __check_init__(self):
        if self.grid.ndim != 2 or not self.grid.is_periodic:
            raise ValueError(
                f"NavierStokes2D needs a periodic 2-D grid, got {self.grid.describe()}"
            )
        # The forcing is dealiased with the advection: beyond the 2/3 band it would vanish.
        kept = 2 / 3 * math.pi * self.grid.shape[1] / self.grid.extent[1]
        if not isinstance(self.k_f, jax.core.Tracer) and abs(float(self.k_f)) > kept:
            raise ValueError(
                f"NavierStokes2D k_f={float(self.k_f):g} is beyond the dealiased band of the "
                f"grid (|k| <= {kept:.4g} along y): refine the grid or lower k_f"
            )

    def initial_state(self) -> State:
        """A random vorticity field peaked at wavenumber 4 (unit rms velocity), unless
        `state.omega` was set."""
        declared = self.state
        if declared["omega"] is not None:
            return declared
        noise = jax.random.normal(jax.random.key(self.seed), self.grid.shape)
        kx, ky = wavenumbers(self.grid, dtype=noise.dtype)
        k = jnp.sqrt(kx**2 + ky**2)
        # Filtering white noise by f(k) gives |û| ∝ f/k on ~k modes per shell, so
        # E(k) ∝ f²/k: f = k^2.5 e^{-(k/4)²} makes E(k) ∝ k^4 e^{-2(k/4)²}.
        spectrum = k**2.5 * jnp.exp(-((k / 4) ** 2)) * rfftn(noise, self.grid)
        omega = irfftn(spectrum, self.grid)
        ux, uy = self.velocity(omega)
        scale = jnp.sqrt(jnp.mean(ux**2 + uy**2))
        return declared.with_values({"omega": omega / scale})

    def stream_function(self, omega):
        r"""The stream function $\psi$ with $\nabla^2 \psi = -\omega$ (zero mean)."""
        return inverse_laplacian(-omega, self.grid)

    def velocity(self, omega) -> tuple:
        r"""The velocity $(u_x, u_y) = (\psi_y, -\psi_x)$ of a vorticity field."""
        psi_x, psi_y = spectral_gradient(self.stream_function(omega), self.grid)
        return psi_y, -psi_x

    def energy(self, omega):
        r"""Kinetic energy $E = \tfrac12 \int |\mathbf u|^2 \,\mathrm dA$ (per unit density)."""
        ux, uy = self.velocity(omega)
        return 0.5 * self.grid.integrate(ux**2 + uy**2)

    def enstrophy(self, omega):
        r"""Enstrophy $Z = \tfrac12 \int \omega^2 \,\mathrm dA$; without forcing and drag,
        $\mathrm dE/\mathrm dt = -2\nu Z$."""
        return 0.5 * self.grid.integrate(omega**2)

    def rhs_nonstiff_spectrum(self, t, s, s_hat):
        # From the vorticity's spectrum: four inverse FFTs (u, ω_x, ω_y) and one forward,
        # against eight when each operator transforms on its own.
        dtype = s.omega.dtype
        dx, dy = (derivative_symbol(self.grid, i, dtype=dtype) for i in (0, 1))
        omega_hat = s_hat.omega
        psi_hat = -inverse_laplacian_symbol(self.grid, dtype=dtype) * omega_hat
        ux, uy, omega_x, omega_y = (
            irfftn(factor * spectrum, self.grid)
            for factor, spectrum in (
                (dy, psi_hat),
                (-dx, psi_hat),
                (dx, omega_hat),
                (dy, omega_hat),
            )
        )
        y = self.grid.mesh(dtype)[1]
        force = -self.forcing * self.k_f * jnp.cos(self.k_f * y)
        # The 2/3 rule dealiases the advection; the force passes unless k_f is beyond it.
        total = rfftn(force - (ux * omega_x + uy * omega_y), self.grid)
        return dict(omega=jnp.where(dealias_mask(self.grid), total, 0))

    def rhs_stiff(self, t, s):
        return dict(omega=self.nu * spectral_laplacian(s.omega, self.grid) - self.drag * s.omega)
