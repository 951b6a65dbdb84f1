"""One-compartment pharmacokinetics with first-order absorption and repeated oral doses."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, TimeEvent, Var, observable, param


def _dose(t, s, m):
    return dict(gut=s.gut + m.dose)


class OralDosing(Model):
    r"""A drug taken by mouth every $\tau$ hours: absorbed from the gut with rate constant
    $k_a$ into one well-mixed compartment of volume $V$, eliminated with rate constant
    $k_e$:

    $$\dot A_g = -k_a A_g,\qquad \dot A_c = k_a A_g - k_e A_c,$$

    and at each dose time $t_k = k\tau$ (the scheduled event `dose`, no root finding)
    $A_g \mapsto A_g + D$. The plasma concentration is $C = A_c/V$. Each dose adds a
    Bateman function, $C(t) = \sum_{t_k \le t} \frac{D k_a}{V (k_a - k_e)}
    (e^{-k_e (t - t_k)} - e^{-k_a (t - t_k)})$ (for $k_a \ne k_e$), tending to a periodic
    steady state.

    **Parameters:** `ka` (absorption rate constant, 1/h; default 1.5), `ke` (elimination
    rate constant, 1/h; ln 2 / 8 h), `V` (volume of distribution, L; 35), `dose` (amount
    per dose, mg; 300), `tau` (dosing interval, h; 12). **State:** `gut` (amount in the
    gut, mg; 0), `central` (amount in the body, mg; 0). Time in hours; the first dose is at
    $t = 0$.

    Source: the one-compartment model with first-order absorption and its multiple-dose
    superposition, M. Gibaldi and D. Perrier, *Pharmacokinetics*, 2nd ed. (Marcel Dekker,
    1982), ch. 1 and 3. The defaults are of the order of oral theophylline in adults
    (absorption within a few hours, elimination half-life about 8 h, volume of
    distribution about 0.5 L/kg): illustrative, not a fit to data.
    """

    ka: float = param(1.5, units="1/h", description="absorption rate constant")
    ke: float = param(
        0.6931471805599453 / 8.0, units="1/h", description="elimination rate constant"
    )
    V: float = param(35.0, units="L", description="volume of distribution")
    dose: float = param(300.0, units="mg", description="amount per dose")
    tau: float = param(12.0, units="h", description="dosing interval")
    state = State(
        gut=Var(0.0, units="mg", description="amount in the gut"),
        central=Var(0.0, units="mg", description="amount in the body"),
    )
    time_units: ClassVar[str] = "h"
    events: ClassVar = (TimeEvent(every=lambda m: m.tau, start=0.0, affect=_dose, name="dose"),)

    def rhs(self, t, s):
        absorbed = self.ka * s.gut
        return dict(gut=-absorbed, central=absorbed - self.ke * s.central)

    @observable(units="mg/L", description="peak plasma concentration")
    def c_max(self, ts, ys):
        return jnp.max(ys["central"]) / self.V

    def concentration(self, t, doses: int | None = None):
        """The exact plasma concentration (mg/L) at times `t` (any shape) from the dose
        schedule, summing the Bateman functions of every dose given by then."""
        t = jnp.asarray(t)
        n = doses if doses is not None else int(jnp.floor(jnp.max(t) / self.tau)) + 1
        tk = self.tau * jnp.arange(n).reshape((n,) + (1,) * t.ndim)
        dt = t[None] - tk
        scale = self.dose * self.ka / (self.V * (self.ka - self.ke))
        one = scale * (jnp.exp(-self.ke * dt) - jnp.exp(-self.ka * dt))
        return jnp.sum(jnp.where(dt >= 0, one, 0.0), axis=0)
