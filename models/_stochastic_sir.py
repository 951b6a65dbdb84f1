"""A stochastic SIR epidemic: the chemical Langevin equation of its two reactions."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, Noise, State, Var, param

_PERSON = "person"


class StochasticSIR(Model):
    r"""SIR epidemic with demographic noise: the chemical Langevin equation (Itô) of the
    reactions infection $S + I \to 2I$ (propensity $a_1 = \beta S I / N$) and recovery
    $I \to R$ ($a_2 = \gamma I$), each with its own Brownian motion (`noise = ds.Noise(dim=2)`):

    $$\begin{aligned}
    \mathrm{d}S &= -a_1\,\mathrm{d}t - \sqrt{a_1}\,\mathrm{d}W_1,\\
    \mathrm{d}I &= (a_1 - a_2)\,\mathrm{d}t + \sqrt{a_1}\,\mathrm{d}W_1
      - \sqrt{a_2}\,\mathrm{d}W_2,\\
    \mathrm{d}R &= a_2\,\mathrm{d}t + \sqrt{a_2}\,\mathrm{d}W_2
    \end{aligned}$$

    $N = S + I + R$ is conserved on every path. The mean follows the deterministic SIR
    while the counts are large; fluctuations scale like $\sqrt{N}$. The propensities use
    the positive parts of the counts (a count that noise pushes below zero stops reacting):
    the approximation is meant for counts of tens or more.

    **Parameters:** `beta` (transmission rate, 1/day; default 1.66), `gamma` (recovery
    rate, 1/day; 1/2.2). **State:** `S` (susceptible; default 990), `I` (infectious; 10),
    `R` (recovered; 0), in people. Time in days.

    Source: D. T. Gillespie, "The chemical Langevin equation", J. Chem. Phys. 113, 297
    (2000); for epidemics L. J. S. Allen, "An introduction to stochastic epidemic models",
    in *Mathematical Epidemiology*, Lecture Notes in Math. 1945 (Springer, 2008), §4.
    Rates: the boarding-school influenza fit of the deterministic `SIR` (Keeling & Rohani,
    2008), in a population of 1000 with 10 initial cases.
    """

    beta: float = param(1.66, units="1/day", description="transmission rate")
    gamma: float = param(1.0 / 2.2, units="1/day", description="recovery rate")
    state = State(
        S=Var(990.0, units=_PERSON, description="susceptible"),
        I=Var(10.0, units=_PERSON, description="infectious"),
        R=Var(0.0, units=_PERSON, description="recovered"),
    )
    noise = Noise(dim=2)  # W_1: infection, W_2: recovery
    time_units: ClassVar[str] = "day"
    phase: ClassVar = ("S", "I")

    def _propensities(self, s):
        n = s.S + s.I + s.R
        infection = self.beta * jnp.maximum(s.S, 0) * jnp.maximum(s.I, 0) / n
        return infection, self.gamma * jnp.maximum(s.I, 0)

    def rhs(self, t, s):
        infection, recovery = self._propensities(s)
        return dict(S=-infection, I=infection - recovery, R=recovery)

    def diffusion(self, t, s):
        infection, recovery = (jnp.sqrt(a) for a in self._propensities(s))
        zero = jnp.zeros_like(infection)
        return dict(
            S=jnp.stack([-infection, zero]),
            I=jnp.stack([infection, -recovery]),
            R=jnp.stack([zero, recovery]),
        )
