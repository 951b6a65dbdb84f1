"""A right-hand side that turns NaN/inf stops the solve where it happens with
`Status.NONFINITE` (issue 14, point 7): alone, under `vmap` (one status per lane) and in
sweeps, with healthy lanes bitwise as diffrax computes them without the guard."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import difsim as ds
from difsim._core._nonfinite import MAX_NONFINITE_TRIES, NonfiniteGuard
from difsim.models import VanDerPol

TS = np.linspace(0.0, 3.0, 13)
MAX_STEPS = 16_384
NONFINITE = int(ds.Status.NONFINITE)


class Poisoned(ds.Model):
    """x' = -x until t = t_bad, NaN from there on: x = exp(-t) while it is defined."""

    t_bad: float = 1.3
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=jnp.where(t < self.t_bad, -s.x, jnp.nan))


class LogOfZero(ds.Model):
    """x' = -1, y' = log x from x = 1: x reaches 0 at t = 1, where log x = -inf, and is
    NaN beyond. y = (1 - t) - (1 - t) log(1 - t) - 1 before then."""

    state = ds.State(x=1.0, y=0.0)

    def rhs(self, t, s):
        return dict(x=-jnp.ones_like(s.x), y=jnp.log(s.x))


def _poisoned_by_diffrax(t_bad):
    """The same solve by diffrax directly, no guard: the reference for healthy lanes."""
    sol = dfx.diffeqsolve(
        dfx.ODETerm(lambda t, y, tb: jnp.where(t < tb, -y, jnp.nan)), dfx.Tsit5(),
        TS[0], TS[-1], None, jnp.ones(1), args=t_bad, saveat=dfx.SaveAt(ts=jnp.asarray(TS)),
        stepsize_controller=dfx.PIDController(rtol=1e-6, atol=1e-6), max_steps=MAX_STEPS,
        throw=False,
    )  # fmt: skip
    return sol.ys[:, 0], sol.result == dfx.RESULTS.successful


@jax.jit
def _batch(t_bad):
    sol = jax.vmap(lambda tb: ds.simulate(Poisoned(t_bad=tb), TS, throw=False))(t_bad)
    return sol.x, sol.status, sol.num_steps


T_BAD = np.array([1.3, 10.0, 0.45, 2.71, 10.0])  # 10 > TS[-1]: healthy lanes


@pytest.fixture(scope="module")
def batch():
    return [np.asarray(a) for a in _batch(jnp.asarray(T_BAD))]


def test_stops_where_the_field_turns_nonfinite(batch):
    xs, status, steps = batch
    healthy = T_BAD > TS[-1]
    np.testing.assert_array_equal(status, np.where(healthy, 0, NONFINITE))
    # The unguarded solve creeps up to t_bad in ever smaller steps until max_steps; the
    # guarded one stops within a few hundred.
    assert np.all(steps[~healthy] < 400), steps
    for x, t_bad in zip(xs[~healthy], T_BAD[~healthy]):
        before = TS < t_bad
        np.testing.assert_allclose(x[before], np.exp(-TS[before]), rtol=1e-5)
        assert np.all(np.isnan(x[~before]))


def test_healthy_lanes_are_bitwise_unchanged(batch):
    xs, _, _ = batch
    # The reference runs the same batch: XLA may contract multiply-adds differently for
    # other batch shapes, so bitwise comparisons hold between equal shapes only.
    ref, ok = jax.vmap(_poisoned_by_diffrax)(jnp.asarray(T_BAD))
    healthy = T_BAD > TS[-1]
    # Without the guard the poisoned lanes fail otherwise (diffrax: max_steps reached).
    assert np.all(np.asarray(ok) == healthy)
    np.testing.assert_array_equal(xs[healthy], np.asarray(ref)[healthy])


def test_log_of_zero_stops_with_an_implicit_solver():
    sol = ds.simulate(LogOfZero(), TS, solver="kvaerno5", throw=False)
    assert int(sol.status) == NONFINITE and int(sol.num_steps) < 400
    before = TS < 1.0
    u = 1.0 - TS[before]
    expected_y = u - np.where(u > 0, u * np.log(np.where(u > 0, u, 1.0)), 0.0) - 1.0
    # Kvaerno5's dense output (what save times read) is good to ~1e-5 here, NaN or not.
    np.testing.assert_allclose(np.asarray(sol.y)[before], expected_y, atol=1e-4)
    assert np.all(np.isnan(np.asarray(sol.y)[~before]))


def test_nonfinite_from_the_first_step_ends_after_a_bounded_number_of_tries():
    # The field is infinite at the initial state itself (x^2 overflows): no step helps.
    class Overflow(ds.Model):
        state = ds.State(x=1e200)

        def rhs(self, t, s):
            return dict(x=s.x**2)

    with pytest.raises(ds.SolveError, match="NONFINITE.*NaN or infinite"):
        ds.simulate(Overflow(), t0=0.0, t1=1.0, save="final")
    sol = ds.simulate(Overflow(), t0=0.0, t1=1.0, save="final", throw=False)
    assert int(sol.status) == NONFINITE
    assert int(sol.num_steps) == MAX_NONFINITE_TRIES
    assert int(sol.num_accepted_steps) == 0


def test_guard_passes_tolerances_and_wraps_once():
    pid = dfx.PIDController(rtol=1e-7, atol=1e-9)
    guard = NonfiniteGuard(pid)
    assert (guard.rtol, guard.atol, guard.norm) == (1e-7, 1e-9, pid.norm)
    assert isinstance(guard.wrap(-1), NonfiniteGuard)


@pytest.mark.parametrize("engine", ["diffrax", "ensemble"])
def test_sweep_reports_nonfinite_per_trajectory(batch, engine):
    out = ds.sweep(
        Poisoned(), ds.GridSweep({"t_bad": T_BAD}), t0=TS[0], t1=TS[-1], save=TS, rtol=1e-6,
        atol=1e-6, keep="trajectory", progress=False, chunk_size=8, engine=engine,
    )  # fmt: skip
    healthy = T_BAD > TS[-1]
    np.testing.assert_array_equal(out.status.values, np.where(healthy, 0, NONFINITE))
    assert np.all(out.num_steps.values[~healthy] < 400)
    np.testing.assert_allclose(out.x.values[healthy], np.exp(-TS) * np.ones((2, 1)), rtol=1e-5)
    # The diffrax engine runs the guarded simulate: its steps are those of the vmapped solve
    # above. The ensemble engine stops a poisoned lane by its own rule (docs/sweeps.md);
    # its healthy lanes take the same steps.
    if engine == "diffrax":
        np.testing.assert_array_equal(out.num_steps.values, batch[2])
    else:
        np.testing.assert_array_equal(out.num_steps.values[healthy], batch[2][healthy])


def test_failed_implicit_step_shrinks_the_step_instead_of_poisoning_it():
    # Stiff van der Pol (mu = 1e3) with Kvaerno5 at rtol 1e-4: a failed chord iteration
    # left diffrax's PID controller proposing dt = NaN, after which every attempt was
    # rejected (MAX_STEPS after 16,384 steps, 11 accepted). The guard shrinks the step.
    # The reference at 1e-8 (a third of the work of 1e-10): the two agree to 1e-11, far
    # below the 1e-3 checked here.
    mu, t1 = 1000.0, 2000.0
    ref = scipy.integrate.solve_ivp(
        lambda t, y: [y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]], (0.0, t1), [2.0, 0.0],
        method="Radau", rtol=1e-8, atol=1e-8,
        jac=lambda t, y: [[0, 1], [-2 * mu * y[0] * y[1] - 1, mu * (1 - y[0] ** 2)]],
    )  # fmt: skip
    model = VanDerPol(mu=mu)
    assert dict(model.initial_state().items()) == dict(x=2.0, v=0.0)  # the reference's
    sol = ds.simulate(model, t0=0.0, t1=t1, save="final", solver="kvaerno5", rtol=1e-4, atol=1e-4)
    assert int(sol.status) == 0 and int(sol.num_steps) < 1000
    np.testing.assert_allclose([sol.final["x"], sol.final["v"]], ref.y[:, -1], atol=1e-3)
