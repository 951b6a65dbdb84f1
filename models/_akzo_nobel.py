"""The chemical Akzo Nobel problem: a process with a fast equilibrium, as a DAE."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class AkzoNobel(Model):
    r"""The chemical Akzo Nobel problem (the IVP test set's CHEMAKZO): two species FLB and
    ZHU react in a stirred reactor while CO₂ is bubbled through; the adduct ZLA of FLB and
    ZHU forms in a **fast equilibrium**, written as a constraint rather than as two
    very fast opposite rates. Five rate equations and one algebraic variable (index 1):

    $$\begin{aligned}
    y_1' &= -2 r_1 + r_2 - r_3 - r_4, &
    y_2' &= -\tfrac12 r_1 - r_4 - \tfrac12 r_5 + F_\mathrm{in}, &
    y_3' &= r_1 - r_2 + r_3,\\
    y_4' &= -r_2 + r_3 - 2 r_4, &
    y_5' &= r_2 - r_3 + r_5, &
    0 &= K_s\, y_1 y_4 - y_6,
    \end{aligned}$$

    with $r_1 = k_1 y_1^4 \sqrt{y_2}$, $r_2 = k_2 y_3 y_4$, $r_3 = (k_2/K)\, y_1 y_5$,
    $r_4 = k_3 y_1 y_4^2$, $r_5 = k_4 y_6^2 \sqrt{y_2}$ and the CO₂ inflow
    $F_\mathrm{in} = k_{lA}(p_{CO_2}/H - y_2)$. Stiff (`stiff = True`).

    **Parameters:** `k1` (18.7), `k2` (0.58), `k3` (0.09), `k4` (0.42), `K` (34.4),
    `klA` (3.3), `Ks` (115.83, the equilibrium constant), `p_co2` (0.9 bar), `H` (737,
    Henry's constant). **State** (concentrations, mol/l): `y1` FLB (0.444), `y2` CO₂
    (0.00123), `y3` FLBT (0), `y4` ZHU (0.007), `y5` LB⁺ (0), `y6` ZLA (algebraic, from
    the equilibrium: 0.36). Time in minutes; the test set's interval is [0, 180].

    Source: F. Mazzia and F. Iavernaro, *Test Set for IVP Solvers* (University of Bari),
    problem CHEMAKZO, after W. J. H. Stortelder (CWI report MAS-R9711, 1997); its
    reference values at t = 180 are in `data/stiff_test_set.toml`.
    """

    k1: float = param(18.7, units="1", description="rate constant of r1")
    k2: float = param(0.58, units="1", description="rate constant of r2")
    k3: float = param(0.09, units="1", description="rate constant of r4")
    k4: float = param(0.42, units="1", description="rate constant of r5")
    K: float = param(34.4, units="1", description="equilibrium constant of r2/r3")
    klA: float = param(3.3, units="1", description="mass transfer coefficient of CO2")
    Ks: float = param(115.83, units="1", description="equilibrium constant of ZLA")
    p_co2: float = param(0.9, units="bar", description="partial pressure of CO2")
    H: float = param(737.0, units="1", description="Henry's constant of CO2")
    state = State(
        y1=Var(0.444, units="mol/l", description="FLB"),
        y2=Var(0.00123, units="mol/l", description="dissolved CO2"),
        y3=Var(0.0, units="mol/l", description="FLBT"),
        y4=Var(0.007, units="mol/l", description="ZHU"),
        y5=Var(0.0, units="mol/l", description="LB+"),
        y6=Var(0.36, units="mol/l", description="ZLA (fast equilibrium)", algebraic=True),
    )
    time_units: ClassVar[str] = "min"
    stiff: ClassVar[bool] = True

    def rhs(self, t, s):
        root = jnp.sqrt(s.y2)
        r1 = self.k1 * s.y1**4 * root
        r2 = self.k2 * s.y3 * s.y4
        r3 = self.k2 / self.K * s.y1 * s.y5
        r4 = self.k3 * s.y1 * s.y4**2
        r5 = self.k4 * s.y6**2 * root
        inflow = self.klA * (self.p_co2 / self.H - s.y2)
        return dict(
            y1=-2 * r1 + r2 - r3 - r4,
            y2=-0.5 * r1 - r4 - 0.5 * r5 + inflow,
            y3=r1 - r2 + r3,
            y4=-r2 + r3 - 2 * r4,
            y5=r2 - r3 + r5,
            y6=self.Ks * s.y1 * s.y4 - s.y6,
        )
