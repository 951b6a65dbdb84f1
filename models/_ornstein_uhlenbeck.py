"""The Ornstein–Uhlenbeck process: the linear SDE with a Gaussian transition density."""

from typing import ClassVar

import jax.numpy as jnp

from difsim._core import Model, State, Var, param


class OrnsteinUhlenbeck(Model):
    r"""Ornstein–Uhlenbeck process: mean reversion with additive noise (Itô = Stratonovich).

    $$\mathrm{d}X = \theta\,(\mu - X)\,\mathrm{d}t + \sigma\,\mathrm{d}W_t$$

    Exact: given $X_s = x$, $X_{s+\Delta}$ is normal with mean
    $\mu + (x - \mu)\,e^{-\theta\Delta}$ and variance
    $\frac{\sigma^2}{2\theta}(1 - e^{-2\theta\Delta})$ ([`transition`][]); the stationary
    law is $\mathcal{N}(\mu, \sigma^2 / 2\theta)$. A Brownian particle's velocity, an
    interest rate (Vasicek), a membrane potential between spikes.

    **Parameters:** `theta` (mean-reversion rate, 1/time; default 1), `mu` (long-run mean;
    0), `sigma` (noise amplitude, 1/√time; 0.5). **State:** `x` (default 1). Model time
    units.

    Source: G. E. Uhlenbeck and L. S. Ornstein, "On the theory of the Brownian motion",
    Phys. Rev. 36, 823 (1930); the transition density in C. W. Gardiner, *Stochastic
    Methods* (4th ed., Springer 2009), §3.8.4. Defaults: the unit scale.
    """

    theta: float = param(1.0, units="1", description="mean-reversion rate (per model time unit)")
    mu: float = param(0.0, units="1", description="long-run mean")
    sigma: float = param(0.5, units="1", description="noise amplitude (per sqrt of model time)")
    time_units: ClassVar[str] = "1"  # model time
    state = State(x=Var(1.0, units="1", description="position"))

    def rhs(self, t, s):
        return dict(x=self.theta * (self.mu - s.x))

    def diffusion(self, t, s):
        return dict(x=self.sigma)

    def transition(self, dt):
        r"""`(a, b, v)`: $X_{t+\Delta} \mid X_t \sim \mathcal{N}(a X_t + b, v)$ for a time
        step $\Delta$ = `dt` (any shape)."""
        decay = jnp.exp(-self.theta * jnp.asarray(dt))
        variance = self.sigma**2 / (2 * self.theta) * (1 - decay**2)
        return decay, self.mu * (1 - decay), variance

    def mean(self, t):
        """Exact mean of `x` at time `t` (from the initial state at t = 0)."""
        a, b, _ = self.transition(t)
        return a * self.initial_state()["x"] + b

    def variance(self, t):
        """Exact variance of `x` at time `t` (a fixed initial state at t = 0)."""
        return self.transition(t)[2]
