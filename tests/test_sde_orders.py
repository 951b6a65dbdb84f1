"""Observed strong and weak orders of every named SDE solver, against diffrax's SDE solver
table (`difsim.solvers.SDE_SOLVERS`), within ±0.2.

Multiplicative, scalar noise (hence commutative: the table's "commutative" column):
`dX = c cos²X dt + a cos²X ∘ dW` (Stratonovich; the Itô form adds the drift
`-a² sin X cos³X`), whose exact solution on a Brownian path is
`X_T = arctan(c T + a W_T + tan X_0)` (Kloeden & Platen 1992, §4.4), with `W_T` read from
the very path the solver integrates against (`ds.brownian_path`). Bounded, so the
root-mean-square error over the paths (the strong error; noise large against the drift,
a = 1, c = 0.5) is a steady estimate. The mean of `X_T^h - X_T` (drift large against the
noise, a = 0.5, c = 1) is an unbiased estimate of the weak error `E[X_T^h] - E[X_T]`, whose
Monte Carlo error is the strong error over √N (common random numbers): 512 paths resolve it.

Additive noise (ShARK, SRA1, SEA): `dX = (α X - β X³) dt + σ dW`, with the same solver at a
much smaller step on the same paths as the reference (no pathwise closed form). Strong
order on a double well (α = β = 1, σ = 1.5: nonlinear drift, large noise, small steps, where
the 1.5 regime is reached); weak order on E[X_T²] of an Ornstein–Uhlenbeck process
(α = -1, β = 0, σ = 1), where the difference to the reference is smooth in the step.

Each solver compiles once: the step and the model's parameters are traced arguments.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import linregress

import difsim as ds
from difsim import solvers

T = 1.0
CHUNK = 64  # paths per call of a compiled solve


class ItoArctan(ds.Model):
    """dX = (c cos²X - a² sin X cos³X) dt + a cos²X dW (Itô): X = arctan(c t + a W + tan X_0)."""

    a: float = 1.0
    c: float = 0.5
    state = ds.State(x=0.5)

    def rhs(self, t, s):
        cos = jnp.cos(s.x)
        return dict(x=self.c * cos**2 - self.a**2 * jnp.sin(s.x) * cos**3)

    def diffusion(self, t, s):
        return dict(x=self.a * jnp.cos(s.x) ** 2)


class StratonovichArctan(ItoArctan):
    """The same process as a Stratonovich SDE: dX = c cos²X dt + a cos²X ∘ dW."""

    noise = ds.Noise(calculus="stratonovich")

    def rhs(self, t, s):
        return dict(x=self.c * jnp.cos(s.x) ** 2)


class Additive(ds.Model):
    """dX = (α X - β X³) dt + σ dW: a double well, or (β = 0, α < 0) Ornstein–Uhlenbeck."""

    alpha: float = 1.0
    beta: float = 1.0
    sigma: float = 1.5
    state = ds.State(x=0.5)

    def rhs(self, t, s):
        return dict(x=self.alpha * s.x - self.beta * s.x**3)

    def diffusion(self, t, s):
        return dict(x=self.sigma * jnp.ones_like(s.x))


@functools.cache
def _solve(name: str):
    """`(model, keys, dt) -> X_T` of every path, compiled once per solver."""

    def one(model, key, dt):
        sol = ds.simulate(model, t0=0.0, t1=T, save="final", key=key, solver=name, dt0=dt)
        return sol.ys["x"][-1]

    compiled = jax.jit(jax.vmap(one, in_axes=(None, 0, None)))

    def solve(model, keys, dt):
        # The paths are independent lanes: solved 64 at a time, any number of them runs the
        # one compiled program. A strongly typed step: a Python float (weakly typed) would
        # compile a second one.
        chunks = keys.reshape(-1, CHUNK)
        return jnp.concatenate([compiled(model, k, np.float64(dt)) for k in chunks])

    return solve


@eqx.filter_jit
def _w_T(paths):
    """`W_T` of each of a batch of Brownian paths: compiled once per kind of path (the
    solvers that draw the same Lévy area integrate against the same paths)."""
    return jax.vmap(lambda path: path.evaluate(0.0, T)[0])(paths)


def _exact(model, keys, name: str, dt: float):
    """The exact `X_T` of the arctan process on each key's Brownian path: the path `name`
    integrates against."""
    paths = jax.vmap(lambda key: ds.brownian_path(model, key, 0.0, T, solver=name, dt0=dt))(keys)
    return jnp.arctan(model.c * T + model.a * _w_T(paths) + jnp.tan(0.5))


def _slope(steps, errors) -> float:
    return linregress(np.log(steps), np.log(errors)).slope


MULTIPLICATIVE = [n for n, i in solvers.SDE_SOLVERS.items() if not i.additive_only]
ADDITIVE = [n for n, i in solvers.SDE_SOLVERS.items() if i.additive_only]
STEPS = 2.0 ** -np.arange(3, 7)


@pytest.mark.slow
@pytest.mark.parametrize("name", MULTIPLICATIVE)
def test_orders_with_multiplicative_noise(name):
    info = solvers.SDE_SOLVERS[name]
    cls = ItoArctan if info.calculus == "ito" else StratonovichArctan
    keys = jax.random.split(jax.random.key(42), 512)
    solve = _solve(name)
    # The strong error over the first 256 paths; the exact solution of those taken from all
    # 512 (one compile: the paths are independent lanes).
    model, strong_keys = cls(a=1.0, c=0.5), keys[:256]
    exact = _exact(model, keys, name, STEPS[-1])[:256]
    strong = [jnp.sqrt(jnp.mean((solve(model, strong_keys, h) - exact) ** 2)) for h in STEPS]
    model = cls(a=0.5, c=1.0)
    exact = _exact(model, keys, name, STEPS[-1])
    diffs = [solve(model, keys, h) - exact for h in STEPS]
    weak = [abs(float(jnp.mean(d))) for d in diffs]
    standard_errors = [float(jnp.std(d)) / np.sqrt(keys.shape[0]) for d in diffs]
    assert all(w > 4 * se for w, se in zip(weak, standard_errors)), (weak, standard_errors)
    assert _slope(STEPS, strong) == pytest.approx(info.strong["commutative"], abs=0.2)
    assert _slope(STEPS, weak) == pytest.approx(info.weak["commutative"], abs=0.2)


@pytest.mark.slow
@pytest.mark.parametrize("name", ADDITIVE)
def test_orders_with_additive_noise(name):
    info = solvers.SDE_SOLVERS[name]
    solve = _solve(name)
    reference_step = 2.0**-10  # (its error: an eighth of the smallest step's)
    keys = jax.random.split(jax.random.key(7), 512)
    steps = 2.0 ** -np.arange(5, 9)
    model, strong_keys = Additive(), keys[:64]
    reference = solve(model, strong_keys, reference_step)
    strong = [jnp.sqrt(jnp.mean((solve(model, strong_keys, h) - reference) ** 2)) for h in steps]
    assert _slope(steps, strong) == pytest.approx(info.strong["additive"], abs=0.2)
    steps = 2.0 ** -np.arange(1, 5)
    ou = Additive(alpha=-1.0, beta=0.0, sigma=1.0, state=ds.State(x=1.0))
    reference = solve(ou, keys, 2.0**-8) ** 2  # its weak error: < 1 % of the smallest
    diffs = [solve(ou, keys, h) ** 2 - reference for h in steps]
    weak = [abs(float(jnp.mean(d))) for d in diffs]
    standard_errors = [float(jnp.std(d)) / np.sqrt(keys.shape[0]) for d in diffs]
    assert all(w > 4 * se for w, se in zip(weak, standard_errors)), (weak, standard_errors)
    assert _slope(steps, weak) == pytest.approx(info.weak["additive"], abs=0.2)
