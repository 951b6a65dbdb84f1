"""SIR and SEIR epidemic models (counts of people), with the 1978 boarding-school defaults."""

from typing import ClassVar

from difsim._core import Model, State, Var, param

# Counts of people: UDUNITS and pint both know "count" (dimensionless).
_PERSON = "count"


class SIR(Model):
    r"""Kermack–McKendrick SIR epidemic in a closed population of $N = S + I + R$ people.

    $$\dot S = -\beta \frac{S I}{N},\qquad \dot I = \beta \frac{S I}{N} - \gamma I,\qquad
    \dot R = \gamma I$$

    The state holds **counts of people**, not fractions; $N$ is read from the state (it is
    conserved), so changing the initial counts changes the population size.

    **Parameters:** `beta` (transmission rate, 1/day; default 1.66), `gamma` (recovery
    rate, 1/day; default 1/2.2, i.e. an infectious period of 2.2 days). **State:** `S`
    (susceptible; default 762), `I` (infectious; 1), `R` (recovered/removed; 0), in people.
    Time in days. [`R0`][] is the basic reproduction number $\beta/\gamma$ (≈ 3.65).

    Source: the influenza outbreak in a boarding school of 763 boys, "Influenza in a
    boarding school", Brit. Med. J. 1, 587 (4 March 1978) (`data/boarding_school_influenza.csv`);
    parameters fitted to it in M. J. Keeling and P. Rohani, *Modeling Infectious Diseases in
    Humans and Animals* (Princeton University Press, 2008), ch. 2 ($\beta \approx 1.66$/day,
    $1/\gamma \approx 2.2$ days; J. D. Murray, *Mathematical Biology* I, §10.2, gives
    similar values). Model: W. O. Kermack and A. G. McKendrick, Proc. R. Soc. A 115, 700
    (1927).
    """

    beta: float = param(1.66, units="1/day", description="transmission rate")
    gamma: float = param(1.0 / 2.2, units="1/day", description="recovery rate")
    state = State(
        S=Var(762.0, units=_PERSON, description="susceptible people"),
        I=Var(1.0, units=_PERSON, description="infectious people"),
        R=Var(0.0, units=_PERSON, description="recovered people"),
    )
    time_units: ClassVar[str] = "day"
    phase: ClassVar = ("S", "I")

    @property
    def R0(self):
        r"""Basic reproduction number $\beta/\gamma$ (dimensionless)."""
        return self.beta / self.gamma

    def rhs(self, t, s):
        infection = self.beta * s.S * s.I / (s.S + s.I + s.R)
        recovery = self.gamma * s.I
        return dict(S=-infection, I=infection - recovery, R=recovery)


class SEIR(Model):
    r"""SEIR epidemic: SIR with a latent (exposed, not yet infectious) stage.

    $$\dot S = -\beta \frac{S I}{N},\quad \dot E = \beta \frac{S I}{N} - \sigma E,\quad
    \dot I = \sigma E - \gamma I,\quad \dot R = \gamma I,\qquad N = S + E + I + R$$

    The state holds **counts of people**; $N$ is read from the state (it is conserved).

    **Parameters:** `beta` (transmission rate, 1/day; default 1.66), `sigma` (rate of
    becoming infectious, 1/day; default 1/1.4, a latent period of 1.4 days), `gamma`
    (recovery rate, 1/day; default 1/2.2). **State:** `S` (default 762), `E` (0), `I` (1),
    `R` (0), in people. Time in days. [`R0`][] is $\beta/\gamma$.

    Source: `beta`, `gamma` and the initial state as for [`SIR`][] (1978 boarding-school
    influenza outbreak, Keeling & Rohani 2008). The latent period is approximated by the
    median incubation period of influenza A, 1.4 days, from J. Lessler et al., "Incubation
    periods of acute respiratory viral infections: a systematic review", Lancet Infect. Dis.
    9, 291 (2009). These defaults are illustrative, not a joint fit of the SEIR model.
    """

    beta: float = param(1.66, units="1/day", description="transmission rate")
    sigma: float = param(1.0 / 1.4, units="1/day", description="rate of becoming infectious")
    gamma: float = param(1.0 / 2.2, units="1/day", description="recovery rate")
    state = State(
        S=Var(762.0, units=_PERSON, description="susceptible people"),
        E=Var(0.0, units=_PERSON, description="exposed (latent) people"),
        I=Var(1.0, units=_PERSON, description="infectious people"),
        R=Var(0.0, units=_PERSON, description="recovered people"),
    )
    time_units: ClassVar[str] = "day"
    phase: ClassVar = ("S", "I")

    @property
    def R0(self):
        r"""Basic reproduction number $\beta/\gamma$ (dimensionless; no deaths in latency)."""
        return self.beta / self.gamma

    def rhs(self, t, s):
        infection = self.beta * s.S * s.I / (s.S + s.E + s.I + s.R)
        onset = self.sigma * s.E
        recovery = self.gamma * s.I
        return dict(S=-infection, E=infection - onset, I=onset - recovery, R=recovery)
