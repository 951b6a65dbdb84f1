"""Fuzz suite, dense output (`save="dense"`): generated linear systems y' = A y, solved by
explicit, implicit and Rosenbrock methods, their interpolant read at generated times
(step ends, the span's ends, anywhere between) against the exact solution expm(A t) y0.

One compiled solve per solver: the matrix, the initial state, the span and the query
times are traced inputs. Profiles as in tests/fuzz_helpers.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, strategies as st

import difsim as ds

from .fuzz_helpers import fuzz_settings

N_QUERY = 48
TOL = 1e-9


class Linear2(ds.Model):
    """y' = A y for a 2x2 matrix A (entries a, b, c, d by rows)."""

    a: float = -1.0
    b: float = 1.0
    c: float = -1.0
    d: float = -1.0
    x0: float = 1.0
    y0: float = 0.0
    state = ds.State(x=ds.Var(None), y=ds.Var(None))

    def initial_state(self):
        return ds.State(x=self.x0, y=self.y0)

    def rhs(self, t, s):
        return dict(x=self.a * s.x + self.b * s.y, y=self.c * s.x + self.d * s.y)


def _dense_run(solver: str):
    @jax.jit
    def run(model, t1, fractions, pick):
        sol = ds.simulate(model, t0=0.0, t1=t1, save="dense", solver=solver, rtol=TOL,
                          atol=TOL, throw=False, max_steps=4096)  # fmt: skip
        # Query times: fractions of the span, and the ends of generated steps (where the
        # search must pick the step after, and the two polynomials meet).
        ends = sol.dense.t_hi[jnp.minimum(pick, sol.dense.count - 1)]
        times = jnp.concatenate([fractions * t1, ends, jnp.stack([0.0, t1])])
        values = sol.evaluate(times)
        return sol.status, times, jnp.stack([values["x"], values["y"]], axis=-1)

    return run


RUNS = {name: _dense_run(name) for name in ("tsit5", "dopri8", "kvaerno5", "rodas5p")}


@st.composite
def systems(draw):
    """A 2x2 matrix with eigenvalues of negative or small positive real part, oscillating
    or not, stiff (a fast mode down to -500) or not, and an initial state."""
    slow = draw(st.floats(-2.0, 0.3))
    fast = draw(st.one_of(st.floats(-3.0, 0.3), st.floats(-500.0, -20.0)))
    turn = draw(st.floats(0.0, 3.0))  # rotation: complex eigenvalues slow ± i turn
    angle = draw(st.floats(0.0, np.pi))
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    core = np.array([[slow, turn], [-turn, fast]])
    a = rot @ core @ rot.T
    y0 = draw(st.tuples(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0)))
    t1 = draw(st.floats(0.05, 8.0))
    return a, np.asarray(y0), t1


@pytest.mark.parametrize("solver", list(RUNS))
@fuzz_settings(15)
@given(case=systems(), data=st.data())
def test_interpolant_equals_the_exact_solution(solver, case, data):
    a, y0, t1 = case
    fractions = np.asarray(
        data.draw(st.lists(st.floats(0.0, 1.0), min_size=N_QUERY, max_size=N_QUERY))
    )
    pick = np.asarray(data.draw(st.lists(st.integers(0, 200), min_size=8, max_size=8)))
    model = Linear2(a=a[0, 0], b=a[0, 1], c=a[1, 0], d=a[1, 1], x0=y0[0], y0=y0[1])
    status, times, values = RUNS[solver](model, t1, fractions, pick)
    assert int(status) == ds.Status.SUCCESS
    times = np.asarray(times)
    assert np.all((times >= 0.0) & (times <= t1))
    exact = np.stack([scipy.linalg.expm(a * t) @ y0 for t in times])
    scale = 1.0 + np.max(np.abs(exact))
    error = np.max(np.abs(np.asarray(values) - exact)) / scale
    # A tolerance of 1e-9 per step; the interpolant (of order 3 to 7) between them, over
    # up to ~8 time units of a mode growing like exp(0.3 t): within 1e-6 of the scale.
    assert error < 1e-6, (solver, error)


def test_times_outside_the_span_are_refused_eagerly_and_nan_when_traced():
    sol = ds.simulate(Linear2(), t0=0.0, t1=1.0, save="dense")
    with pytest.raises(ValueError, match="lies outside the solved span"):
        sol.evaluate(np.array([0.5, 1.0 + 1e-9]))
    traced = jax.jit(lambda s, t: s.evaluate(t)["x"])(sol, jnp.array([-0.1, 0.5, 1.5]))
    assert np.isnan(traced[0]) and np.isnan(traced[2]) and np.isfinite(traced[1])
