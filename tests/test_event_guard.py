"""Where event detection fails, a status, never a wrong SUCCESS (issue 27, point 2;
src/difsim/_core/_event_guard.py).

The bouncing ball of the issue (h0 = 10, g = 9.81, e = 0.8, the event on h going down,
rtol = atol = 1e-10, t in [0, 20]) used to return SUCCESS after 99 bounces with h(20) =
-251 m: its landings accumulate at t_inf = t_1 (1 + e) / (1 - e) = 12.8506 s (t_1 =
sqrt(2 h0 / g)), and once their spacing fell below the root finder's resolution a root was
found at the wrong crossing and the ball fell through the floor. Now such a solve stops
with Status.ZENO at t_inf; a crossing lost otherwise is Status.EVENT_LOST; a NaN or
infinite condition is Status.NONFINITE (it used to be SUCCESS, or LINEAR_SOLVER).
"""

import functools

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._core._event import Event
from difsim._core._event_guard import Watch, accumulates, lost, resolution

from .test_events import ball_height, landing_times

G, H0 = 9.81, 10.0
S = ds.Status


def zeno_time(h0=H0, g=G, e=0.8):
    """Where the landings accumulate: t_1 + sum of the flights 2 e^k v_1 / g, k >= 1."""
    t1 = np.sqrt(2 * h0 / g)
    return t1 * (1 + e) / (1 - e)


def res(t, tol):
    return tol + tol * abs(t)  # the root finder's tolerance on time (rtol = atol = tol)


@functools.cache
def solver(cap):
    """One compiled solve per event cap; restitution, end time and tolerance traced."""

    @jax.jit
    def solve(e, t1, tol):
        ball = ds.models.BouncingBall(e=e, v_rest=0.0)
        return ds.simulate(
            ball, t0=0.0, t1=t1, save="final", rtol=tol, atol=tol, max_events=cap, throw=False
        )

    return solve


# Before this guard: SUCCESS with h(t1) < 0 for rows 1, 3, 6, 7 (h = -251, -251, -251,
# -27 m), EVENT_LIMIT for 2, 4, 5; row 8 ends before t_inf.
SETTINGS = [
    (0.8, 1e-10, 100, 20.0, S.ZENO),  # the case
    (0.8, 1e-10, 20, 20.0, S.EVENT_LIMIT),  # the cap comes first (the docs' example)
    (0.8, 1e-6, 100, 20.0, S.ZENO),
    (0.5, 1e-10, 100, 20.0, S.ZENO),
    (0.9, 1e-10, 100, 40.0, S.EVENT_LIMIT),  # 180 bounces to resolve: the cap first
    (0.8, 1e-8, 1000, 20.0, S.ZENO),
    (0.8, 1e-12, 1000, 20.0, S.ZENO),
    (0.3, 1e-10, 100, 5.0, S.ZENO),
    (0.8, 1e-10, 100, 12.0, S.SUCCESS),  # t1 < t_inf: 12 landings, all resolved
]


@pytest.mark.parametrize("e, tol, cap, t1, status", SETTINGS)
def test_a_ball_past_its_zeno_time_never_falls_through_the_floor(e, tol, cap, t1, status):
    sol = solver(cap)(e, t1, tol)
    n = int(sol.events.count)
    assert S(int(sol.status)) == status, (S(int(sol.status)).name, n)
    times = np.asarray(sol.events.times[:n])
    expected = landing_times(n, e=e)
    # Every recorded landing is where the closed form has it, to the root finder's tolerance.
    assert np.all(np.abs(times - expected) <= res(expected, tol)), np.max(np.abs(times - expected))
    t_end, h_end = float(sol.t_end), float(sol.y_end["h"])
    t_inf = zeno_time(e=e)
    if status == S.ZENO:
        # Stopped within a few resolutions of where the landings accumulate, on the floor.
        assert t_inf - 100 * res(t_inf, tol) < t_end <= t_inf + res(t_inf, tol)
        assert -10 * tol < h_end < 10 * tol
    elif status == S.EVENT_LIMIT:
        assert n == cap and t_end < t_inf
        np.testing.assert_allclose(t_end, landing_times(cap + 1, e=e)[-1], rtol=1e-9)
    else:
        assert n == np.sum(landing_times(40, e=e) <= t1) == 12
        assert t_end == t1
        np.testing.assert_allclose(h_end, ball_height([t1], e=e)[0], atol=1e-8)


def test_the_zeno_status_raises_with_its_message_and_keeps_the_series_before_it():
    ts = np.linspace(0.0, 20.0, 801)
    ball = ds.models.BouncingBall(v_rest=0.0)
    sol = ds.simulate(ball, t=ts, rtol=1e-10, atol=1e-10, throw=False)
    assert S(int(sol.status)) == S.ZENO and not sol.ok
    before = ts < float(sol.t_end)
    np.testing.assert_allclose(np.asarray(sol.h)[before], ball_height(ts[before]), atol=1e-8)
    assert np.all(np.isnan(np.asarray(sol.h)[~before]))  # never h < 0 after t_inf
    assert "Zeno" in sol.message()
    with pytest.raises(Exception, match=r"ZENO.*accumulate in finite time"):
        ds.simulate(ball, t=ts, rtol=1e-10, atol=1e-10).h.block_until_ready()


def test_a_ball_that_does_not_bounce_is_zeno_at_its_first_landing():
    # e = 0: the ball lands and stays; the condition stays on its zero (rate 0) and gravity
    # takes it across at once. It used to start the next pass below the floor and fall
    # (SUCCESS, h(3) = -12.1 m). A tiny e (1e-200) is the same to within the resolution.
    t1 = np.sqrt(2 * H0 / G)
    for e in (0.0, 1e-200):
        sol = solver(100)(e, 3.0, 1e-10)
        assert S(int(sol.status)) == S.ZENO and int(sol.events.count) == 1
        np.testing.assert_allclose(float(sol.t_end), t1, rtol=1e-12)
        np.testing.assert_allclose(float(sol.events.times[0]), t1, rtol=1e-12)
        assert abs(float(sol.y_end["h"])) < 1e-12 and abs(float(sol.y_end["v"])) < 1e-150


def test_a_sweep_gets_the_status_per_trajectory():
    # Sweeps of event models run simulate's hybrid solve under vmap: each lane its own
    # verdict. t_inf = 4.28, 12.85 and 27.13 s: the first two stop there, the third is
    # still bouncing at t1 = 20 s (13 landings, h(20) as the closed form).
    es = [0.5, 0.8, 0.9]
    out = ds.sweep(
        ds.models.BouncingBall(v_rest=0.0), ds.GridSweep({"e": es}), t0=0.0, t1=20.0,
        save="final", keep="final", rtol=1e-10, atol=1e-10, progress=False,
        devices=jax.devices()[:1],
    )  # fmt: skip
    assert list(out.status.values) == [int(S.ZENO), int(S.ZENO), int(S.SUCCESS)]
    np.testing.assert_allclose(out.t_end.values[:2], [zeno_time(e=0.5), zeno_time()], rtol=1e-7)
    assert int(out.event_count.values[2]) == 13
    np.testing.assert_allclose(float(out.h.values[2]), ball_height([20.0], e=0.9)[0], atol=1e-8)


# ------------------------------------------------------------------ lost crossings
class Line(ds.Model):
    """x' = 1 from 0 (x = t), and a counter n that only events change."""

    state = ds.State(x=0.0, n=0.0)

    def rhs(self, t, s):
        return dict(x=jnp.ones_like(s.x), n=jnp.zeros_like(s.n))


LINE_EVENTS = [  # "late" declared first
    ds.Event(lambda t, s, m: 0.7 - s.x, lambda t, s, m: dict(n=10 * s.n), direction="down",
             name="late"),
    ds.Event(lambda t, s, m: 0.3 - s.x, lambda t, s, m: dict(n=s.n + 1), direction="down",
             name="early"),
]  # fmt: skip


def test_an_earlier_crossing_in_the_same_step_is_lost_not_skipped():
    # One step [0, 1] holds both crossings; diffrax locates the first declared ("late",
    # t = 0.7) although "early" crossed first (t = 0.3). It used to skip "early" (SUCCESS,
    # one event, n(1) = 0 instead of (0 + 1) * 10 = 10); now the solve stops at 0.7 with
    # EVENT_LOST, and the values it saved past the lost crossing are blanked.
    ts = np.linspace(0.0, 1.0, 11)
    sol = ds.simulate(Line(), t=ts, event=LINE_EVENTS, dt0=1.0, rtol=1e-8, atol=1e-8,
                      throw=False)  # fmt: skip
    assert S(int(sol.status)) == S.EVENT_LOST and int(sol.events.count) == 0
    np.testing.assert_allclose(float(sol.t_end), 0.7, rtol=1e-9)
    assert np.all(np.isnan(np.asarray(sol.n)))
    # Short steps see both, in order: n(1) = 10.
    pid = dfx.PIDController(rtol=1e-8, atol=1e-8, dtmax=0.1)
    sol = ds.simulate(Line(), t=ts, event=LINE_EVENTS, dt0=0.1, controller=pid)
    assert S(int(sol.status)) == S.SUCCESS
    np.testing.assert_allclose(np.asarray(sol.events.times[:2]), [0.3, 0.7], rtol=1e-9)
    assert list(np.asarray(sol.events.which[:2])) == [1, 0] and float(sol.n[-1]) == 10.0


def test_lost_sees_a_crossing_beyond_the_resolution_or_at_the_wrong_root():
    down, up = Event(lambda t, s, m: s, direction="down"), Event(lambda t, s, m: s, direction="up")
    both = Event(lambda t, s, m: s)
    events = (down, up, both)
    start = jnp.array([1.0, -1.0, 1.0])
    f = lambda values, rates, slot=0, fired=False: bool(  # noqa: E731
        lost(events, start, jnp.array(values), jnp.array(rates), slot, fired, 1e-6)
    )
    assert not f([0.5, -0.5, -0.5], [-1.0, 1.0, -1.0])  # none crossed (both: no direction)
    assert f([-0.5, -0.5, 0.5], [-1.0, 1.0, 1.0])  # down crossed 0.5 s ago
    assert f([0.5, 0.5, 0.5], [1.0, 1.0, 1.0])  # up crossed
    assert not f([-1e-7, -0.5, 0.5], [-1.0, 1.0, 1.0])  # within the resolution: same time
    assert not f([-0.5, -0.5, 0.5], [-1.0, 1.0, 1.0], 0, True)  # the one that fired
    assert f([0.0, -0.5, 0.5], [1.0, 1.0, 1.0], 0, True)  # fired moving up: a wrong root
    assert not f([0.5, 0.0, 0.5], [1.0, 1.0, 1.0], 1, True)  # up fired moving up


def test_accumulates_flags_a_geometric_sequence_and_not_a_periodic_one():
    def first_flag(times, tol=1e-10):
        watch = Watch.empty(1, jnp.float64)
        finder = dict(rtol=tol, atol=tol)
        for k, t in enumerate(times):
            r = resolution(type("F", (), finder), jnp.asarray(t))
            zeno, watch = accumulates(watch, 0, jnp.asarray(t), r)
            if zeno:
                return k
        return None

    # Landings of the ball at e = 0.8: flagged once the spacing 2 t_1 e^k is within 10
    # resolutions (1.4e-9 s): k = 86, as the solve does.
    lands = landing_times(200)
    k = first_flag(lands)
    spacing = np.diff(lands)
    assert spacing[k - 1] < 10 * res(lands[k], 1e-10) <= spacing[k - 2]
    # A periodic event with noisy spacings at 3 resolutions: no accumulation.
    rng = np.random.default_rng(0)
    periodic = 1.0 + np.cumsum(4e-9 + 1e-10 * rng.standard_normal(300))
    assert first_flag(periodic) is None
    assert first_flag([1.0, 1.0, 1.0]) == 2  # two in a row with no time between


# ------------------------------------------------------------------ non-finite conditions
def _variants(t, s, m):
    """The conditions tried, by `m.kind`; before this guard (with pid): 0, 1 and 4 gave
    LINEAR_SOLVER in both directions; 2, 3, 5 SUCCESS (no event); "down" made all SUCCESS."""
    x = s.x
    return jnp.stack(
        [
            jnp.nan * x,  # NaN from the start
            jnp.log(x - 2.0),  # NaN from the start (x < 2)
            jnp.inf + 0 * x,  # infinite from the start
            -jnp.inf + 0 * x,
            jnp.where(t > 0.4, jnp.nan, x - 0.1),  # NaN from t = 0.4 on
            jnp.where(t > 0.4, jnp.inf, x - 0.1),
        ]
    )[m.kind]


class Decay(ds.Model):
    kind: int = 0
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=-s.x)


@pytest.mark.parametrize("direction, controller", [(None, "pid"), ("down", "pid"),
                                                   ("down", "constant")])  # fmt: skip
def test_a_nan_or_infinite_condition_is_nonfinite(direction, controller):
    event = ds.Event(_variants, lambda t, s, m: dict(x=0.5 * s.x), direction=direction)
    kinds = jnp.arange(6)
    sols = jax.vmap(
        lambda k: ds.simulate(
            Decay(kind=k),
            t0=0.0,
            t1=1.0,
            save=11,
            event=event,
            throw=False,
            controller=controller,
            dt0=0.01,
        )  # fmt: skip
    )(kinds)
    assert list(np.asarray(sols.status)) == [int(S.NONFINITE)] * 6
    assert list(np.asarray(sols.events.count)) == [0] * 6
    t_end = np.asarray(sols.t_end)
    if controller == "pid":  # every step is checked: it stops where the condition turns
        np.testing.assert_array_equal(t_end[:4], 0.0)
        np.testing.assert_allclose(t_end[4:], 0.4, atol=1e-9)
    else:  # checked where the pass ends (here t1) only
        np.testing.assert_array_equal(t_end[:4], 0.0)
        assert np.all(t_end[4:] <= 1.0)
