"""A driven RC circuit with a diode: an electrical circuit as a DAE."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class DiodeCircuit(Model):
    r"""A sinusoidal source drives, through a resistor $R$, a node held by a capacitor
    $C$ and a diode to ground (a half-wave clipper). The node voltage $v$ is differential
    (Kirchhoff's current law at the node), the diode current $i$ algebraic (Shockley's
    law):

    $$C v' = \frac{V_0 \sin(2\pi f t) - v}{R} - i,\qquad
    0 = i - I_s\big(e^{v / V_T} - 1\big).$$

    The constraint determines $i$ (index 1). When the diode conducts the circuit is stiff
    (the diode's conductance $I_s e^{v/V_T}/V_T$ is large beside $1/R$); the default
    solver is Rodas5P with the singular mass matrix.

    **Parameters:** `R` (1 kΩ), `C` (1 µF), `V0` (5 V), `f` (50 Hz), `I_s` (1e-12 A),
    `V_T` (25.85 mV, the thermal voltage at 300 K). **State:** `v` = 0 V; `i` (A,
    algebraic). Time in s.

    Source: W. Shockley, "The theory of p-n junctions in semiconductors and p-n junction
    transistors", *Bell Syst. Tech. J.* 28, 435–489 (1949); the circuit as in P. Horowitz
    and W. Hill, *The Art of Electronics* (3rd ed., Cambridge 2015), §1.6 (diode clamps).
    """

    R: float = param(1e3, units="ohm", description="series resistance")
    C: float = param(1e-6, units="F", description="node capacitance")
    V0: float = param(5.0, units="V", description="source amplitude")
    f: float = param(50.0, units="Hz", description="source frequency")
    I_s: float = param(1e-12, units="A", description="diode saturation current")
    V_T: float = param(0.02585, units="V", description="thermal voltage")
    state = State(
        v=Var(0.0, units="V", description="node voltage"),
        i=Var(0.0, units="A", description="diode current", algebraic=True),
    )
    time_units: ClassVar[str] = "s"
    stiff: ClassVar[bool] = True

    def rhs(self, t, s):
        source = self.V0 * jnp.sin(2 * jnp.pi * self.f * t)
        dv = ((source - s.v) / self.R - s.i) / self.C
        return dict(v=dv, i=s.i - self.I_s * jnp.expm1(s.v / self.V_T))
