"""HIRES: Schäfer's high-irradiance-response kinetics, an 8-variable stiff test problem."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class Hires(Model):
    r"""HIRES, the "high irradiance response" of photomorphogenesis: eight chemical species
    of a light-driven reaction scheme (Schäfer 1975), a standard stiff test problem.

    $$\begin{aligned}
    \dot y_1 &= -k_1 y_1 + k_2 y_2 + k_3 y_3 + k_0, &
    \dot y_2 &= k_1 y_1 - k_6 y_2,\\
    \dot y_3 &= -k_7 y_3 + k_2 y_4 + k_5 y_5, &
    \dot y_4 &= k_3 y_2 + k_1 y_3 - k_8 y_4,\\
    \dot y_5 &= -k_9 y_5 + k_2 y_6 + k_2 y_7, &
    \dot y_6 &= -k_{10} y_6 y_8 + k_4 y_4 + k_1 y_5 - k_2 y_6 + k_4 y_7,\\
    \dot y_7 &= k_{10} y_6 y_8 - k_{11} y_7, &
    \dot y_8 &= -k_{10} y_6 y_8 + k_{11} y_7.
    \end{aligned}$$

    Hairer & Wanner integrate to $t = 321.8122$, where the test set publishes a reference
    solution to 1e-15 (used in `tests/test_stiff_work_precision.py`). `stiff = True` makes
    `simulate` default to `kvaerno5`.

    **Parameters** (rate constants, 1/time; `k10` in 1/(concentration · time)): `k0`
    (7e-4, the constant source), `k1` (1.71), `k2` (0.43), `k3` (8.32), `k4` (0.69), `k5`
    (0.035), `k6` (8.75), `k7` (10.03), `k8` (1.12), `k9` (1.745), `k10` (280), `k11`
    (1.81). **State:** `y1` … `y8` (default 1, 0, 0, 0, 0, 0, 0, 0.0057), concentrations.
    Time in model units.

    Source: E. Schäfer, "A new approach to explain the 'high irradiance responses' of
    photomorphogenesis on the basis of phytochrome", *J. Math. Biology* 2, 41–56 (1975);
    E. Hairer and G. Wanner, *Solving Ordinary Differential Equations II* (2nd ed.,
    Springer 1996), §IV.10 (problem HIRES); reference solution: F. Mazzia and
    F. Iavernaro, *Test Set for IVP Solvers* (Univ. of Bari), problem HIRES.
    """

    k0: float = param(7e-4, units="1", description="constant source of y1")
    k1: float = param(1.71, units="1", description="rate of y1 -> y2, y3 -> y4 and y5 -> y6")
    k2: float = param(0.43, units="1", description="rate of y2 -> y1, y4 -> y3, y6, y7 -> y5")
    k3: float = param(8.32, units="1", description="rate of y3 -> y1 and y2 -> y4")
    k4: float = param(0.69, units="1", description="rate of y4 -> y6 and y7 -> y6")
    k5: float = param(0.035, units="1", description="rate of y5 -> y3")
    k6: float = param(8.75, units="1", description="loss rate of y2")
    k7: float = param(10.03, units="1", description="loss rate of y3")
    k8: float = param(1.12, units="1", description="loss rate of y4")
    k9: float = param(1.745, units="1", description="loss rate of y5")
    k10: float = param(280.0, units="1", description="rate of y6 + y8 -> y7")
    k11: float = param(1.81, units="1", description="rate of y7 -> y6 + y8")
    state = State(
        y1=Var(1.0, units="1", description="concentration of species 1"),
        y2=Var(0.0, units="1", description="concentration of species 2"),
        y3=Var(0.0, units="1", description="concentration of species 3"),
        y4=Var(0.0, units="1", description="concentration of species 4"),
        y5=Var(0.0, units="1", description="concentration of species 5"),
        y6=Var(0.0, units="1", description="concentration of species 6"),
        y7=Var(0.0, units="1", description="concentration of species 7, formed from 6 and 8"),
        y8=Var(0.0057, units="1", description="concentration of species 8"),
    )
    time_units: ClassVar[str] = "1"
    stiff: ClassVar[bool] = True

    def rhs(self, t, s):
        bind = self.k10 * s.y6 * s.y8
        return dict(
            y1=-self.k1 * s.y1 + self.k2 * s.y2 + self.k3 * s.y3 + self.k0,
            y2=self.k1 * s.y1 - self.k6 * s.y2,
            y3=-self.k7 * s.y3 + self.k2 * s.y4 + self.k5 * s.y5,
            y4=self.k3 * s.y2 + self.k1 * s.y3 - self.k8 * s.y4,
            y5=-self.k9 * s.y5 + self.k2 * s.y6 + self.k2 * s.y7,
            y6=-bind + self.k4 * s.y4 + self.k1 * s.y5 - self.k2 * s.y6 + self.k4 * s.y7,
            y7=bind - self.k11 * s.y7,
            y8=-bind + self.k11 * s.y7,
        )
