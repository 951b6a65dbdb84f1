"""Gray–Scott reaction–diffusion model in two dimensions (Pearson 1993)."""

from typing import ClassVar

import jax
import jax.numpy as jnp

from difsim._core import Model, State, Var, observable, param
from difsim._pde import Grid, laplacian


class GrayScott(Model):
    r"""Gray–Scott reaction–diffusion system, whose patterns Pearson (1993) classified.

    $$u_t = D_u \nabla^2 u - u v^2 + F (1 - u),\qquad
    v_t = D_v \nabla^2 v + u v^2 - (F + k) v$$

    The reactions $U + 2V \to 3V$ and $V \to P$ in an open reactor: $U$ is fed at rate $F$
    and $V$ removed at rate $F + k$. Depending on $(F, k)$, a local perturbation of the
    trivial state $(u, v) = (1, 0)$ grows into spots, stripes, self-replicating spots or
    labyrinths. The default $(F, k) = (0.046, 0.061)$ is Pearson's type θ: from the
    central square a ring of stripes grows and breaks into a labyrinth that fills the
    domain by $t \approx 10^4$ (other types: see Munafo's map below).

    **Discretisation:** second-order finite differences on a periodic grid
    (`laplacian`). `rhs_stiff` is the diffusion, `rhs_nonstiff` the reactions. The
    default solver is Tsit5 with a fixed step `dt0 = 1` (Pearson's forward Euler used
    $\Delta t = 1$ too): at Pearson's scales the diffusion is not stiff on grids up to 256²,
    and Tsit5 beats `etdrk4` (also supported) at equal error. Resolve the patterns: the
    default grid has Pearson's spacing $\Delta x \approx 0.01$; at $\Delta x = 0.02$ the
    type-θ pattern still grows, about 25 % slower, and at $\Delta x \gtrsim 0.026$ it does
    not spread at all.

    **Parameters:** `Du` (2e-5) and `Dv` (1e-5), diffusivities in length²/time;
    `F` (feed rate, 0.046) and `k` (removal rate, 0.061), in 1/time; `noise` (relative
    amplitude of the initial noise, 0.01), `seed` (its random seed, 0) and `square` (side
    of the perturbed square, 0.2 length units); `grid` (periodic, Pearson's 256² on
    2.5 × 2.5). **State:** `u`, `v`, dimensionless concentrations. By default both are
    derived from the grid (Pearson's initial condition): $u = 1, v = 0$, except in a
    central square of side `square` (Pearson's 20 of 256 mesh points, 0.195) where
    $u = 1/2$, $v = 1/4$; then every value is multiplied by
    $1 + \eta$, $\eta$ uniform in $[-\text{noise}, \text{noise}]$, to break the square's
    symmetry. Setting `state.u` or `state.v` keeps that value. Time in model units.

    Source: J. E. Pearson, "Complex patterns in a simple system", Science 261, 189
    (1993): equations, $D_u$, $D_v$, the 2.5 × 2.5 periodic domain and the initial
    condition. Model: P. Gray and S. K. Scott, Chem. Eng. Sci. 39, 1087 (1984).
    Pearson's pattern types located in the $(F, k)$ plane: R. P. Munafo, "Reaction-diffusion
    by the Gray-Scott model: Pearson's parametrization", mrob.com/pub/comp/xmorphia.
    """

    Du: float = param(2e-5, units="1", description="diffusivity of u")
    Dv: float = param(1e-5, units="1", description="diffusivity of v")
    F: float = param(0.046, units="1", description="feed rate of u")
    k: float = param(0.061, units="1", description="removal rate of v, minus F")
    noise: float = param(0.01, units="1", description="relative amplitude of initial noise")
    seed: int = param(0, units="1", description="random seed of the initial noise")
    square: float = param(0.2, units="1", description="side of the perturbed square")
    grid: Grid = param(Grid.periodic((256, 256), (2.5, 2.5)), description="periodic 2-D grid")
    state = State(
        u=Var(None, units="1", description="concentration of U (substrate)"),
        v=Var(None, units="1", description="concentration of V (autocatalyst)"),
    )
    # At Pearson's spacing diffusion is only mildly stiff (dt·ρ ≈ 1.7 at dt = 1): Tsit5 with a
    # fixed step beats ETDRK4 at equal error by 2.6x (experiments/benchmarks/bench_pde.py).
    time_units: ClassVar[str] = "1"  # dimensionless (model units), like space
    solver_defaults: ClassVar = {"solver": "tsit5", "dt0": 1.0, "controller": "constant"}

    def __check_init__(self):
        if self.grid.ndim != 2:
            raise ValueError(f"GrayScott needs a 2-D grid, got {self.grid.describe()}")

    def initial_state(self) -> State:
        """Pearson's perturbed square with noise, for each variable not set explicitly."""
        declared = self.state
        inside = jnp.ones(self.grid.shape, dtype=bool)
        for x, origin, length in zip(self.grid.mesh(), self.grid.origin, self.grid.extent):
            inside = inside & (jnp.abs(x - (origin + length / 2)) < self.square / 2)
        key_u, key_v = jax.random.split(jax.random.key(self.seed))
        shape = self.grid.shape

        def noisy(value, key):
            return value * (1 + self.noise * jax.random.uniform(key, shape, minval=-1, maxval=1))

        pearson = dict(
            u=noisy(jnp.where(inside, 0.5, 1.0), key_u),
            v=noisy(jnp.where(inside, 0.25, 0.0), key_v),
        )
        return declared.with_values(
            {name: pearson[name] if value is None else value for name, value in declared.items()}
        )

    def rhs_nonstiff(self, t, s):
        reaction = s.u * s.v**2
        return dict(u=-reaction + self.F * (1 - s.u), v=reaction - (self.F + self.k) * s.v)

    def rhs_stiff(self, t, s):
        return dict(u=self.Du * laplacian(s.u, self.grid), v=self.Dv * laplacian(s.v, self.grid))

    # Pattern statistics for sweeps over (F, k) (experiments/gray_scott_atlas.toml).
    @observable(units="1", description="spatial standard deviation of v at the end")
    def v_contrast(self, ts, ys):
        """Zero for a uniform state (no pattern, or the trivial u = 1, v = 0 state)."""
        return jnp.std(ys["v"][-1])

    @observable(units="1", description="fraction of the domain with v > 0.1 at the end")
    def v_coverage(self, ts, ys):
        """How far the pattern has spread from the initial square (0 to 1)."""
        return jnp.mean((ys["v"][-1] > 0.1).astype(ys["v"].dtype))
