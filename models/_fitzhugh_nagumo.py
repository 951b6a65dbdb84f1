"""FitzHugh–Nagumo excitable medium in two dimensions, with no-flux boundaries."""

import math
from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param
from difsim._pde import Grid, laplacian


class FitzHughNagumo(Model):
    r"""FitzHugh–Nagumo reaction–diffusion model of an excitable medium (spiral waves).

    $$u_t = D \nabla^2 u + u - \frac{u^3}{3} - v,\qquad v_t = \varepsilon (u + a - b v)$$

    with no-flux (homogeneous Neumann) boundaries, $\partial u/\partial n = 0$. The fast
    variable $u$ (membrane potential) diffuses; the slow recovery variable $v$ does not.
    The medium rests at the unique equilibrium $(u_r, v_r)$ (for $0 < b < 1$), and a
    stimulus above threshold launches a wave of excitation followed by a refractory tail.
    With $\varepsilon = 0$ the recovery is frozen and $u$ obeys a bistable equation whose
    fronts travel at an exactly known speed.

    **Discretisation:** second-order finite differences on a cell-centred grid
    (`laplacian` with the grid's Neumann boundaries, which conserves $\int u$ under
    diffusion alone). `rhs_stiff` is the diffusion, `rhs_nonstiff` the kinetics. At the
    default resolution the diffusion is not stiff: the default solver is `tsit5`.

    **Parameters:** `D` (diffusivity of $u$, 1, length²/time), `a` (0.7), `b` (0.8),
    `eps` (time-scale ratio $\varepsilon$, 0.02), the latter three dimensionless;
    `grid` (128² cells on 160 × 160, Neumann). $a$ and $b$ are FitzHugh's values; his
    $\varepsilon = 0.08$ makes a weakly excitable medium in which the free end of a broken
    wave retracts, so the default is the more excitable $\varepsilon = 0.02$, where it
    curls into a spiral (rotation period ≈ 90 time units, wavelength ≈ 75 length units).
    **State:** `u`, `v` (dimensionless). By default they are derived from the grid (the
    "cross-field" initial condition that makes one spiral): the rest state, with $u = 2$
    in the lower half ($y < L_y/2$) and $v = v_r + 1.5$ (refractory) in the left half
    ($x < L_x/2$). The broken wave's free end at the centre curls into a spiral. Setting
    `state.u` or `state.v` keeps that value. Time in model units.

    Source: R. FitzHugh, "Impulses and physiological states in theoretical models of nerve
    membrane", Biophys. J. 1, 445 (1961) ($a = 0.7$, $b = 0.8$);
    J. Nagumo, S. Arimoto and S. Yoshizawa, Proc. IRE 50, 2061 (1962).
    """

    D: float = param(1.0, units="1", description="diffusivity of u")
    a: float = param(0.7, units="1", description="offset of the recovery nullcline")
    b: float = param(0.8, units="1", description="slope factor of the recovery nullcline")
    eps: float = param(0.02, units="1", description="recovery rate (time-scale ratio)")
    grid: Grid = param(
        Grid.neumann((128, 128), (160.0, 160.0)), description="2-D grid, no-flux sides"
    )
    state = State(
        u=Var(None, units="1", description="excitation (membrane potential)"),
        v=Var(None, units="1", description="recovery variable"),
    )
    time_units: ClassVar[str] = "1"  # dimensionless (model units), like space
    solver_defaults: ClassVar = {"solver": "tsit5", "rtol": 1e-5, "atol": 1e-5}

    def __check_init__(self):
        if self.grid.ndim != 2:
            raise ValueError(f"FitzHughNagumo needs a 2-D grid, got {self.grid.describe()}")

    def rest_state(self) -> tuple:
        r"""The equilibrium $(u_r, v_r)$: the real root of
        $u^3 + 3(1/b - 1) u + 3a/b = 0$ (Cardano's formula; unique for $0 < b < 1$), and
        $v_r = (u_r + a)/b$."""
        p = 3 * (1 / self.b - 1)
        q = 3 * self.a / self.b
        root = jnp.sqrt(q**2 / 4 + p**3 / 27)
        u = jnp.cbrt(-q / 2 + root) + jnp.cbrt(-q / 2 - root)
        return u, (u + self.a) / self.b

    def initial_state(self) -> State:
        """The cross-field stimulus on the rest state, for each variable not set."""
        declared = self.state
        x, y = self.grid.mesh()
        (x0, y0), (lx, ly) = self.grid.origin, self.grid.extent
        u_rest, v_rest = self.rest_state()
        cross = dict(
            u=jnp.where(y < y0 + ly / 2, 2.0, u_rest),
            v=jnp.where(x < x0 + lx / 2, v_rest + 1.5, v_rest),
        )
        return declared.with_values(
            {name: cross[name] if value is None else value for name, value in declared.items()}
        )

    def rhs_nonstiff(self, t, s):
        return dict(u=s.u - s.u**3 / 3 - s.v, v=self.eps * (s.u + self.a - self.b * s.v))

    def rhs_stiff(self, t, s):
        return dict(u=self.D * laplacian(s.u, self.grid), v=jnp.zeros_like(s.v))

    def front_speed(self, v: float | None = None):
        r"""Exact speed of a planar front with frozen recovery ($\varepsilon = 0$) and
        $v \equiv$ `v` (default $v_r$): $u$ then obeys $u_t = D u_{xx} - \tfrac13 (u - u_1)
        (u - u_2)(u - u_3)$, whose front joining the outer roots $u_1 < u_3$ moves at
        $c = \sqrt{D/6}\,(u_1 + u_3 - 2u_2) = -3 u_2 \sqrt{D/6}$, towards $u_1$ when
        $c > 0$. Needs three real roots of $u^3 - 3u + 3v = 0$ ($|v| < 2/3$)."""
        v = self.rest_state()[1] if v is None else v
        # Trigonometric form of the three real roots; u_2 is the middle one.
        theta = jnp.arccos(-1.5 * v) / 3
        u2 = 2 * jnp.cos(theta - 2 * math.pi / 3)
        return -3 * u2 * jnp.sqrt(self.D / 6)
