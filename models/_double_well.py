"""An overdamped Langevin particle in a double-well potential: noise-driven barrier crossing."""

from typing import ClassVar

import jax.numpy as jnp
import numpy as np

from difsim._core import Model, State, Var, param


class DoubleWellLangevin(Model):
    r"""Overdamped Langevin dynamics in the double well $V(x) = a\,(x^4/4 - x^2/2)$.

    $$\mathrm{d}X = -V'(X)\,\mathrm{d}t + \sqrt{2D}\,\mathrm{d}W_t
      = a\,(X - X^3)\,\mathrm{d}t + \sqrt{2D}\,\mathrm{d}W_t$$

    Wells at $x = \pm 1$, a barrier of height $\Delta V = a/4$ at $x = 0$; the stationary
    density is $\propto e^{-V(x)/D}$ ($D$ plays the temperature). Thermal noise carries the
    particle over the barrier at Kramers' rate ([`kramers_rate`][]),
    $k = \frac{\sqrt{V''(\pm 1)\,|V''(0)|}}{2\pi}\,e^{-\Delta V / D}
       = \frac{\sqrt{2}\,a}{2\pi}\,e^{-a/4D}$, valid for a high barrier ($\Delta V \gg D$);
    [`mean_first_passage_time`][] gives the exact mean first-passage time at any $D$.

    **Parameters:** `a` (potential scale; default 1), `D` (diffusion coefficient,
    $k_B T/\gamma$; 0.25, a barrier of $\Delta V / D = 1$). **State:** `x` (position;
    default -1, the left well). Model time units.

    Source: H. A. Kramers, "Brownian motion in a field of force and the diffusion model of
    chemical reactions", Physica 7, 284 (1940); the first-passage formula and the rate in
    P. Hänggi, P. Talkner and M. Borkovec, Rev. Mod. Phys. 62, 251 (1990), §IV.
    Defaults: the unit scale.
    """

    a: float = param(1.0, units="1", description="potential scale: V(x) = a (x^4/4 - x^2/2)")
    D: float = param(0.25, units="1", description="diffusion coefficient (kT over friction)")
    time_units: ClassVar[str] = "1"  # model time
    state = State(x=Var(-1.0, units="1", description="position"))

    def rhs(self, t, s):
        return dict(x=self.a * (s.x - s.x**3))

    def diffusion(self, t, s):
        return dict(x=jnp.sqrt(2 * self.D) * jnp.ones_like(s.x))

    def potential(self, x):
        """$V(x) = a (x^4/4 - x^2/2)$."""
        return self.a * (x**4 / 4 - x**2 / 2)

    def kramers_rate(self):
        r"""Kramers' high-barrier escape rate $\frac{\sqrt{2} a}{2\pi} e^{-a/4D}$ (1/time)."""
        return jnp.sqrt(2.0) * self.a / (2 * jnp.pi) * jnp.exp(-self.a / (4 * self.D))

    def mean_first_passage_time(self, x0: float = -1.0, b: float = 1.0, points: int = 20001):
        r"""Exact mean time for the particle starting at `x0` to first reach `b > x0`:
        $T = \frac{1}{D}\int_{x_0}^{b} e^{V(y)/D} \int_{-\infty}^{y} e^{-V(z)/D}\,dz\,dy$
        (Hänggi et al. 1990, eq. 4.5), by the trapezoid rule on `points` nodes (numpy,
        float64; not differentiable). For `b` beyond the barrier it tends to
        `1 / kramers_rate()` as $\Delta V / D$ grows."""
        a, d = float(self.a), float(self.D)
        V = lambda x: a * (x**4 / 4 - x**2 / 2)  # noqa: E731
        # The inner integral's lower limit: where e^{-V/D} is negligible (V - V_min > 40 D).
        low = min(x0, -1.0) - 1.0
        while V(low) - V(-1.0) < 40 * d:
            low -= 0.5
        z = np.linspace(low, b, points)
        inner = np.concatenate([[0.0], np.cumsum(0.5 * np.diff(z) * _mid(np.exp(-V(z) / d)))])
        y_mask = z >= x0
        integrand = np.exp(V(z) / d) * inner
        y, f = z[y_mask], integrand[y_mask]
        return float(np.sum(0.5 * np.diff(y) * _mid(f)) / d)


def _mid(values: np.ndarray) -> np.ndarray:
    """Sums of neighbours: the trapezoid rule's `f_i + f_{i+1}`."""
    return values[1:] + values[:-1]
