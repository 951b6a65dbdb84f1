"""Shared helpers for the test-suite (reference solutions, finite differences)."""

import copy

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate

import difsim as ds


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


def ude_network(activation=jnp.tanh):
    """The 2-5-5-2 network of the issue-28 UDE below, in float64 (key 0)."""
    net = eqx.nn.MLP(2, 2, 5, 2, activation=activation, key=jax.random.key(0))
    return jax.tree.map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x, net)


class UDE(ds.Model):
    """Issue 28's universal differential equation: known linear terms plus a network."""

    alpha: float = 1.3
    delta: float = ds.param(1.8, units="1/s")
    net: eqx.nn.MLP = eqx.field(default_factory=ude_network)
    state = ds.State(u=0.44249296, v=4.6280594)

    def rhs(self, t, s):
        nn = self.net(jnp.stack([s.u, s.v]))
        return {"u": self.alpha * s.u + nn[0], "v": -self.delta * s.v + nn[1]}
