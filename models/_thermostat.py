"""A room heated by a thermostat: a hybrid system that switches its dynamics."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Event, Model, State, Var, param


def _too_warm(t, s, m):
    return s.T - m.T_high


def _too_cold(t, s, m):
    return s.T - m.T_low


class Thermostat(Model):
    r"""Newton cooling of a room towards the outside temperature, with a heater that a
    thermostat switches off above `T_high` and on below `T_low`:

    $$\dot T = -k\,(T - T_\mathrm{out}) + P\,q,\qquad \dot q = 0,$$

    where the mode $q \in \{0, 1\}$ (heater off/on) is part of the state and changes only
    at the events `off` ($T$ rising through $T_\mathrm{high}$: $q \mapsto 0$) and `on`
    ($T$ falling through $T_\mathrm{low}$: $q \mapsto 1$). The temperature then cycles
    with period $t_\mathrm{cool} + t_\mathrm{heat}$, where
    $t_\mathrm{cool} = \frac1k \ln\frac{T_\mathrm{high} - T_\mathrm{out}}{T_\mathrm{low} -
    T_\mathrm{out}}$ and $t_\mathrm{heat} = \frac1k \ln\frac{T_\infty - T_\mathrm{low}}
    {T_\infty - T_\mathrm{high}}$ with $T_\infty = T_\mathrm{out} + P/k$.

    **Parameters:** `k` (heat-loss rate, 1/h; default 0.1), `T_out` (outside temperature,
    °C; 5), `P` (heating rate of the heater, °C/h; 3), `T_low`, `T_high` (switching
    temperatures, °C; 19 and 21). **State:** `T` (room temperature, °C; 20), `q` (heater
    on = 1, off = 0; 1). Time in hours.

    Source: the thermostat hybrid automaton of T. A. Henzinger, "The theory of hybrid
    automata", Proc. 11th IEEE Symposium on Logic in Computer Science (1996), with
    Newton's law of cooling for the flows.
    """

    k: float = param(0.1, units="1/h", description="heat-loss rate")
    T_out: float = param(5.0, units="degC", description="outside temperature")
    P: float = param(3.0, units="degC/h", description="heating rate of the heater")
    T_low: float = param(19.0, units="degC", description="switch-on temperature")
    T_high: float = param(21.0, units="degC", description="switch-off temperature")
    state = State(
        T=Var(20.0, units="degC", description="room temperature"),
        q=Var(1.0, units="1", description="heater on (1) or off (0)"),
    )
    time_units: ClassVar[str] = "h"
    events: ClassVar = (
        Event(_too_warm, lambda t, s, m: dict(q=0.0), direction="up", name="off"),
        Event(_too_cold, lambda t, s, m: dict(q=1.0), direction="down", name="on"),
    )

    def rhs(self, t, s):
        return dict(T=-self.k * (s.T - self.T_out) + self.P * s.q, q=jnp.zeros_like(s.q))

    def period(self):
        """The exact period of the switching cycle (h)."""
        t_inf = self.T_out + self.P / self.k
        cool = jnp.log((self.T_high - self.T_out) / (self.T_low - self.T_out)) / self.k
        heat = jnp.log((t_inf - self.T_low) / (t_inf - self.T_high)) / self.k
        return cool + heat
