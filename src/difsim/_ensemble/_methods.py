"""Integration methods of the ensemble engine: strategy objects with one `step`.

Explicit Runge–Kutta methods take their Butcher tableau and their dense interpolant from
the diffrax solver of the same name, so an ensemble solve and a diffrax solve of one
trajectory use the same coefficients. The stages are unrolled when the step is traced
(no loop over a stage buffer): XLA sees one straight-line program per step and fuses
each stage's combination with the evaluation of the right-hand side.
"""

from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np

from difsim import solvers
from difsim._ensemble._field import Lanes, per_lane

# The method interface lives in `_method.py` so that methods in other modules (the
# Rosenbrock method) subclass it while this table maps to them without an import cycle.
from difsim._ensemble._method import (
    AbstractEnsembleMethod as AbstractEnsembleMethod,
    StepOut as StepOut,
)
from difsim._ensemble._rosenbrock import Rodas5P


class ExplicitRK(AbstractEnsembleMethod):
    """An embedded explicit Runge–Kutta pair with FSAL (first same as last), read from
    a diffrax solver class (`diffrax.Tsit5`, `Dopri5`, `Bosh3`, `Dopri8`).

    Per step it costs `stages - 1` evaluations of the right-hand side.
    """

    solver: type[dfx.AbstractERK] = eqx.field(static=True)

    def __check_init__(self):
        if not self.solver.tableau.fsal:
            raise ValueError(f"{self.solver.__name__}: the ensemble engine needs an FSAL pair")

    @property
    def stages(self) -> int:
        return len(self.solver.tableau.c) + 1

    def step(self, f, t, y, h, f0) -> StepOut:
        tab = self.solver.tableau
        ks = [f0]
        for i, (a_row, c) in enumerate(zip(tab.a_lower, tab.c)):
            last = i == len(tab.c) - 1
            # FSAL: the last stage is evaluated at (t + h, y1) and y1 = y + h Σ b_j k_j.
            yi = _combine(y, h, ks, tab.b_sol if last else a_row)
            ks.append(f(t + c * h, yi))
        y1 = yi
        y_err = _combine(None, h, ks, tab.b_error)
        return StepOut(y1=y1, y_err=y_err, f1=ks[-1], dense=ks)

    def interpolate(self, dense, t0, t1, y0, y1, t):
        h = t1 - t0
        # diffrax's interpolants take increments h·k_i, stacked along a leading stage axis.
        k = {
            name: jax.numpy.stack([per_lane(h, ki[name]) * ki[name] for ki in dense], axis=1)
            for name in y0
        }

        def one(t0, t1, y0, y1, k, t):
            return self.solver.interpolation_cls(t0=t0, t1=t1, y0=y0, y1=y1, k=k).evaluate(t)

        return jax.vmap(one)(t0, t1, y0, y1, k, t)


def _combine(y: Lanes | None, h, ks: list[Lanes], coeffs) -> Lanes:
    """`y + h Σ_j coeffs[j] ks[j]` per variable, skipping zero coefficients at trace time."""
    terms = [(float(c), k) for c, k in zip(np.asarray(coeffs), ks) if c != 0]

    def one(name):
        acc = sum(c * k[name] for c, k in terms)
        step = per_lane(h, acc) * acc
        return step if y is None else y[name] + step

    return {name: one(name) for name in ks[0]}


class Tsit5(ExplicitRK):
    """Tsitouras' 5(4) pair, 7 stages (6 evaluations per step), 4th-order interpolant."""

    name: ClassVar[str] = "tsit5"
    order: ClassVar[int] = 5
    error_order: ClassVar[float] = 5
    interpolant_order: ClassVar[int] = 4
    solver: type[dfx.AbstractERK] = eqx.field(static=True, default=dfx.Tsit5)


class Dopri5(ExplicitRK):
    """Dormand–Prince 5(4), 7 stages (6 evaluations per step), 4th-order interpolant."""

    name: ClassVar[str] = "dopri5"
    order: ClassVar[int] = 5
    error_order: ClassVar[float] = 5
    interpolant_order: ClassVar[int] = 4
    solver: type[dfx.AbstractERK] = eqx.field(static=True, default=dfx.Dopri5)


class Bosh3(ExplicitRK):
    """Bogacki–Shampine 3(2), 4 stages (3 evaluations per step), cubic Hermite
    interpolant."""

    name: ClassVar[str] = "bosh3"
    order: ClassVar[int] = 3
    error_order: ClassVar[float] = 3
    interpolant_order: ClassVar[int] = 3
    solver: type[dfx.AbstractERK] = eqx.field(static=True, default=dfx.Bosh3)


class Dopri8(ExplicitRK):
    """Dormand–Prince 8(7), 14 stages (13 evaluations per step), 7th-order interpolant:
    for tight tolerances."""

    name: ClassVar[str] = "dopri8"
    order: ClassVar[int] = 8
    error_order: ClassVar[float] = 8
    interpolant_order: ClassVar[int] = 7
    solver: type[dfx.AbstractERK] = eqx.field(static=True, default=dfx.Dopri8)


# diffrax solver type → the ensemble method that reproduces it.
METHODS: dict[type, type[AbstractEnsembleMethod]] = {
    dfx.Tsit5: Tsit5,
    dfx.Dopri5: Dopri5,
    dfx.Bosh3: Bosh3,
    dfx.Dopri8: Dopri8,
    solvers.Rodas5P: Rodas5P,
}
