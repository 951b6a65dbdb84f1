"""Stochastic models with events that change the state: an integrate-and-fire neuron (drift
and additive noise, reset to 0 when it reaches the threshold) against the same Brownian
path solved piecewise by hand, and what a stochastic solve refuses (dense output,
`brownian="steps"` with restarts)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._config._load import load_config
from difsim._config._schema import ConfigError

MU, SIGMA, T1, DT = 1.0, 0.5, 4.0, 0.01


class Neuron(ds.Model):
    """dX = mu dt + sigma dW; when X reaches 1 the neuron fires and X resets to 0."""

    mu: float = MU
    sigma: float = SIGMA
    state = ds.State(x=0.0)
    events = (
        ds.Event(lambda t, s, m: s.x - 1.0, affect=lambda t, s, m: dict(x=jnp.zeros_like(s.x)),
                 direction="up", name="fire"),
    )  # fmt: skip

    def rhs(self, t, s):
        return dict(x=self.mu * jnp.ones_like(s.x))

    def diffusion(self, t, s):
        return dict(x=self.sigma * jnp.ones_like(s.x))


def _fire_by_hand(w_at):
    """The firing times of Euler–Maruyama with step DT on the Brownian path `w_at` (times ->
    W there), written out: steps on the lattice k·DT (the step from a reset to the next
    lattice point included), the threshold crossing located on the straight line between
    step ends (the solver's interpolant), X = 0 after it."""
    lattice = np.arange(round(T1 / DT) + 1) * DT
    start, fires = 0.0, []
    while True:
        grid = np.concatenate([[start], lattice[lattice > start + 1e-12]])
        w = w_at(grid)
        # Constant drift and diffusion: the Euler sum is the exact path from the reset.
        x = MU * (grid - start) + SIGMA * (w - w[0])
        above = np.nonzero(x[1:] >= 1.0)[0]
        if above.size == 0:
            return np.asarray(fires)
        j = above[0]
        start = grid[j] + (1.0 - x[j]) / (x[j + 1] - x[j]) * (grid[j + 1] - grid[j])
        fires.append(start)


def test_reset_events_on_an_sde_follow_the_same_path_solved_by_hand():
    model, key = Neuron(), jax.random.key(7)
    ts = np.linspace(0.0, T1, 41)  # on the steps k·DT: saved values are simulated
    sol = ds.simulate(model, t=ts, key=key, solver="euler", dt0=DT, rtol=1e-10, atol=1e-10,
                      max_events=20)  # fmt: skip
    path = ds.brownian_path(model, key, 0.0, T1, solver="euler", dt0=DT)
    w_of = jax.jit(jax.vmap(lambda t: path.evaluate(0.0, t)))

    def w_at(t):  # W at the times t (padded to one length: one compilation)
        padded = np.full(512, T1)
        padded[: len(t)] = t
        return np.asarray(w_of(jnp.asarray(padded))).reshape(-1)[: len(t)]

    fires = _fire_by_hand(w_at)
    n = int(sol.events.count)
    assert n == len(fires) >= 4 and ds.Status(int(sol.status)) == ds.Status.SUCCESS
    np.testing.assert_allclose(np.asarray(sol.events.times[:n]), fires, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(sol.events.before["x"][:n]), 1.0, atol=1e-9)
    assert np.all(np.asarray(sol.events.after["x"][:n]) == 0.0)
    # Between resets X(t) = mu (t - tau) + sigma (W(t) - W(tau)), tau the last firing
    # before t: the Brownian path goes on across the restarts, and every save time is a
    # step end (after a reset the steps go back onto the lattice k·DT). To the firing
    # times' tolerance: W varies ~1e2 per unit time at the tree's finest resolution.
    last = np.concatenate([[0.0], fires])[np.searchsorted(fires, ts, side="right")]
    exact = MU * (ts - last) + SIGMA * (w_at(ts) - w_at(last))
    np.testing.assert_allclose(np.asarray(sol.x), exact, rtol=0, atol=1e-8)


def test_what_a_stochastic_solve_refuses():
    run = dict(t0=0.0, t1=1.0, key=jax.random.key(0), solver="euler", dt0=0.1)
    with pytest.raises(ValueError, match=r"Neuron is stochastic: save='dense' .* give save times"):
        ds.simulate(Neuron(), save="dense", **run)
    config = {"model": {"name": "ornstein_uhlenbeck"}, "time": {"t1": 1.0, "save": "dense"}}
    with pytest.raises(ConfigError, match=r"\[time\] save: OrnsteinUhlenbeck is stochastic"):
        load_config(config)
    # brownian="steps" keys increments by lattice step: a restart between lattice points
    # would draw one twice, and so would steps spread evenly over an end off the lattice.
    with pytest.raises(ValueError, match=r"Neuron has events that restart the solve \('fire'\)"):
        ds.simulate(Neuron(), save=11, brownian="steps", **run)
    ou = ds.models.OrnsteinUhlenbeck()
    with pytest.raises(ValueError, match=r"t1 - t0 = 1.05 to be a whole number of steps dt0"):
        ds.simulate(ou, save="final", brownian="steps", **{**run, "t1": 1.05})
    # (A terminating event does not restart: fine with brownian="steps", as in
    # test_sde_models.py's first-passage times.)


def test_vmapped_lanes_with_different_event_counts():
    # Lanes that stop firing early still run (masked) the later passes of the others, past
    # their end: that once failed the whole batch ("Cannot evaluate VirtualBrownianTree
    # outside of its range"). Without noise, lane mu fires at k / mu exactly (the Euler
    # path is the straight line, and so is the interpolant locating the crossing).
    mus = jnp.asarray([0.8, 1.3])
    solve = jax.jit(jax.vmap(lambda mu: ds.simulate(
        Neuron(mu=mu, sigma=0.0), t0=0.0, t1=3.5, save="final", key=jax.random.key(0),
        solver="euler", dt0=DT, max_events=20,
    )))  # fmt: skip
    sol = solve(mus)
    np.testing.assert_array_equal(sol.status, [ds.Status.SUCCESS] * 2)
    counts = np.floor(3.5 * np.asarray(mus)).astype(int)  # 2 and 4
    np.testing.assert_array_equal(sol.events.count, counts)
    for lane, (mu, n) in enumerate(zip(np.asarray(mus), counts)):
        np.testing.assert_allclose(sol.events.times[lane, :n], np.arange(1, n + 1) / mu, rtol=1e-9)
