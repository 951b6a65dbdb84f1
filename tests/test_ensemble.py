"""The ensemble engine (`difsim._ensemble`): each method's order, agreement with diffrax
(step for step) and with scipy, per-lane statuses, vector states, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import difsim as ds
from difsim._ensemble import Bosh3, Dopri5, Dopri8, Tsit5, simulate_ensemble
from difsim._ensemble._field import BatchField, BlockRHS
from difsim._ensemble._solve import solve_jit

METHODS = [Tsit5(), Dopri5(), Bosh3(), Dopri8()]
OMEGA = jnp.linspace(0.5, 2.0, 4)
A = jnp.array([1.0, 2.0])


class Root(ds.Model):
    """dx/dt = sqrt(c - t): x = 1 + 2/3 (c^1.5 - (c - t)^1.5), undefined (NaN) after t = c."""

    c: float = 2.0
    state = ds.State(x=ds.Var(1.0))

    def rhs(self, t, s):
        return dict(x=jnp.sqrt(self.c - t) + 0 * s.x)


class Bump(ds.Model):
    """dy/dt = -a t y², y(0) = 1: y = 1/(1 + a t²/2) (nonlinear, non-autonomous, smooth)."""

    a: float = 2.0
    state = ds.State(y=ds.Var(1.0))

    def rhs(self, t, s):
        return dict(y=-self.a * t * s.y**2)


def _fixed_step_error(method, n_steps, t1=3.0):
    """Global error at `t1` of `n_steps` equal steps of `method` on [`Bump`][] for the
    rates `A`, every lane at once."""
    model = Bump()
    field = BatchField(model, model.initial_state().info, ((),), jnp.dtype("float64"))
    f = BlockRHS(field, {"a": A})
    y = field.initial({"a": A})
    h = jnp.full(A.shape, t1 / n_steps)

    def body(i, carry):
        y, f0 = carry
        out = method.step(f, i * h, y, h, f0)
        return out.y1, out.f1

    y, _ = jax.lax.fori_loop(0, n_steps, body, (y, f(jnp.zeros_like(h), y)))
    return float(jnp.max(jnp.abs(y["y"] - 1 / (1 + A * t1**2 / 2))))


@pytest.mark.parametrize("method", METHODS, ids=lambda m: m.name)
def test_observed_order(method):
    # Halving the step divides the global error by 2^order. A wrong coefficient drops the
    # observed order to order - 1 or less; pairs tuned for small leading error constants
    # (Tsit5, Dopri8) show up to ~1 order more at these steps before their asymptote.
    steps = {3: [40, 80, 160], 5: [20, 40, 80], 8: [10, 20]}[method.order]
    errors = np.asarray([_fixed_step_error(method, n) for n in steps])
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all((orders > method.order - 0.2) & (orders < method.order + 1.5)), orders


LORENZ = ds.models.Lorenz()
RHO = jnp.linspace(0.0, 21.0, 40)


@pytest.mark.parametrize("solver", ["tsit5", "dopri5", "bosh3", "dopri8"])
def test_step_for_step_equal_to_diffrax(solver):
    # Same tableau, same controller, same first step: the same steps as vmapped diffrax,
    # and the dense-output saves agree to rounding. (Dopri8's error estimate of diffrax's
    # default first step, 0.01, is at rounding level, so the next step would depend on
    # the order of summation: it starts with a larger one.)
    dt0 = 0.05 if solver == "dopri8" else None
    kw = dict(t0=0.0, t1=1.0, save=6, solver=solver, rtol=1e-7, atol=1e-7, dt0=dt0)
    ens = simulate_ensemble(LORENZ, {"rho": RHO}, **kw)
    ref = jax.vmap(lambda r: ds.simulate(LORENZ.replace(rho=r), **kw))(RHO)
    np.testing.assert_array_equal(ens.num_steps, ref.num_steps)
    np.testing.assert_array_equal(ens.num_rejected_steps, ref.num_rejected_steps)
    for var in "xyz":
        np.testing.assert_allclose(ens.ys[var], ref.ys[var], rtol=1e-11, atol=1e-11)
    np.testing.assert_array_equal(ens.status, 0)
    assert ens.ts.shape == (40, 6)


def test_matches_scipy_at_tight_tolerance():
    # dopri8 at rtol 1e-12 against scipy's DOP853 at 1e-13, through dense-output saves.
    ts = np.linspace(0.0, 2.0, 5)
    rho = np.array([0.5, 10.0, 21.0])
    sol = simulate_ensemble(LORENZ, {"rho": rho}, ts, solver="dopri8", rtol=1e-12, atol=1e-12)
    for i, r in enumerate(rho):

        def f(t, u, r=r):
            x, y, z = u
            return [10 * (y - x), x * (r - z) - y, x * y - 8 / 3 * z]

        ref = solve_ivp(f, (0, 2), [1.0, 0, 0], "DOP853", t_eval=ts, rtol=1e-13, atol=1e-13)
        got = np.stack([sol.ys[v][i] for v in "xyz"])
        np.testing.assert_allclose(got, ref.y, rtol=1e-9, atol=1e-9)


def test_dense_output_accuracy():
    # Saves between steps come from each method's interpolant: at rtol 1e-8 their error
    # is of the order of the solve's global error (~1e-7 here; oscillators, exact
    # solution), and with the tolerance 100x tighter it falls at least 10x.
    model = ds.models.HarmonicOscillator(zeta=0.1)
    ts = jnp.linspace(0.0, 3.0, 31)
    for solver in ("tsit5", "dopri8"):
        sol = simulate_ensemble(model, {"omega": OMEGA}, ts, solver=solver, rtol=1e-8, atol=1e-8)
        exact = jax.vmap(lambda w: model.replace(omega=w).exact(ts))(OMEGA)
        loose = float(jnp.max(jnp.abs(sol.ys["x"] - exact["x"])))
        tight = simulate_ensemble(
            model, {"omega": OMEGA}, ts, solver=solver, rtol=1e-10, atol=1e-10
        )
        tight = float(jnp.max(jnp.abs(tight.ys["x"] - exact["x"])))
        assert loose < 1e-6 and tight < loose / 10, (loose, tight)


def test_status_per_lane():
    # Lanes whose right-hand side turns NaN are NONFINITE (not MAX_STEPS after thousands
    # of steps), lanes out of steps are MAX_STEPS, and the healthy lanes beside them are
    # exact.
    c = jnp.array([2.0, 0.5, 1.5, 0.3])
    sol = simulate_ensemble(Root(), {"c": c}, t0=0.0, t1=1.0, save="final", rtol=1e-8, atol=1e-8)
    status = [ds.Status(int(s)) for s in sol.status]
    assert status == [
        ds.Status.SUCCESS,
        ds.Status.NONFINITE,
        ds.Status.SUCCESS,
        ds.Status.NONFINITE,
    ]
    assert int(jnp.max(sol.num_steps)) < 300
    ok = jnp.array([0, 2])
    exact = 1 + 2 / 3 * (c[ok] ** 1.5 - (c[ok] - 1) ** 1.5)
    np.testing.assert_allclose(sol.ys["x"][ok, 0], exact, rtol=1e-7)
    assert bool(jnp.all(jnp.isnan(sol.ys["x"][jnp.array([1, 3])])))

    rho = jnp.array([0.0, 21.0, 28.0])
    few = simulate_ensemble(LORENZ, {"rho": rho}, t0=0.0, t1=5.0, max_steps=40)
    ref = jax.vmap(
        lambda r: ds.simulate(
            LORENZ.replace(rho=r), t0=0.0, t1=5.0, save="final", max_steps=40, throw=False
        )
    )(rho)
    np.testing.assert_array_equal(few.status, ref.status)
    assert ds.Status.MAX_STEPS in [ds.Status(int(s)) for s in few.status]


def test_throw_names_the_failed_lanes_eagerly_and_under_jit():
    # As `test_status_per_lane`'s first case: lanes 1 and 3 turn NaN.
    c = jnp.array([2.0, 0.5, 1.5, 0.3])
    run = lambda c, **kw: simulate_ensemble(  # noqa: E731
        Root(), {"c": c}, t0=0.0, t1=1.0, save="final", rtol=1e-8, atol=1e-8, **kw
    )
    with pytest.raises(ds.SolveError, match=r"2 of 4 lanes; the first, lane 1, \[NONFINITE\]"):
        run(c, throw=True)
    with pytest.raises(Exception, match="a lane failed"):
        jax.block_until_ready(jax.jit(lambda c: run(c, throw=True).ys["x"])(c))
    ok = run(c[jnp.array([0, 2])], throw=True)  # every lane succeeds: returned as is
    np.testing.assert_array_equal(ok.status, [0, 0])


def test_vector_state_and_initial_state_from_parameters():
    # Kepler's initial state follows from the eccentricity: each lane's is its own.
    e = jnp.array([0.0, 0.3, 0.6])
    model = ds.models.Kepler()
    kw = dict(t0=0.0, t1=2 * np.pi, save=3, rtol=1e-10, atol=1e-10)
    ens = simulate_ensemble(model, {"e": e}, **kw)
    ref = jax.vmap(lambda v: ds.simulate(model.replace(e=v), **kw))(e)
    for var in ("q1", "q2", "p1", "p2"):
        np.testing.assert_allclose(ens.ys[var], ref.ys[var], rtol=1e-9, atol=1e-9)
    # One period later every orbit is back at perihelion (1 - e, 0).
    np.testing.assert_allclose(ens.ys["q1"][:, -1], 1 - e, atol=1e-7)


class Lorenz96(ds.Model):
    """Lorenz-96 with 6 sites: one array-valued state variable."""

    forcing: float = 8.0
    state = ds.State(x=ds.Var(jnp.array([1.01, 1.0, 1.0, 1.0, 1.0, 1.0])))

    def rhs(self, t, s):
        x = s.x
        return dict(x=(jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + self.forcing)


@pytest.mark.parametrize("save", ["final", 4])
def test_array_valued_state(save):
    forcing = jnp.array([4.0, 8.0, 12.0])
    kw = dict(t0=0.0, t1=1.0, save=save, rtol=1e-9, atol=1e-9)
    ens = simulate_ensemble(Lorenz96(), {"forcing": forcing}, **kw)
    ref = jax.vmap(lambda f: ds.simulate(Lorenz96(forcing=f), **kw))(forcing)
    assert ens.ys["x"].shape == ref.ys["x"].shape == (3, 1 if save == "final" else 4, 6)
    np.testing.assert_array_equal(ens.num_steps, ref.num_steps)
    np.testing.assert_allclose(ens.ys["x"], ref.ys["x"], rtol=1e-10, atol=1e-10)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="no ensemble kernel"):
        simulate_ensemble(LORENZ, {"rho": RHO}, t0=0.0, t1=1.0, solver="kvaerno5")
    with pytest.raises(ValueError, match="'rh'"):
        simulate_ensemble(LORENZ, {"rh": RHO}, t0=0.0, t1=1.0)
    with pytest.raises(ValueError, match="lanes"):
        simulate_ensemble(LORENZ, {"rho": RHO, "sigma": RHO[:3]}, t0=0.0, t1=1.0)
    with pytest.raises(ValueError, match="shape"):
        simulate_ensemble(LORENZ, {"rho": 1.0}, t0=0.0, t1=1.0)
    # simulate's arguments the engine cannot follow are refused by name.
    with pytest.raises(ValueError, match="event= is not supported.*jax.vmap"):
        simulate_ensemble(LORENZ, {"rho": RHO}, t0=0.0, t1=1.0, event=lambda t, y: y["x"])
    with pytest.raises(ValueError, match="controller ConstantStepSize"):
        simulate_ensemble(LORENZ, {"rho": RHO}, t0=0.0, t1=1.0, controller="constant", dt0=0.01)
    with pytest.raises(TypeError, match="throw must be True or False"):
        simulate_ensemble(LORENZ, {"rho": RHO}, t0=0.0, t1=1.0, throw="yes")


def test_a_repeated_call_reuses_the_compiled_solve():
    # Called outside `jit` again with other model values and other swept values (same
    # shapes), the engine runs the program it compiled: what a notebook does. Each call's
    # numbers are its own model's: y(t) = 1 / (1 / y0 + a t^2 / 2).
    kw = dict(t0=0.0, t1=2.0, save="final", rtol=1e-10, atol=1e-10)
    sizes = [solve_jit._cache_size()]
    for a, y0 in [(2.0, [1.0, 0.5, 2.0]), (3.0, [0.25, 1.5, 4.0])]:
        y0 = jnp.array(y0)
        ens = simulate_ensemble(Bump(a=a), {"state.y": y0}, **kw)
        exact = 1 / (1 / y0 + a * kw["t1"] ** 2 / 2)
        np.testing.assert_allclose(ens.ys["y"][:, -1], exact, rtol=1e-8)
        sizes.append(solve_jit._cache_size())
    assert sizes[1] == sizes[0] + 1  # compiled once, by the first call
    assert sizes[2] == sizes[1]
