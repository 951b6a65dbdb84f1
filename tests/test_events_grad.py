"""Derivatives through events: bounce times with respect to the drop height and the
restitution against their closed forms in reverse mode (forward mode: docs/events.md,
checked in test_docs_events.py), and a fit of the restitution through the bounces.

A ball dropped from rest at height h lands at t_n = t_1 (1 + 2 e + ... + 2 e^{n-1}) with
t_1 = sqrt(2 h / g): dt_n/dh = t_n / (2 h) and dt_n/de = 2 t_1 sum_{k<n} k e^{k-1}.
"""

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

import difsim as ds

G = 9.81
N = 3  # bounces differentiated


def landing_times(h, e, n=N):
    t1 = np.sqrt(2 * h / G)
    return t1 * (1 + 2 * np.array([sum(e**j for j in range(1, k)) for k in range(1, n + 1)]))


def d_landing_times(h, e, n=N):
    """`(dt/dh, dt/de)` of the first `n` landings."""
    t1 = np.sqrt(2 * h / G)
    dde = 2 * t1 * np.array([sum(j * e ** (j - 1) for j in range(1, k)) for k in range(1, n + 1)])
    return landing_times(h, e, n) / (2 * h), dde


def _bounces(h, e, adjoint, t1):
    model = ds.models.BouncingBall(e=e, v_rest=0.0).replace(**{"state.h": h})
    sol = ds.simulate(
        model, t0=0.0, t1=t1, save="final", rtol=1e-10, atol=1e-10, adjoint=adjoint,
        max_events=8,
    )  # fmt: skip
    return sol.events.times[:N]


def _end(h, e):
    """A solve's end between the N-th and the next landing."""
    return float(np.mean(landing_times(h, e, N + 1)[-2:]))


def test_bounce_time_differentiates_in_reverse_mode_like_the_closed_form():
    # The third landing: its derivative runs back through the first two events.
    h, e = 10.0, 0.8
    end = _end(h, e)
    third = lambda h, e: _bounces(h, e, "checkpoint", end)[N - 1]  # noqa: E731
    # Jitted whole: a derivative taken outside jit compiles the solve's forward and
    # backward halves as separate, larger programs.
    dh, de = jax.jit(jax.grad(third, argnums=(0, 1)))(h, e)
    want_h, want_e = d_landing_times(h, e)
    np.testing.assert_allclose(float(dh), want_h[-1], rtol=1e-7)
    np.testing.assert_allclose(float(de), want_e[-1], rtol=1e-7)


def test_fit_recovers_the_restitution_from_heights():
    # Heights of a ball with e = 0.75 (closed form, no solver), fitted from e = 0.65 (from
    # e = 0.6 its bounces accumulate at 5.71 s, before the last datum: Status.ZENO).
    e_true, h0 = 0.75, 10.0
    t = np.linspace(0.1, 6.0, 40)
    lands = landing_times(h0, e_true, 30)
    n = np.searchsorted(lands, t, side="right")
    start = np.where(n > 0, lands[np.maximum(n - 1, 0)], 0.0)
    u = np.where(n > 0, e_true**n * np.sqrt(2 * G * h0), 0.0)
    height = np.where(n > 0, 0.0, h0) + u * (t - start) - 0.5 * G * (t - start) ** 2
    data = xr.Dataset({"h": ("time", height)}, coords={"time": t})
    fit = ds.fit(
        ds.models.BouncingBall(e=0.65, v_rest=0.0), data, free={"e": ds.Bounded(0.0, 1.0)},
        t0=0.0, rtol=1e-10, atol=1e-10,
    )  # fmt: skip
    assert fit.status.ok, fit.message
    np.testing.assert_allclose(fit.parameters["e"], e_true, rtol=1e-7)
    assert fit.loss < 1e-12
    assert jnp.isfinite(fit.stderr["e"])
