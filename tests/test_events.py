"""Events that change the state, against closed forms: a bouncing ball (landing times a
geometric series in the restitution), repeated oral doses (sums of Bateman functions), a
thermostat (its switching period), zero crossings of a harmonic oscillator.

Solves share save-grid shapes and settings so that each kind of solve compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

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


def test_vmap_gives_each_trajectory_its_own_events_and_the_dataset_pads():
    # Restitutions whose bounces accumulate after t = 8 (t_inf > 8 for e > 0.7).
    es = jnp.array([0.75, 0.85, 0.95])
    sols = jax.vmap(lambda e: ds.simulate(_ball(e=e), t=TS, **TIGHT))(es)
    counts = [int(np.sum(landing_times(40, e=float(e)) <= TS[-1])) for e in es]
    assert list(np.asarray(sols.events.count)) == counts == [6, 4, 3]
    for i, e in enumerate(np.asarray(es)):
        got = np.asarray(sols.events.times[i, : counts[i]])
        np.testing.assert_allclose(got, landing_times(counts[i], e=e), rtol=1e-9)
        np.testing.assert_allclose(np.asarray(sols.h[i]), ball_height(TS, e=e), atol=1e-8)
    data = sols.to_xarray(batch_dims=["e"], batch_coords={"e": es})
    assert data.sizes["event"] == 6  # the most events any trajectory had
    assert data["event_time"].dims == ("e", "event")
    assert list(data["event_count"].values) == counts
    assert np.isnan(data["event_time"].values[1, 4]) and data["event_type"].values[1, 4] == -1
    assert data["v_after_event"].attrs["units"] == "m/s"


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
def test_thermostat_switches_with_the_analytic_period():
    m = ds.models.Thermostat()
    sol = ds.simulate(m, t0=0.0, t1=30.0, save=61, **TIGHT)
    n = int(sol.events.count)
    times = np.asarray(sol.events.times[:n])
    names = [sol.events.names[i] for i in np.asarray(sol.events.which[:n])]
    assert names == ["off", "on"] * (n // 2) + ["off"] * (n % 2)
    k, t_out, p = 0.1, 5.0, 3.0
    t_inf = t_out + p / k
    first = np.log((t_inf - 20.0) / (t_inf - 21.0)) / k  # heating from 20 to 21
    cool = np.log((21.0 - t_out) / (19.0 - t_out)) / k
    heat = np.log((t_inf - 19.0) / (t_inf - 21.0)) / k
    np.testing.assert_allclose(times[0], first, rtol=1e-9)
    np.testing.assert_allclose(np.diff(times)[0::2], cool, rtol=1e-8)
    np.testing.assert_allclose(np.diff(times)[1::2], heat, rtol=1e-8)
    np.testing.assert_allclose(float(m.period()), cool + heat)
    np.testing.assert_allclose(np.asarray(sol.events.before["T"][:n:2]), 21.0, atol=1e-9)
    assert set(np.asarray(sol.q)) <= {0.0, 1.0}


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
def test_event_record_in_the_dataset_and_netcdf(tmp_path):
    sol = ds.simulate(ds.models.Thermostat(), t0=0.0, t1=30.0, save=61, **TIGHT)
    data = sol.to_xarray()
    n = int(sol.events.count)
    assert data.sizes["event"] == n and data.attrs["events"] == "off on"
    assert data["event_type"].attrs["flag_meanings"] == "off on"
    assert data["event_time"].attrs["units"] == "h"
    assert data["T_before_event"].dims == ("event",)
    np.testing.assert_allclose(
        data["q_after_event"].values, [0.0, 1.0] * (n // 2) + [0.0] * (n % 2)
    )
    path = tmp_path / "thermostat.nc"
    data.to_netcdf(path)
    with xr.open_dataset(path) as back:
        xr.testing.assert_identical(back.load(), data)


def test_the_ensemble_engine_refuses_events():
    # (A sweep of an event model on the diffrax engine, its fallback and its results
    # against the Bateman sums: docs/events.md, checked in test_docs_events.py.)
    es = np.array([0.75, 0.9])
    with pytest.raises(ValueError, match="BouncingBall has events"):
        ds.sweep(_ball(), ds.GridSweep({"e": es}), t0=0.0, t1=1.0, engine="ensemble")
    with pytest.raises(ValueError, match="has events"):
        ds.simulate_ensemble(_ball(), {"e": es}, t0=0.0, t1=1.0)


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
