"""Events that change the state, against closed forms: a bouncing ball (landing times a
geometric series in the restitution), repeated oral doses (sums of Bateman functions), zero
crossings of a harmonic oscillator. (The thermostat's period, per-trajectory events under
`vmap` and the record in a Dataset and netCDF: docs/events.md, checked in
test_docs_events.py.)

Solves share save-grid shapes and settings so that each kind of solve compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

TIGHT = dict(rtol=1e-10, atol=1e-10)
BALL = dict(max_events=30, **TIGHT)  # every unbatched ball solve: one compiled function
G, H0 = 9.81, 10.0
TS = np.linspace(0.0, 8.0, 81)  # the ball's save grid (every solve of the ball uses 81 times)


def landing_times(n, h0=H0, g=G, e=0.8):
    """The first `n` landings of a ball dropped from rest: t_1 = sqrt(2 h0 / g), then each
    bounce lasts 2 u / g with the take-off speed u shrinking by e per bounce."""
    t1 = np.sqrt(2 * h0 / g)
    k = np.arange(n)
    return t1 * (1 + 2 * e * (1 - e**k) / (1 - e))


def ball_height(t, h0=H0, g=G, e=0.8):
    """The exact height at times `t` (after the n-th landing: free flight from the floor
    with take-off speed e^n sqrt(2 g h0))."""
    t = np.asarray(t, float)
    lands = landing_times(200, h0, g, e)
    n = np.searchsorted(lands, t, side="right")  # landings so far
    start = np.where(n > 0, lands[np.maximum(n - 1, 0)], 0.0)
    u = np.where(n > 0, e**n * np.sqrt(2 * g * h0), 0.0)
    h = np.where(n > 0, 0.0, h0)
    return h + u * (t - start) - 0.5 * g * (t - start) ** 2


def _ball(**params):
    return ds.models.BouncingBall(**{"v_rest": 0.0, **params})


# ----------------------------------------------------------------------- the bouncing ball
def test_bounce_times_states_and_saved_series_match_the_closed_form():
    sol = ds.simulate(_ball(), t=TS, **BALL)
    assert ds.Status(int(sol.status)) == ds.Status.SUCCESS
    expected = landing_times(20)
    expected = expected[expected <= TS[-1]]
    record = sol.events
    assert int(record.count) == len(expected) == 4
    np.testing.assert_allclose(np.asarray(record.times[:4]), expected, rtol=1e-9)
    assert np.all(np.isnan(np.asarray(record.times[4:])))  # padding
    assert list(np.asarray(record.which[:5])) == [0, 0, 0, 0, -1]
    # Just before each landing the ball falls at e^(n-1) sqrt(2 g h0); the affect reverses
    # and scales that velocity.
    v_in = -np.sqrt(2 * G * H0) * 0.8 ** np.arange(4)
    np.testing.assert_allclose(np.asarray(record.before["v"][:4]), v_in, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(record.after["v"][:4]), -0.8 * v_in, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(record.before["h"][:4]), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(record.of("bounce")[:4]), expected, rtol=1e-9)
    # Saved values across the restarts: the piecewise parabola of the closed form.
    np.testing.assert_allclose(np.asarray(sol.h), ball_height(TS), rtol=0, atol=1e-8)
    np.testing.assert_allclose(float(sol.t_end), TS[-1])


def test_ball_comes_to_rest_with_a_terminal_condition():
    # v_rest: the bounce whose take-off speed falls below it ends the solve (Status.EVENT).
    sol = ds.simulate(_ball(v_rest=0.5), t=TS * 2, **BALL)
    assert ds.Status(int(sol.status)) == ds.Status.EVENT
    v1 = np.sqrt(2 * G * H0)
    n = int(np.ceil(np.log(0.5 / v1) / np.log(0.8)))  # first n with e^n v1 < 0.5
    assert int(sol.events.count) == n
    np.testing.assert_allclose(float(sol.t_end), landing_times(n)[-1], rtol=1e-9)
    np.testing.assert_allclose(float(sol.y_end["v"]), 0.8**n * v1, rtol=1e-7)
    after = TS * 2 > float(sol.t_end)
    assert np.all(np.isnan(np.asarray(sol.h)[after])) and not np.any(np.isnan(sol.h[~after]))


def test_jit_of_a_solve_whose_events_change_the_state():
    # jax.jit straight over simulate, the drop height and restitution traced: one compiled
    # function, whose record and saved series follow the closed form for each.
    @jax.jit
    def solve(h0, e):
        return ds.simulate(_ball(e=e).replace(**{"state.h": h0}), t=TS, **BALL)

    for h0, e in [(10.0, 0.8), (4.0, 0.9)]:
        sol = solve(h0, e)
        expected = landing_times(40, h0=h0, e=e)
        n = int(np.sum(expected <= TS[-1]))
        assert int(sol.events.count) == n and ds.Status(int(sol.status)) == ds.Status.SUCCESS
        np.testing.assert_allclose(np.asarray(sol.events.times[:n]), expected[:n], rtol=1e-9)
        np.testing.assert_allclose(np.asarray(sol.h), ball_height(TS, h0=h0, e=e), atol=1e-8)
    assert solve._cache_size() == 1


def test_vmap_gives_each_trajectory_its_own_root_found_events():
    # Restitutions e under vmap, each ball at rest (Status.EVENT) after its own number of
    # bounces: the first n with e^n v1 < v_rest (v1 = g t1 = sqrt(2 g h0) the first impact
    # speed), n = ceil(log(v_rest / (g t1)) / log(e)); the k-th landing at
    # t_k = t1 (1 + 2 e (1 - e^(k-1)) / (1 - e)).
    es, v_rest = np.array([0.5, 0.7, 0.9]), 1.0
    ts = np.linspace(0.0, 30.0, 31)
    sols = jax.vmap(lambda e: ds.simulate(_ball(e=e, v_rest=v_rest), t=ts, **BALL))(es)
    t1 = np.sqrt(2 * H0 / G)
    counts = np.ceil(np.log(v_rest / (G * t1)) / np.log(es)).astype(int)
    assert list(counts) == [4, 8, 26]  # as many bounces as the cap (30) allows, and no more
    np.testing.assert_array_equal(np.asarray(sols.events.count), counts)
    assert np.all(np.asarray(sols.status) == int(ds.Status.EVENT))
    for i, (e, n) in enumerate(zip(es, counts)):
        times = np.asarray(sols.events.times[i])
        np.testing.assert_allclose(times[:n], landing_times(n, e=e), rtol=1e-9)
        assert np.all(np.isnan(times[n:]))
        speeds = G * t1 * e ** np.arange(1, n + 1)  # take-off speeds after each bounce
        np.testing.assert_allclose(np.asarray(sols.events.after["v"][i, :n]), speeds, rtol=1e-7)
        np.testing.assert_allclose(float(sols.t_end[i]), landing_times(n, e=e)[-1], rtol=1e-9)


def test_zeno_ball_stops_at_the_event_cap_with_its_state():
    # e < 1: infinitely many bounces before t_inf = t_1 (1 + e) / (1 - e) = 12.85 s. The
    # cap ends the solve at the first bounce over it, with the state just before it.
    ts = np.linspace(0.0, 20.0, 81)
    sol = ds.simulate(_ball(), t=ts, throw=False, **BALL)
    assert ds.Status(int(sol.status)) == ds.Status.EVENT_LIMIT
    assert int(sol.events.count) == 30
    t31 = landing_times(31)[-1]
    np.testing.assert_allclose(float(sol.t_end), t31, rtol=1e-9)
    np.testing.assert_allclose(float(sol.y_end["v"]), -(0.8**30) * np.sqrt(2 * G * H0), rtol=1e-6)
    assert abs(float(sol.y_end["h"])) < 1e-9
    assert np.all(np.isnan(np.asarray(sol.h)[ts >= t31]))
    np.testing.assert_allclose(np.asarray(sol.h)[ts < t31], ball_height(ts[ts < t31]), atol=1e-8)
    assert "max_events" in sol.message() and not sol.ok
    with pytest.raises(Exception, match=r"EVENT_LIMIT"):
        ds.simulate(_ball(), t=ts, **BALL).h.block_until_ready()


# -------------------------------------------------------------------- scheduled (time) events
def bateman(t, doses, ka, ke, V, D):
    """Plasma concentration after oral doses at `doses` (superposed Bateman functions)."""
    t = np.asarray(t)[:, None]
    dt = t - np.asarray(doses)[None, :]
    one = D * ka / (V * (ka - ke)) * (np.exp(-ke * dt) - np.exp(-ka * dt))
    return np.sum(np.where(dt >= 0, one, 0.0), axis=1)


def test_repeated_doses_follow_the_bateman_sum_and_save_the_right_limit():
    m = ds.models.OralDosing()
    ka, ke, V, D = (float(getattr(m, k)) for k in ("ka", "ke", "V", "dose"))
    ts = np.linspace(0.0, 48.0, 97)  # holds every dose time 0, 12, 24, 36, 48
    sol = ds.simulate(m, t=ts, **TIGHT)
    assert int(sol.events.count) == 5  # a dose at t1 = 48 too: times in [t0, t1]
    np.testing.assert_allclose(np.asarray(sol.events.times[:5]), [0, 12, 24, 36, 48])
    conc = np.asarray(sol.central) / V
    np.testing.assert_allclose(conc, bateman(ts, [0, 12, 24, 36, 48], ka, ke, V, D), atol=1e-9)
    # At a dose time the saved state is the one just after the dose (right-continuous).
    gut_12 = D * (1 + np.exp(-ka * 12.0))
    np.testing.assert_allclose(float(sol.gut[24]), gut_12, rtol=1e-9)
    np.testing.assert_allclose(
        float(sol.events.before["gut"][1]), D * np.exp(-ka * 12.0), atol=1e-9
    )
    np.testing.assert_allclose(float(sol.gut[-1]), D * sum(np.exp(-ka * 12.0 * np.arange(5))))
    np.testing.assert_allclose(np.asarray(m.concentration(ts)), conc, atol=1e-9)


class Decay(ds.Model):
    """y' = -k y, topped up by scheduled events (a test model)."""

    k: float = 1.0
    state = ds.State(y=1.0)
    events = (
        ds.TimeEvent([0.5, 1.5], affect=lambda t, s, m: dict(y=s.y + 1.0), name="listed"),
        ds.TimeEvent(every=0.5, start=1.0, stop=2.0, affect=lambda t, s, m: dict(y=2 * s.y)),
        ds.TimeEvent([1.5], affect=lambda t, s, m: dict(y=s.y - 0.25), name="late"),
    )

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)


def test_listed_periodic_and_simultaneous_time_events():
    sol = ds.simulate(Decay(), t0=0.0, t1=3.0, save=[0.5, 1.5, 3.0], **TIGHT)
    # Hand-computed: decay e^{-Δt} between events; at 1.5 three events in declaration
    # order (+1, ×2, -0.25); the periodic one at 1.0, 1.5, 2.0 (stop is inclusive).
    y, t, expect = 1.0, 0.0, []
    for when, change in [(0.5, "+1"), (1.0, "x2"), (1.5, "+1"), (1.5, "x2"), (1.5, "-1/4"),
                         (2.0, "x2")]:  # fmt: skip
        y *= np.exp(-(when - t))
        y = {"+1": y + 1, "x2": 2 * y, "-1/4": y - 0.25}[change]
        t = when
        expect.append(y)
    names = [sol.events.names[i] for i in np.asarray(sol.events.which[:6])]
    assert names == ["listed", "event1", "listed", "event1", "late", "event1"]
    np.testing.assert_allclose(np.asarray(sol.events.after["y"][:6]), expect, rtol=1e-9)
    np.testing.assert_allclose(float(sol.y[1]), expect[4], rtol=1e-9)  # after all three
    np.testing.assert_allclose(float(sol.y[-1]), expect[-1] * np.exp(-1.0), rtol=1e-9)


# --------------------------------------------------------------------- root-found switching
def test_crossings_are_recorded_once_in_both_directions():
    # An event with no affect and terminal=False only records (a Poincaré section). x =
    # cos t crosses zero at pi/2 + k pi; restarting on the zero must not count it twice.
    osc = ds.models.HarmonicOscillator(zeta=0.0, omega=1.0)
    cross = ds.Event(lambda t, s, m: s.x, terminal=False, name="x_zero")
    sol = ds.simulate(osc, t0=0.0, t1=10.0, save=11, event=cross, **TIGHT)
    expected = np.pi / 2 + np.pi * np.arange(3)
    assert ds.Status(int(sol.status)) == ds.Status.SUCCESS and int(sol.events.count) == 3
    np.testing.assert_allclose(np.asarray(sol.events.times[:3]), expected, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(sol.x), np.cos(np.linspace(0, 10, 11)), atol=1e-8)
    np.testing.assert_allclose(np.asarray(sol.events.before["v"][:3]), [-1, 1, -1], rtol=1e-8)


# ------------------------------------------------------------------------------- outputs
def test_sweep_runs_events_on_the_diffrax_engine():
    es = np.array([0.75, 0.9])
    # One device: the diffrax engine's vmapped loops, partitioned over the suite's 8 fake
    # CPU devices, would synchronise them at every step (slow, and not what is tested).
    times = dict(t0=0.0, t1=float(TS[-1]), save=TS, devices=jax.devices()[:1])
    out = ds.sweep(_ball(), ds.GridSweep({"e": es}), **times, keep="trajectory", **TIGHT)
    assert out.attrs["engine"] == "diffrax" and "has events" in out.attrs["engine_fallback"]
    for i, e in enumerate(es):
        np.testing.assert_allclose(out.h.values[i], ball_height(TS, e=e), atol=1e-8)
    with pytest.raises(ValueError, match="BouncingBall has events"):
        ds.sweep(_ball(), ds.GridSweep({"e": es}), **times, engine="ensemble")
    with pytest.raises(ValueError, match="has events"):
        ds.simulate_ensemble(_ball(), {"e": es}, t=TS)


# -------------------------------------------------------------------------- clear errors
class Plain(ds.Model):
    state = ds.State(x=1.0, v=jnp.zeros(2))

    def rhs(self, t, s):
        return dict(x=-s.x, v=-s.v)


@pytest.mark.parametrize(
    "event, error, match",
    [
        (ds.Event(lambda t, s, m: s.x, lambda t, s, m: dict(z=0.0)), ValueError,
         r"returned 'z', which is not a state variable of Plain"),
        (ds.Event(lambda t, s, m: s.x, lambda t, s, m: dict(v=jnp.zeros(3))), ValueError,
         r"returned shape \(3,\) for state variable 'v', whose shape is \(2,\)"),
        (ds.Event(lambda t, s, m: s.v), ValueError, r"must return a real or boolean scalar"),
        # A dict or None used to reach JAX ("... is not a valid JAX array type"): issue 27.
        (ds.Event(lambda t, s, m: dict(x=s.x), name="floor"), TypeError,
         r"^the condition of event 'floor' \(Plain\) returned a dict; it must return one "
         r"real \(or boolean\) scalar"),
        (ds.Event(lambda t, s, m: None), TypeError,
         r"^the condition of event 'event0' \(Plain\) returned None; it must return one real"),
        (ds.Event(lambda t, s, m: s.x, lambda t, s, m: s.x), TypeError, "must return a dict"),
        ([ds.Event(lambda t, s, m: s.x, name="a"), ds.Event(lambda t, s, m: s.x, name="a")],
         ValueError, "two events are called 'a'"),
    ],
)  # fmt: skip
def test_bad_events_name_the_culprit(event, error, match):
    with pytest.raises(error, match=match):
        ds.simulate(Plain(), t0=0.0, t1=1.0, save="final", event=event)


def test_bad_declarations_and_options():
    with pytest.raises(ValueError, match="direction must be 'up', 'down' or 'both'"):
        ds.Event(lambda t, s, m: s.x, direction="upward")
    with pytest.raises(ValueError, match="either times .* or every"):
        ds.TimeEvent([1.0], every=2.0)
    with pytest.raises(ValueError, match="every must be a positive period"):
        ds.TimeEvent(every=0.0)
    with pytest.raises(ValueError, match="strictly increasing"):
        ds.TimeEvent([2.0, 1.0])
    with pytest.raises(ValueError, match="max_events must be at least 1"):
        ds.simulate(_ball(), t=TS, max_events=0)
    with pytest.raises(ValueError, match=r"backsolve' cannot differentiate a solve with events"):
        ds.simulate(_ball(), t=TS, adjoint="backsolve")
