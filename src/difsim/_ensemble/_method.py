"""The interface of an ensemble integration method: a strategy object with one `step`
(and the dense output of the step it just took)."""

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx

from difsim._ensemble._field import Lanes


class StepOut(eqx.Module):
    """One attempted step of every lane: the candidate `y1`, its error estimate `y_err`
    (same layout), the carried derivative `f1` (at `(t + h, y1)` for FSAL methods, else
    unused) and `dense`: what the method's interpolant needs."""

    y1: Lanes
    y_err: Lanes
    f1: Lanes
    dense: Any


class AbstractEnsembleMethod(eqx.Module):
    """A method the ensemble engine integrates with.

    `f(t, y) -> dy/dt` acts on a block: `t` is `(lanes,)`, `y` is `{var: (lanes, *shape)}`.
    `h` is each lane's step, `(lanes,)` (0 for lanes that are finished).
    """

    name: ClassVar[str]
    order: ClassVar[int]
    # The exponent of the step-size controller is 1/error_order (as in diffrax).
    error_order: ClassVar[float]
    interpolant_order: ClassVar[int]

    @abc.abstractmethod
    def step(self, f: Callable, t, y: Lanes, h, f0: Lanes) -> StepOut:
        """Attempt one step of size `h` from `(t, y)`, where `f0 = f(t, y)`."""

    @abc.abstractmethod
    def interpolate(self, dense, t0, t1, y0: Lanes, y1: Lanes, t) -> Lanes:
        """The state at `t` (per lane, within `[t0, t1]`) of the step just accepted."""
