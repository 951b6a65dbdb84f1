"""Fixed-step SDE methods of the ensemble engine: strategy objects with one `step`.

Each reproduces the diffrax solver of the same name on `MultiTerm(ODETerm(drift),
NoiseTerm(diffusion, path))`, the terms `simulate` builds for a stochastic model: the same
stages, evaluated at the same times with the same increments, so an ensemble lane and a
diffrax solve of that path agree to rounding. The additive-noise Runge–Kutta methods
(ShARK, SRA1) take their coefficients from the diffrax solver's tableau.
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import numpy as np

from difsim._ensemble._field import Lanes
from difsim._ensemble._noise import BlockNoise, Increment, added, scaled


class AbstractSDEMethod(eqx.Module):
    """A fixed-step method for `dX = f(t, X) dt + g(t, X) dW`.

    `f(t, y)` is the drift of a block (`t`: `(lanes,)`, `y`: [`Lanes`][]), `g` the block's
    [`BlockNoise`][]; `ta`, `tb` are the step's ends, `(lanes,)`; `inc` its increment.
    """

    name: ClassVar[str]
    # Whether a step needs the space-time Lévy area of its increment besides `W`.
    levy: ClassVar[bool] = False

    @abc.abstractmethod
    def step(self, f: Callable, g: BlockNoise, ta, tb, y: Lanes, inc: Increment) -> Lanes:
        """The state at `tb` from `y` at `ta`."""


class EulerMaruyama(AbstractSDEMethod):
    """Euler–Maruyama (Itô; diffrax's `Euler`): `y + f h + g ΔW`, one drift and one
    diffusion evaluation per step; strong order 0.5 (1 for additive noise), weak 1."""

    name: ClassVar[str] = "euler"

    def step(self, f, g, ta, tb, y, inc):
        drift = scaled(tb - ta, f(ta, y))
        return added(y, added(drift, g.prod(g(ta, y), inc.w)))


class Heun(AbstractSDEMethod):
    """Heun's method (Stratonovich; diffrax's `Heun`, the trapezoidal rule on both
    terms): two evaluations of drift and diffusion per step; strong order 1 for
    commutative noise."""

    name: ClassVar[str] = "heun"

    def step(self, f, g, ta, tb, y, inc):
        h = tb - ta
        k0 = added(scaled(h, f(ta, y)), g.prod(g(ta, y), inc.w))
        y_pred = added(y, k0)
        k1 = added(scaled(h, f(tb, y_pred)), g.prod(g(tb, y_pred), inc.w))
        return added(y, {k: 0.5 * k0[k] + 0.5 * k1[k] for k in k0})


class EulerHeun(AbstractSDEMethod):
    """The Euler–Heun method (Stratonovich; diffrax's `EulerHeun`): Euler in the drift,
    the trapezoidal rule in the diffusion; one drift and two diffusion evaluations."""

    name: ClassVar[str] = "euler_heun"

    def step(self, f, g, ta, tb, y, inc):
        drift = scaled(tb - ta, f(ta, y))
        g0 = g.prod(g(ta, y), inc.w)
        g1 = g.prod(g(ta, added(y, g0)), inc.w)
        half = {k: 0.5 * (g0[k] + g1[k]) for k in g0}
        return added(y, drift, half)


class AdditiveSRK(AbstractSDEMethod):
    """A stochastic Runge–Kutta method for additive noise (diffrax's `AbstractSRK` with
    additive coefficients), read from a diffrax solver class (`ShARK`, `SRA1`): stages
    `z_j = y + Σ_i a_ji h f_i + (a^W_j ΔW + a^H_j ΔH) g(t0)`, the update
    `Σ_j b_j h f_j + (b^W ΔW + b^H ΔH) g(t0)` plus the correction
    `(g(t1) - g(t0)) / 2 · (ΔW - 2 ΔH)` for a diffusion that depends on time. The
    diffusion is evaluated at the step's start state only (it does not depend on it)."""

    levy: ClassVar[bool] = True
    solver: type[dfx.AbstractSRK] = eqx.field(static=True)

    def __check_init__(self):
        tab = self.solver.tableau
        if not tab.is_additive_noise() or tab.coeffs_kk is not None:
            raise ValueError(f"{self.solver.__name__}: not an additive-noise SRK with W and H")

    def step(self, f, g, ta, tb, y, inc):
        tab = self.solver.tableau
        h = tb - ta
        g0, g1 = g(ta, y), g(tb, y)
        gw, gh = g.prod(g0, inc.w), g.prod(g0, inc.hh)
        c = np.insert(np.asarray(tab.c, float), 0, 0.0)
        a = [np.zeros(0)] + [np.asarray(row, float) for row in tab.a]
        hks: list[Lanes] = []
        for j in range(len(c)):
            noise = _combination([gw, gh], [tab.coeffs_w.a[j], tab.coeffs_hh.a[j]])
            z = added(y, *[t for t in (_combination(hks, a[j]), noise) if t is not None])
            hks.append(scaled(h, f(ta + float(c[j]) * h, z)))
        drift = _combination(hks, tab.b_sol)
        noise = _combination([gw, gh], [tab.coeffs_w.b_sol, tab.coeffs_hh.b_sol])
        # Diagonal noise: one increment per variable; general noise: one `(lanes, m)`.
        if isinstance(inc.w, dict):
            contr = {k: inc.w[k] - 2.0 * inc.hh[k] for k in inc.w}
        else:
            contr = inc.w - 2.0 * inc.hh
        delta = {k: 0.5 * (g1[k] - g0[k]) for k in g0}
        return added(y, *[t for t in (drift, noise) if t is not None], g.prod(delta, contr))


def _combination(trees: list[Lanes], coeffs) -> Lanes | None:
    """`Σ_i coeffs[i] trees[i]`, zero coefficients skipped at trace time (`None` if all
    are)."""
    terms = [(float(cf), t) for cf, t in zip(np.atleast_1d(coeffs), trees) if cf != 0]
    if not terms:
        return None
    return {k: sum(cf * t[k] for cf, t in terms) for k in terms[0][1]}


class ShARK(AdditiveSRK):
    """ShARK (Foster, dos Reis & Strange 2023): strong order 1.5, weak 2 for additive
    noise; two drift evaluations per step. difsim's default for additive noise."""

    name: ClassVar[str] = "shark"
    solver: type[dfx.AbstractSRK] = eqx.field(static=True, default=dfx.ShARK)


class SRA1(AdditiveSRK):
    """SRA1 (Rößler 2010): strong order 1.5, weak 2 for additive noise; two drift
    evaluations per step."""

    name: ClassVar[str] = "sra1"
    solver: type[dfx.AbstractSRK] = eqx.field(static=True, default=dfx.SRA1)


# diffrax solver type → the ensemble SDE method that reproduces it.
SDE_METHODS: dict[type, type[AbstractSDEMethod]] = {
    dfx.Euler: EulerMaruyama,
    dfx.Heun: Heun,
    dfx.EulerHeun: EulerHeun,
    dfx.ShARK: ShARK,
    dfx.SRA1: SRA1,
}
