"""Shared helpers for the test-suite (reference solutions, finite differences)."""

import copy

import numpy as np
import scipy.integrate


def scipy_reference(fun, t_span, y0, t_eval, method="DOP853", rtol=1e-12, atol=1e-12, **kw):
    """`scipy.integrate.solve_ivp` at tight tolerance: an independent reference solution.

    Returns an array of shape `(len(t_eval), len(y0))`.
    """
    sol = scipy.integrate.solve_ivp(
        fun,
        t_span,
        np.asarray(y0, dtype=float),
        t_eval=t_eval,
        method=method,
        rtol=rtol,
        atol=atol,
        **kw,
    )
    assert sol.success, sol.message
    return sol.y.T


def central_difference(f, x: float, h: float = 1e-6) -> float:
    """Central finite difference `(f(x+h) - f(x-h)) / 2h` of a scalar function."""
    return (f(x + h) - f(x - h)) / (2 * h)


def with_key(base: dict, path: str, value) -> dict:
    """A deep copy of the config dict `base` with the dotted key `path` set to `value`
    (or removed, for `...`)."""
    raw = copy.deepcopy(base)
    *tables, last = path.split(".")
    node = raw
    for table in tables:
        node = node.setdefault(table, {})
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return raw
