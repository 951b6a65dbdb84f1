"""Fuzzing events (issue 27): generated bouncing balls (drop height, gravity, restitution
in [0, 1), tolerance, an end time before or after the Zeno time where the landings
accumulate) and conditions that turn NaN or infinite. Every solve either follows the
closed form or ends with a status saying why; none returns SUCCESS past a lost floor or
with a non-finite condition.

One compiled solve for every case (the parameters, the tolerance and the end time are
traced), one more for batches under `vmap` (what sweeps run). Profiles as in
tests/fuzz_helpers.py: derandomized in CI, `HYPOTHESIS_PROFILE=long` for more.
"""

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import example, given, strategies as st

import difsim as ds

from .fuzz_helpers import fuzz_settings

S = ds.Status
CAP = 80  # events per solve: enough for most restitutions to reach their Zeno time
SAVES = 21


def _floor(t, s, m):
    # The floor, or a NaN/inf from t_bad on (inf: never).
    return jnp.where(t >= m.t_bad, m.bad, s.h)


def _bounce(t, s, m):
    return dict(v=-m.e * s.v)


class FuzzBall(ds.Model):
    g: float = 9.81
    e: float = 0.8
    t_bad: float = jnp.inf
    bad: float = jnp.nan
    state = ds.State(h=10.0, v=0.0)
    events: ClassVar = (ds.Event(_floor, _bounce, direction="down", name="bounce"),)

    def rhs(self, t, s):
        return dict(h=s.v, v=-self.g * jnp.ones_like(s.v))


def _solve(h0, g, e, t1, tol, t_bad, bad):
    ball = FuzzBall(g=g, e=e, t_bad=t_bad, bad=bad).replace(**{"state.h": h0})
    return ds.simulate(ball, t0=0.0, t1=t1, save=SAVES, rtol=tol, atol=tol, max_events=CAP,
                       throw=False)  # fmt: skip


solve = jax.jit(_solve)
solve_batch = jax.jit(jax.vmap(_solve))


def landings(n, h0, g, e):
    """The first `n` landing times: t_1 = sqrt(2 h0 / g), then flights 2 e^k t_1."""
    t1 = np.sqrt(2 * h0 / g)
    k = np.arange(n)
    return t1 * (1 + 2 * np.cumsum(np.where(k > 0, e**k, 0.0)))


def zeno_time(h0, g, e):
    return np.sqrt(2 * h0 / g) * (1 + e) / (1 - e)


def res(t, tol):
    return tol * (1 + np.abs(t))  # the root finder's tolerance on time


CASES = st.fixed_dictionaries(
    dict(
        h0=st.floats(1e-3, 100.0),
        g=st.floats(0.1, 100.0),
        e=st.one_of(st.just(0.0), st.floats(0.0, 0.99)),
        tol=st.sampled_from([1e-5, 1e-6, 1e-8, 1e-10, 1e-12]),
        beyond=st.floats(0.3, 2.0),  # t1 / t_inf
        t_bad=st.one_of(st.just(np.inf), st.floats(-0.1, 1.1)),  # fraction of t1
        bad=st.sampled_from([np.nan, np.inf, -np.inf]),
    )
)


def check(case, sol):
    """The rules every solve keeps (see the module docstring)."""
    h0, g, e, tol = case["h0"], case["g"], case["e"], case["tol"]
    t_inf = zeno_time(h0, g, e)
    t1 = case["beyond"] * t_inf
    t_bad = case["t_bad"] * t1
    status, n = S(int(sol.status)), int(sol.events.count)
    t_end, h = float(sol.t_end), np.asarray(sol.h)
    floor = 10 * tol * max(1.0, h0)
    # Never below the floor: neither the saved series nor where the solve stopped.
    assert np.all(np.isnan(h) | (h > -floor)), (status.name, np.nanmin(h))
    assert float(sol.y_end["h"]) > -floor, (status.name, float(sol.y_end["h"]))
    # Every recorded landing is where the closed form has it.
    times, expected = np.asarray(sol.events.times[:n]), landings(n, h0, g, e)
    assert np.all(np.abs(times - expected) <= res(expected, tol)), (status.name, times - expected)
    if t_bad <= min(t1, t_end):  # the condition was NaN/inf where the solve went
        assert status == S.NONFINITE, status.name
    if status == S.NONFINITE:
        assert t_bad <= t1 and t_end <= max(t_bad, 0.0) + 1e-12, (t_bad, t_end)
        return
    assert t_bad > t_end
    if t1 > t_inf + 200 * res(t_inf, tol):  # past the Zeno time: no solve can get there
        assert status in (S.ZENO, S.EVENT_LIMIT), status.name
    if status == S.ZENO:
        # Near where the landings accumulate (past it: e = 0 re-fires where Newton's method
        # stops on the zero of h = -g t^2 / 2, ~3e-8 s at tol 1e-10).
        assert abs(t_end - t_inf) < 200 * res(t_inf, tol), t_end - t_inf
    elif status == S.EVENT_LIMIT:
        assert n == CAP and t_end < t_inf
    else:
        assert status == S.SUCCESS, status.name
        # As many landings as the closed form has before t1 (one at t1 may count or not).
        lands = np.unique(landings(CAP + 1, h0, g, e))
        r = res(t1, tol)
        assert t_end == np.float64(t1) and np.sum(lands < t1 - r) <= n <= np.sum(lands <= t1 + r)
    # Well before the Zeno time, and resolvable spacings: SUCCESS, or the cap.
    n_before = int(np.sum(landings(CAP + 2, h0, g, e) <= t1))
    last = np.diff(landings(n_before + 1, h0, g, e))[-1:] if n_before > 1 else [np.inf]
    if t_inf - t1 > 100 * res(t1, tol) and last[0] > 100 * res(t1, tol):
        assert status == (S.SUCCESS if n_before <= CAP else S.EVENT_LIMIT), status.name


def _args(case):
    t1 = case["beyond"] * zeno_time(case["h0"], case["g"], case["e"])
    return (case["h0"], case["g"], case["e"], t1, case["tol"], case["t_bad"] * t1, case["bad"])


ISSUE = dict(h0=10.0, g=9.81, e=0.8, tol=1e-10, beyond=20.0 / 12.850588, t_bad=np.inf, bad=0.0)


@fuzz_settings(60)
@example(ISSUE)
@example({**ISSUE, "e": 0.0})
@example({**ISSUE, "t_bad": 0.0, "bad": np.nan})
@given(CASES)
def test_generated_balls_keep_the_floor_or_say_why(case):
    check(case, solve(*_args(case)))


@fuzz_settings(8)
@given(st.lists(CASES, min_size=4, max_size=4))
def test_generated_balls_under_vmap_each_keep_their_own_verdict(cases):
    args = [jnp.asarray(column) for column in zip(*(_args(c) for c in cases))]
    sols = solve_batch(*args)
    for i, case in enumerate(cases):
        check(case, jax.tree.map(lambda x: x[i], sols))
