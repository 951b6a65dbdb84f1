"""Lotka–Volterra predator–prey model with the lynx–hare fit as defaults."""

from typing import ClassVar

from difsim._core import Model, State, Var, param


class LotkaVolterra(Model):
    r"""Lotka–Volterra predator–prey dynamics.

    $$\dot u = (\alpha - \beta v)\,u,\qquad \dot v = (-\gamma + \delta u)\,v$$

    with prey $u$ (`prey`) and predators $v$ (`predator`). Solutions are closed orbits
    around $(u, v) = (\gamma/\delta, \alpha/\beta)$.

    **Parameters:** `alpha` (prey growth rate, 1/year; default 0.55), `beta` (predation
    rate, 1/(year · thousand pelts); 0.028), `gamma` (predator death rate, 1/year; 0.80),
    `delta` (predator growth per prey, 1/(year · thousand pelts); 0.024). **State:** `prey`
    (snowshoe hare, thousands of pelts; default 30), `predator` (Canadian lynx, thousands of
    pelts; default 4), in units of `kcount` (a thousand counts, valid for UDUNITS and pint).
    Time in years, $t = 0$ being 1900.

    Source: the posterior means of B. Carpenter, "Predator-Prey Population Dynamics: the
    Lotka-Volterra model in Stan" (Stan case study, 2018), fitted to the Hudson's Bay
    Company pelt counts 1900–1920 (`data/lynx_hare.csv`); the initial state is the 1900
    count of that data set. Equations from A. J. Lotka, *Elements of Physical Biology*
    (1925) and V. Volterra, Mem. R. Accad. Naz. Lincei 2, 31 (1926).
    """

    alpha: float = param(0.55, units="1/year", description="prey growth rate")
    beta: float = param(0.028, units="1/(year kcount)", description="predation rate")
    gamma: float = param(0.80, units="1/year", description="predator death rate")
    delta: float = param(0.024, units="1/(year kcount)", description="predator growth per prey")
    state = State(
        prey=Var(30.0, units="kcount", description="prey (snowshoe hare pelts)"),
        predator=Var(4.0, units="kcount", description="predator (Canadian lynx pelts)"),
    )
    time_units: ClassVar[str] = "year"
    phase: ClassVar = ("prey", "predator")

    def rhs(self, t, s):
        return dict(
            prey=(self.alpha - self.beta * s.predator) * s.prey,
            predator=(-self.gamma + self.delta * s.prey) * s.predator,
        )
