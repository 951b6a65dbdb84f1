"""The Oregonator: Field and Noyes' model of the Belousov–Zhabotinsky reaction."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class Oregonator(Model):
    r"""The Oregonator, a stiff oscillating chemical reaction (Belousov–Zhabotinsky).

    In Field and Noyes' scaled form, as in Hairer & Wanner's test set (problem OREGO):

    $$\dot y_1 = s\,(y_2 + y_1(1 - q y_1 - y_2)),\quad
    \dot y_2 = (y_3 - (1 + y_1)\,y_2)/s,\quad
    \dot y_3 = w\,(y_1 - y_3).$$

    Relaxation oscillations of period ≈ 303 in which $y_1$ swings over five orders of
    magnitude and $y_2$, $y_3$ over three, with fast jumps between slow phases: a standard
    test of stiff solvers at tight tolerances. `stiff = True` makes `simulate` default to
    `kvaerno5`. Hairer & Wanner integrate to $t = 360$.

    **Parameters** (dimensionless): `s` (77.27), `w` (0.161), `q` (8.375e-6). **State:**
    `y1` (1), `y2` (2), `y3` (3), scaled concentrations of HBrO₂, Br⁻ and Ce(IV). Time in
    model units.

    Source: R. J. Field and R. M. Noyes, "Oscillations in chemical systems. IV. Limit cycle
    behavior in a model of a real chemical reaction", *J. Chem. Phys.* 60, 1877 (1974);
    E. Hairer and G. Wanner, *Solving Ordinary Differential Equations II* (2nd ed.,
    Springer 1996), §IV.1 (problem OREGO), whose parameters and initial state these are.
    """

    s: float = param(77.27, units="1", description="time-scale ratio of the HBrO2 and Br- rates")
    w: float = param(0.161, units="1", description="relaxation rate of Ce(IV)")
    q: float = param(8.375e-6, units="1", description="ratio of the autocatalytic rate constants")
    state = State(
        y1=Var(1.0, units="1", description="scaled concentration of HBrO2"),
        y2=Var(2.0, units="1", description="scaled concentration of Br-"),
        y3=Var(3.0, units="1", description="scaled concentration of Ce(IV)"),
    )
    time_units: ClassVar[str] = "1"
    stiff: ClassVar[bool] = True

    def rhs(self, t, s):
        return dict(
            y1=self.s * (s.y2 + s.y1 * (1.0 - self.q * s.y1 - s.y2)),
            y2=(s.y3 - (1.0 + s.y1) * s.y2) / self.s,
            y3=self.w * (s.y1 - s.y3),
        )
