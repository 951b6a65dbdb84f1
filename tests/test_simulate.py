"""`simulate` against independent references: closed forms, scipy, finite differences.

The test models (`simulate_models.py`) are written for these tests, not taken from the
zoo, so that they pin down the core alone. Solves share a few save-grid shapes and solver
settings, so each configuration compiles once per module.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

from .helpers import central_difference, scipy_reference
from .simulate_models import GROUND, Ball, DampedOscillator, Decay, Riccati, VanDerPol, ground

TIGHT = dict(rtol=1e-12, atol=1e-12)
TS = np.linspace(0.0, 5.0, 11)


# ------------------------------------------------------------------------------ analytic
def test_decay_matches_closed_form():
    model = Decay()
    sol = ds.simulate(model, t=TS, **TIGHT)
    assert int(sol.status) == ds.Status.SUCCESS and bool(sol.ok)
    np.testing.assert_allclose(sol.ts, TS)
    np.testing.assert_allclose(sol.y, 2.0 * np.exp(-0.7 * TS), rtol=1e-10, atol=0)
    assert int(sol.num_steps) == int(sol.num_accepted_steps) + int(sol.num_rejected_steps)


def test_damped_oscillator_matches_closed_form():
    omega, gamma = 2.0, 0.1
    sol = ds.simulate(DampedOscillator(omega=omega, gamma=gamma), t=TS, **TIGHT)
    wd = np.sqrt(omega**2 - gamma**2)
    x = np.exp(-gamma * TS) * (np.cos(wd * TS) + gamma / wd * np.sin(wd * TS))
    v = -(omega**2) / wd * np.exp(-gamma * TS) * np.sin(wd * TS)
    np.testing.assert_allclose(sol.x, x, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sol.v, v, rtol=0, atol=1e-10)


def test_nonlinear_scalar_matches_closed_form():
    ts = np.linspace(0.0, 0.9, 11)
    sol = ds.simulate(Riccati(), t=ts, **TIGHT)
    np.testing.assert_allclose(sol.y, 1 / (1 - ts), rtol=1e-9)


def test_save_final_and_count():
    final = ds.simulate(Decay(), t0=0.0, t1=5.0, save="final", **TIGHT)
    assert final.ts.shape == (1,) and final.y.shape == (1,)
    np.testing.assert_allclose(final.ts, [5.0])
    np.testing.assert_allclose(final.final["y"], 2.0 * np.exp(-3.5), rtol=1e-10)
    counted = ds.simulate(Decay(), t0=0.0, t1=5.0, save=11, **TIGHT)
    np.testing.assert_allclose(counted.ts, TS)
    np.testing.assert_allclose(counted.y, 2.0 * np.exp(-0.7 * TS), rtol=1e-10)


def test_van_der_pol_matches_scipy():
    def rhs(t, y):
        return [y[1], (1 - y[0] ** 2) * y[1] - y[0]]

    ts = np.linspace(0.0, 10.0, 21)
    reference = scipy_reference(rhs, (0.0, 10.0), [2.0, 0.0], ts)
    sol = ds.simulate(VanDerPol(), t=ts, rtol=1e-10, atol=1e-10)
    got = np.stack([sol.x, sol.v], axis=-1)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-7)


def test_implicit_default_for_stiff_model():
    class StiffDecay(ds.Model):
        stiff = True
        lam: float = 1e4
        state = ds.State(y=1.0)

        def rhs(self, t, s):
            # y' = -lam (y - cos t) - sin t: y = cos t once the fast transient has died.
            return dict(y=-self.lam * (s.y - jnp.cos(t)) - jnp.sin(t))

    sol = ds.simulate(StiffDecay(), t=TS, rtol=1e-8, atol=1e-8)
    assert sol.solver == "Kvaerno5"
    # Loose: Kvaerno5's dense output at the save times is only third order.
    np.testing.assert_allclose(sol.y, np.cos(TS), atol=1e-5)
    assert int(sol.num_steps) < 300  # an explicit solver needs ~lam * 5 / 3 steps


# ------------------------------------------------------------------------------ gradients
GRAD_TS = np.linspace(0.0, 3.0, 7)
P0 = np.array([2.0, 0.3, 1.0])  # omega, gamma, x(0)


def _oscillator_loss(p, adjoint="checkpoint"):
    model = DampedOscillator(omega=p[0], gamma=p[1]).replace(**{"state.x": p[2]})
    sol = ds.simulate(model, t=GRAD_TS, adjoint=adjoint, **TIGHT)
    return jnp.sum(sol.x**2) + jnp.sum(sol.v * GRAD_TS)


# Jitted whole: a derivative taken outside jit compiles the solve's forward and backward
# halves as separate, larger programs.
_checkpoint_value_and_grad = jax.jit(jax.value_and_grad(_oscillator_loss))


@pytest.fixture(scope="module")
def fd_gradient():
    # The loss values come from the checkpoint test's compiled program (no compile of its own).
    def at(i):
        def f(h):
            return float(_checkpoint_value_and_grad(jnp.asarray(P0 + h * np.eye(3)[i]))[0])

        return central_difference(f, 0.0, h=1e-5)

    return np.array([at(i) for i in range(3)])


@pytest.mark.parametrize("adjoint", ["checkpoint", "direct", "backsolve", "forward"])
def test_gradient_matches_finite_differences(adjoint, fd_gradient):
    if adjoint == "checkpoint":
        grad = _checkpoint_value_and_grad(jnp.asarray(P0))[1]
    else:
        differentiate = jax.jacfwd if adjoint == "forward" else jax.grad
        grad = jax.jit(differentiate(lambda p: _oscillator_loss(p, adjoint)))(jnp.asarray(P0))
    np.testing.assert_allclose(grad, fd_gradient, rtol=1e-6)


def test_filter_grad_sees_parameters_and_initial_state():
    # y(T) = y0 exp(-k T): dy/dk = -T y(T), dy/dy0 = exp(-k T). Python-float initial values
    # must be array leaves, or filter_grad would skip them.
    @eqx.filter_jit  # jitted whole: one compiled program (see _checkpoint_value_and_grad)
    @eqx.filter_grad
    def final(model):
        return ds.simulate(model, t0=0.0, t1=2.0, save="final", **TIGHT).y[0]

    grads = final(Decay())
    np.testing.assert_allclose(grads.k, -2.0 * 2.0 * np.exp(-1.4), rtol=1e-9)
    np.testing.assert_allclose(grads.state.y, np.exp(-1.4), rtol=1e-9)


# ------------------------------------------------------------------------------ transforms
KS = np.array([0.2, 0.7, 1.5])


def _decay_ys(model):
    return ds.simulate(model, t=TS, **TIGHT).y


def test_jit_equals_plain_call():
    model = Decay(k=0.4)
    np.testing.assert_allclose(jax.jit(_decay_ys)(model), _decay_ys(model), rtol=1e-13)
    # simulate itself under jit: times and tolerances become tracers.
    traced = jax.jit(ds.simulate)(model, jnp.asarray(TS), **TIGHT)
    np.testing.assert_allclose(traced.y, _decay_ys(model), rtol=1e-13)
    np.testing.assert_allclose(traced.ts, TS)
    filtered = eqx.filter_jit(_decay_ys)
    np.testing.assert_allclose(filtered(model), _decay_ys(model), rtol=1e-13)
    np.testing.assert_allclose(filtered(Decay(k=1.1)), 2.0 * np.exp(-1.1 * TS), rtol=1e-10)


def test_vmap_over_parameter_equals_plain_calls():
    batched = jax.vmap(lambda k: _decay_ys(Decay(k=k)))(jnp.asarray(KS))
    assert batched.shape == (3, len(TS))
    for row, k in zip(batched, KS):
        np.testing.assert_allclose(row, _decay_ys(Decay(k=k)), rtol=1e-12)
        np.testing.assert_allclose(row, 2.0 * np.exp(-k * TS), rtol=1e-10)


def test_jit_vmap_over_user_model_batch():
    models = jax.vmap(lambda k: DampedOscillator(omega=k))(jnp.asarray(KS + 1.0))
    solve = jax.jit(jax.vmap(lambda m: ds.simulate(m, t=TS, **TIGHT)))
    sols = solve(models)
    assert sols.status.shape == (3,) and np.all(np.asarray(sols.status) == 0)
    for i, omega in enumerate(KS + 1.0):
        one = ds.simulate(DampedOscillator(omega=omega), t=TS, **TIGHT)
        np.testing.assert_allclose(sols.x[i], one.x, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(sols.v[i], one.v, rtol=1e-12, atol=1e-14)


def test_grad_of_vmapped_loss():
    # d/dk sum_j y0 exp(-k_j T) = -T y0 exp(-k_j T), elementwise.
    def loss(ks):
        finals = jax.vmap(
            lambda k: ds.simulate(Decay(k=k), t0=0.0, t1=2.0, save="final", **TIGHT).y[0]
        )(ks)
        return jnp.sum(finals)

    grad = jax.jit(jax.grad(loss))(jnp.asarray(KS))
    np.testing.assert_allclose(grad, -2.0 * 2.0 * np.exp(-2.0 * KS), rtol=1e-9)


# ------------------------------------------------------------------------------ events
def test_terminating_event_time_and_state():
    h, g = 10.0, 9.81
    t_hit = np.sqrt(2 * h / g)
    ts = np.linspace(0.0, 2.0, 9)
    sol = ds.simulate(Ball(), t=ts, event=GROUND, **TIGHT)
    assert int(sol.status) == ds.Status.EVENT and bool(sol.ok)
    np.testing.assert_allclose(sol.t_end, t_hit, rtol=1e-10)
    np.testing.assert_allclose(sol.y_end["h"], 0.0, atol=1e-9)
    np.testing.assert_allclose(sol.y_end["v"], -np.sqrt(2 * g * h), rtol=1e-10)
    before = ts <= t_hit
    np.testing.assert_allclose(sol.h[before], h - g * ts[before] ** 2 / 2, rtol=1e-10)
    assert np.all(np.isnan(sol.h[~before])) and np.all(np.isnan(sol.v[~before]))


def test_event_with_final_save_reports_stop_time():
    sol = ds.simulate(Ball(g=4.0), t0=0.0, t1=5.0, save="final", event=ground, **TIGHT)
    t_hit = np.sqrt(2 * 10.0 / 4.0)
    np.testing.assert_allclose(sol.t_end, t_hit, rtol=1e-10)
    np.testing.assert_allclose(sol.ts, [t_hit], rtol=1e-10)  # not t1: the solve stopped
    np.testing.assert_allclose(sol.final["v"], -4.0 * t_hit, rtol=1e-10)


def test_event_not_reached_is_success():
    sol = ds.simulate(Ball(), t0=0.0, t1=1.0, save="final", event=ground, **TIGHT)
    assert int(sol.status) == ds.Status.SUCCESS
    np.testing.assert_allclose(sol.final["h"], 10.0 - 9.81 / 2, rtol=1e-10)


def test_boolean_event_stops_within_a_step():
    sol = ds.simulate(
        Ball(),
        t0=0.0,
        t1=5.0,
        save="final",
        event=lambda t, s, m: s.h < 5.0,
        dt0=0.01,
        controller="constant",
        solver="tsit5",
    )
    t_half = np.sqrt(2 * 5.0 / 9.81)  # first time h < 5
    assert int(sol.status) == ds.Status.EVENT
    assert t_half <= float(sol.t_end) <= t_half + 0.01 + 1e-12


# ------------------------------------------------------------------------------ failures
def test_max_steps_throw_names_status_and_model():
    with pytest.raises(Exception, match=r"simulate\(Decay\) failed \[MAX_STEPS\]"):
        ds.simulate(Decay(), t=TS, max_steps=2)


def test_max_steps_throw_under_outer_jit():
    # The check must guard every output: a caller reading only `ys` still gets the error.
    solve = jax.jit(lambda k: ds.simulate(Decay(k=k), t=TS, max_steps=2).y)
    with pytest.raises(Exception, match=r"MAX_STEPS"):
        jax.block_until_ready(solve(0.7))


def test_max_steps_no_throw_gives_status_and_nan():
    sol = ds.simulate(Decay(), t=TS, max_steps=2, throw=False)
    assert int(sol.status) == ds.Status.MAX_STEPS and not bool(sol.ok)
    assert ds.Status(int(sol.status)).message.startswith("the maximum number of steps")
    y = np.asarray(sol.y)
    assert y[0] == 2.0 and np.all(np.isnan(y[-1:]))
    assert np.all(np.isnan(np.asarray(sol.final["y"])))


def test_blow_up_is_a_failure_with_accurate_values_before():
    ts = np.linspace(0.0, 2.0, 11)
    sol = ds.simulate(Riccati(), t=ts, throw=False, **TIGHT)
    assert not ds.Status(int(sol.status)).ok
    before = ts < 1.0
    np.testing.assert_allclose(sol.y[before], 1 / (1 - ts[before]), rtol=1e-9)
    assert np.all(np.isnan(sol.y[ts > 1.0]))
    with pytest.raises(Exception, match=r"simulate\(Riccati\) failed"):
        ds.simulate(Riccati(), t=ts, **TIGHT)


def test_one_failing_trajectory_does_not_spoil_a_batch():
    ts = np.linspace(0.0, 2.0, 11)
    a = jnp.array([0.1, 1.0, -1.0])  # the middle one blows up at t = 1
    sols = jax.vmap(lambda a: ds.simulate(Riccati(a=a), t=ts, throw=False, **TIGHT))(a)
    status = np.asarray(sols.status)
    assert status[0] == ds.Status.SUCCESS and status[2] == ds.Status.SUCCESS
    assert status[1] != ds.Status.SUCCESS
    np.testing.assert_array_equal(np.asarray(sols.ok), [True, False, True])
    for i in (0, 2):
        np.testing.assert_allclose(sols.y[i], 1 / (1 - float(a[i]) * ts), rtol=1e-9)
    assert np.isnan(np.asarray(sols.y)[1, -1])


# ------------------------------------------------------------------------------ bad input
class Broken(ds.Model):
    """Returns something wrong, chosen by `mode`."""

    mode: str = eqx.field(static=True, default="ok")
    state = ds.State(x=1.0, y=2.0)

    def rhs(self, t, s):
        return {
            "shape": lambda: dict(x=jnp.ones(3), y=s.y),
            "missing": lambda: dict(x=s.x),
            "extra": lambda: dict(x=s.x, y=s.y, z=s.x),
            "array": lambda: jnp.stack([s.x, s.y]),
        }[self.mode]()


@pytest.mark.parametrize(
    "mode, error, match",
    [
        ("shape", ValueError, r"Broken\.rhs returned shape \(3,\) for state variable 'x'"),
        ("missing", ValueError, r"Broken\.rhs returned no derivative for state variable 'y'"),
        ("extra", ValueError, r"Broken\.rhs returned 'z', which is not a state variable"),
        ("array", TypeError, r"Broken\.rhs must return a dict .*\(x, y\), got an array"),
    ],
)
def test_bad_rhs_names_model_and_variable(mode, error, match):
    with pytest.raises(error, match=match):
        ds.simulate(Broken(mode=mode), t=TS)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(t0=1.0, t1=1.0), r"t1 must be greater than t0"),
        (dict(t0=2.0, t1=1.0), r"t1 must be greater than t0"),
        (dict(t0=0.0, t1=1.0, save=[0.5, 2.0]), r"save time 2\.0 lies outside \[t0, t1\]"),
        (dict(t0=0.0, t1=1.0, save=[-0.5, 0.5]), r"save time -0\.5 lies outside"),
        (dict(t0=0.0, t1=1.0, save=[0.5, 0.2]), r"save must be strictly increasing"),
        (dict(t=[0.0, 0.5, 0.5]), r"t must be strictly increasing"),
        (dict(t=[0.0]), r"at least 2 save times"),
        (dict(t=TS, t0=0.0), r"give either t .* not t and t0"),
        (dict(t0=0.0), r"give the save times t, or both t0 and t1"),
        (dict(t0=0.0, t1=1.0, save="all"), r"save must be 'final'"),
        (dict(t0=0.0, t1=1.0, save=0), r"save must be at least 1 point"),
    ],
)
def test_bad_times_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ds.simulate(Decay(), **kwargs)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_initial_state_names_variable(bad):
    with pytest.raises(ValueError, match=r"state variable 'v' of DampedOscillator is not finite"):
        ds.simulate(DampedOscillator().replace(**{"state.v": bad}), t=TS)


def test_imex_solver_needs_split_model():
    with pytest.raises(ValueError, match=r"KenCarp4 is IMEX: Decay must define rhs_nonstiff"):
        ds.simulate(Decay(), t=TS, solver="kencarp4")


def test_backsolve_with_event_is_rejected():
    with pytest.raises(ValueError, match=r"backsolve.*terminating event"):
        ds.simulate(Ball(), t=TS, event=GROUND, adjoint="backsolve")


def test_non_model_and_bad_event_are_rejected():
    with pytest.raises(TypeError, match=r"simulate expects a difsim\.Model instance, got dict"):
        ds.simulate({"y": 1.0}, t=TS)
    with pytest.raises(TypeError, match=r"event must be a difsim\.Event or a callable"):
        ds.simulate(Ball(), t=TS, event=3.0)
