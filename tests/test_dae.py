"""Differential-algebraic models (`difsim._core._dae`, Rodas5P and Radau5 with a mass
matrix).

References: the closed-form solution of a nonlinear index-1 DAE, the IVP test set's
published ROBER and CHEMAKZO values (data/stiff_test_set.toml), the analytic derivative
with respect to a parameter, and central finite differences.
"""

import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from tests.helpers import central_difference, scipy_reference


class Riccati(ds.Model):
    """`x' = -z`, `0 = z - a x²`: `x = 1 / (1 + a t)`, `z = a x²` from `x(0) = 1`."""

    a: float = 1.0
    state = ds.State(x=1.0, z=ds.Var(0.3, algebraic=True, description="a x^2"))

    def rhs(self, t, s):
        return dict(x=-s.z, z=s.z - self.a * s.x**2)


def exact(a, t):
    x = 1 / (1 + a * t)
    return x, a * x**2


T = jnp.linspace(0.0, 2.0, 9)
TEST_SET = tomllib.loads((Path(__file__).parents[1] / "data" / "stiff_test_set.toml").read_text())
ROBER, AKZO = TEST_SET["robertson"], TEST_SET["chemakzo"]


def test_fixed_steps_converge_at_order_five_in_both_kinds_of_variable():
    errors = []
    for n in (10, 20, 40):
        sol = ds.simulate(Riccati(), t0=0.0, t1=2.0, save="final", controller="constant",
                          dt0=2.0 / n)  # fmt: skip
        x, z = exact(1.0, 2.0)
        errors.append([abs(float(sol.ys["x"][-1]) - x), abs(float(sol.ys["z"][-1]) - z)])
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 4.5), orders  # Rodas5P is of order 5, also for index-1 DAEs


@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_adaptive_error_follows_the_tolerance_at_every_save_time(rtol):
    sol = ds.simulate(Riccati(a=1.5), T, rtol=rtol, atol=rtol)
    assert sol.status == ds.Status.SUCCESS and sol.solver == "Rodas5P"
    x, z = exact(1.5, T)
    # Between steps, the values are Rodas5P's 4th-order dense output.
    assert float(jnp.max(jnp.abs(sol.ys["x"] - x))) < 10 * rtol
    assert float(jnp.max(jnp.abs(sol.ys["z"] - z))) < 10 * rtol


def test_the_algebraic_guess_is_made_consistent_and_the_differential_values_kept():
    sol = ds.simulate(Riccati(a=2.0).replace(**{"state.z": 7.0}), T, rtol=1e-8, atol=1e-8)
    assert float(sol.ys["x"][0]) == 1.0
    assert abs(float(sol.ys["z"][0]) - 2.0) < 1e-12  # z(0) = a x(0)², not the guess


@pytest.mark.parametrize(
    ("solver", "rtol"),
    [("rodas5p", 1e-4), ("rodas5p", 1e-7), ("rodas5p", 1e-10), ("radau5", 1e-4), ("radau5", 1e-7)],
)
def test_robertson_dae_matches_the_published_reference(solver, rtol):
    atol = rtol * ROBER["atol_ratio"]
    sol = ds.simulate(ds.models.RobertsonDAE(), t0=0.0, t1=ROBER["t1"], save="final",
                      rtol=rtol, atol=atol, solver=solver)  # fmt: skip
    y = np.array([float(sol.ys[k][-1]) for k in ("y1", "y2", "y3")])
    ref = np.array(ROBER["y"])
    assert np.all(np.abs(y - ref) <= 10 * rtol * np.abs(ref)), (y - ref) / ref
    assert abs(y.sum() - 1) < 1e-14  # the constraint holds to rounding


@pytest.mark.parametrize("solver", ["rodas5p", "radau5"])
def test_the_akzo_nobel_fast_equilibrium_matches_the_published_reference(solver):
    ref = np.array(AKZO["y"])
    for rtol in (1e-4, 1e-8):  # tolerances are traced: one compile
        sol = ds.simulate(ds.models.AkzoNobel(), t0=0.0, t1=AKZO["t1"], save="final",
                          rtol=rtol, atol=rtol * AKZO["atol_ratio"], solver=solver)  # fmt: skip
        y = np.array([float(sol.ys[f"y{i}"][-1]) for i in range(1, 7)])
        assert np.all(np.abs(y - ref) <= 10 * rtol * np.abs(ref)), (solver, rtol, y / ref - 1)
        # The fast equilibrium holds at the end, to the solve's tolerance.
        assert abs(y[5] / (115.83 * y[0] * y[3]) - 1) < rtol


def test_gradients_pass_through_the_consistent_initialisation_and_the_solve():
    def final(a, adjoint="checkpoint"):
        sol = ds.simulate(Riccati(a=a), t0=0.0, t1=2.0, save="final", rtol=1e-10, atol=1e-10,
                          adjoint=adjoint)  # fmt: skip
        return jnp.stack([sol.ys["x"][-1], sol.ys["z"][-1]])

    # x(2) = 1 / (1 + 2a), z(2) = a x(2)²: at a = 1, dx/da = -2/9 and dz/da = -1/27.
    exact_grad = np.array([-2 / 9, 1 / 9 - 4 / 27])
    forward = jax.jacfwd(lambda a: final(a, "forward"))(1.0)  # one tangent: both entries
    np.testing.assert_allclose(forward, exact_grad, rtol=0, atol=1e-8)
    # Reverse mode, one cotangent each: the default checkpointed adjoint, and the discrete
    # adjoint of difsim's own steps (the ensemble engine's, one lane).
    for adjoint in ("checkpoint", "discrete"):
        slope = jax.grad(lambda a: jnp.sum(final(a, adjoint)))(1.0)  # noqa: B023
        assert abs(float(slope) - exact_grad.sum()) < 1e-8, adjoint
    fd = central_difference(lambda a: np.asarray(final(a)), 1.0, 1e-5)
    np.testing.assert_allclose(fd, exact_grad, rtol=0, atol=1e-7)  # the reference itself


def test_radau5_gradients_match_the_closed_form_in_both_modes():
    def final(a, adjoint):
        sol = ds.simulate(Riccati(a=a), t0=0.0, t1=2.0, save="final", rtol=1e-10, atol=1e-10,
                          adjoint=adjoint, solver="radau5")  # fmt: skip
        return jnp.stack([sol.ys["x"][-1], sol.ys["z"][-1]])

    exact_grad = np.array([-2 / 9, 1 / 9 - 4 / 27])  # as above
    forward = jax.jacfwd(lambda a: final(a, "forward"))(1.0)
    np.testing.assert_allclose(forward, exact_grad, rtol=0, atol=1e-8)
    # Reverse mode through the stage solves' implicit derivative (`lax.custom_root`).
    slope = jax.grad(lambda a: jnp.sum(final(a, "checkpoint")))(1.0)
    assert abs(float(slope) - exact_grad.sum()) < 1e-8


def test_a_dae_parameter_is_fitted():
    t = np.linspace(0.0, 2.0, 9)
    data = xr.Dataset({"x": ("time", exact(1.7, t)[0])}, coords={"time": t})
    result = ds.fit(Riccati(a=1.0), data, {"a": ds.Positive()}, rtol=1e-10, atol=1e-10)
    assert result.status.ok and abs(result.parameters["a"] / 1.7 - 1) < 1e-6


def test_a_sweep_runs_on_the_ensemble_engine_equal_to_single_solves():
    model = ds.models.RobertsonDAE()
    spec = ds.GridSweep({"k1": [0.03, 0.05]})
    out = ds.sweep(model, spec, t0=0.0, t1=40.0, save="final", rtol=1e-8, atol=1e-14)
    assert out.attrs["engine"] == "ensemble"
    for i, k1 in enumerate([0.03, 0.05]):
        one = ds.simulate(model.replace(k1=k1), t0=0.0, t1=40.0, save="final", rtol=1e-8,
                          atol=1e-14)  # fmt: skip
        for var in ("y1", "y3"):  # two implementations of the same steps: rounding apart
            got, want = float(out[var].values[i]), float(one.ys[var][-1])
            np.testing.assert_allclose(got, want, rtol=1e-10)
    assert out["y3"].attrs["difsim_role"] == "algebraic"
    assert "difsim_role" not in out["y1"].attrs


def test_a_radau5_sweep_falls_back_to_diffrax_equal_to_single_solves():
    model = ds.models.RobertsonDAE()
    kw = dict(t0=0.0, t1=40.0, save="final", rtol=1e-8, atol=1e-14, solver="radau5")
    out = ds.sweep(model, ds.GridSweep({"k1": [0.03, 0.05]}), **kw)
    assert out.attrs["engine"] == "diffrax" and "Radau5 has no ensemble kernel" in str(
        out.attrs["engine_fallback"]
    )
    for i, k1 in enumerate([0.03, 0.05]):
        one = ds.simulate(model.replace(k1=k1), **kw)
        for var in ("y1", "y3"):  # the same steps, vmapped or not: rounding apart
            np.testing.assert_allclose(float(out[var].values[i]), float(one.ys[var][-1]),
                                       rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("adjoint", ["forward", "checkpoint", "discrete"])
def test_ensemble_gradients_match_the_closed_form(adjoint):
    def loss(a):
        sol = ds.simulate_ensemble(Riccati(), {"a": a}, t0=0.0, t1=2.0, save="final",
                                   rtol=1e-10, atol=1e-10, adjoint=adjoint)  # fmt: skip
        return jnp.sum(sol.ys["x"][:, -1] + sol.ys["z"][:, -1])

    # Lanes that finish first idle (h = 0) while the others step: their singular M must
    # not put a NaN into the reverse pass.
    a = jnp.array([0.5, 1.0, 2.0])
    x = 1 / (1 + 2 * a)  # x(2), and z(2) = a x(2)²
    exact_grad = -2 * x**2 + x**2 - 4 * a * x**3
    np.testing.assert_allclose(jax.grad(loss)(a), exact_grad, rtol=0, atol=1e-9)


def test_a_stabilised_index_three_pendulum_keeps_its_length():
    # Reference: the angle form theta'' = -(g/L) sin theta from 1 rad (DOP853 at 1e-12).
    t = np.linspace(0.0, 20.0, 41)
    theta = scipy_reference(lambda _, y: [y[1], -9.81 * np.sin(y[0])], (0, 20), [1.0, 0.0], t)
    drift = {}
    for alpha in (0.0, 10.0):
        model = ds.models.CartesianPendulum(alpha=alpha)
        sol = ds.simulate(model, t, rtol=1e-8, atol=1e-8)
        drift[alpha] = np.abs(np.asarray(model.constraint(sol.ys)))
        if alpha:
            assert float(np.max(np.abs(sol.ys["x"] - np.sin(theta[:, 0])))) < 1e-6
            assert float(np.max(np.abs(sol.ys["y"] + np.cos(theta[:, 0])))) < 1e-6
    # Index reduction lets (x² + y² - L²)/2 drift, growing with time; Baumgarte's terms damp
    # it to the size of the step errors.
    assert drift[0.0][-1] > 4 * drift[0.0][10] and drift[0.0][-1] > 1e-8
    assert np.max(drift[10.0]) < 1e-8 and np.max(drift[10.0]) < drift[0.0][-1] / 100


def test_the_diode_circuit_matches_its_ode_form():
    # Reference: the node equation with Shockley's current substituted (Radau at 1e-11).
    m, t = ds.models.DiodeCircuit(), np.linspace(0.0, 0.04, 41)

    def node(t, y):
        source = 5.0 * np.sin(2 * np.pi * 50.0 * t)
        return [((source - y[0]) / 1e3 - 1e-12 * np.expm1(y[0] / 0.02585)) / 1e-6]

    ref = scipy_reference(node, (0, 0.04), [0.0], t, method="Radau", rtol=1e-11)[:, 0]
    sol = ds.simulate(m, t, rtol=1e-7, atol=1e-10)
    assert float(np.max(np.abs(sol.ys["v"] - ref))) < 10 * 1e-7 * 5.0  # 10 rtol of V0
    # Between steps the saved values are the dense output of each variable: the constraint
    # holds there to the interpolation's error, not to rounding.
    np.testing.assert_allclose(sol.ys["i"], 1e-12 * np.expm1(sol.ys["v"] / 0.02585),
                               rtol=1e-6, atol=1e-10)  # fmt: skip
    assert 0.55 < float(np.max(sol.ys["v"])) < 0.6  # clipped near the diode's knee


class HigherIndex(ds.Model):
    """The constraint does not involve the algebraic variable: index 2."""

    state = ds.State(x=1.0, z=ds.Var(0.0, algebraic=True))

    def rhs(self, t, s):
        return dict(x=-s.z, z=s.x - 1.0)


class NoRoot(ds.Model):
    """`z² = c`: no real solution for the default `c = -1`."""

    c: float = -1.0
    state = ds.State(x=1.0, z=ds.Var(1.0, algebraic=True))

    def rhs(self, t, s):
        return dict(x=-s.z, z=s.z**2 - self.c)


def test_an_index_above_one_is_refused_naming_the_variable():
    with pytest.raises(ValueError, match=r"do not determine the algebraic variable\(s\) z "):
        ds.simulate(HigherIndex(), t0=0.0, t1=1.0)
    with pytest.raises(ValueError, match=r"do not determine the algebraic variable\(s\) z "):
        ds.simulate_ensemble(HigherIndex(), {}, t0=0.0, t1=1.0)


def test_unsolvable_constraints_give_a_status_and_no_numbers():
    sol = ds.simulate(NoRoot(), t0=0.0, t1=1.0, save=3, throw=False)
    assert ds.Status(int(sol.status)) is ds.Status.INCONSISTENT_INIT
    assert np.all(np.isnan(sol.ys["x"])) and int(sol.num_steps) == 0
    with pytest.raises(ds.SolveError, match="INCONSISTENT_INIT"):
        ds.simulate(NoRoot(), t0=0.0, t1=1.0, save=3)
    # In an ensemble, only the lane without a root: z² = c has none for c = -1.
    lanes = ds.simulate_ensemble(NoRoot(), {"c": jnp.array([4.0, -1.0])}, t0=0.0, t1=0.5,
                                 save="final")  # fmt: skip
    assert [ds.Status(int(s)) for s in lanes.status] == [
        ds.Status.SUCCESS,
        ds.Status.INCONSISTENT_INIT,
    ]
    assert abs(float(lanes.ys["x"][0, -1]) - 0.0) < 1e-9  # x' = -2: x(0.5) = 0
    assert np.isnan(float(lanes.ys["x"][1, -1])) and int(lanes.num_steps[1]) == 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(solver="tsit5"), "solver Tsit5 cannot solve it; use solver='rodas5p'"),
        (dict(event=lambda t, s, m: s.x - 0.5), "an event is not supported"),
    ],
)
def test_what_a_dae_cannot_use_yet_is_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ds.simulate(Riccati(), t0=0.0, t1=1.0, **kwargs)


def test_a_singular_mass_matrix_without_algebraic_variables_is_refused():
    solver = ds.solvers.Radau5(mass=(0.0,))
    with pytest.raises(ValueError, match=r"zero for y\) but ExponentialDecay declares no alg"):
        ds.simulate(ds.models.ExponentialDecay(), t0=0.0, t1=1.0, solver=solver)
