"""`StageNewton`, the named implicit solvers' stage solves, and their `root_tol` setting
(issue 14, point 8): the stage equations are solved to the requested fraction of the step's
error allowance, a failed solve shrinks the step and never poisons it, gradients pass, and
`root_tol` is checked everywhere it can be given (Python, model defaults, configs, sweeps)."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import difsim as ds
from difsim._config._load import ConfigError, load_config
from difsim._core import solver_settings
from difsim._core._nonfinite import NonfiniteGuard
from difsim._sweep._options import SweepOptions
from difsim._sweep._setup import prepare
from difsim.models import ExponentialDecay, VanDerPol
from difsim.solvers import StageNewton
from difsim.solvers._stage_newton import stage_geometry

SPAN = dict(t0=0.0, t1=1.0, save="final")


def _vdp_field(mu):
    return dfx.ODETerm(lambda t, y, args: jnp.stack([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]]))


def _step(solver, term, y0, h):
    t0, t1 = jnp.asarray(0.0), jnp.asarray(h)
    state = solver.init(term, t0, t1, y0, None)
    return solver.step(term, t0, t1, y0, None, state, False)


def test_stage_solve_meets_its_tolerance_on_the_stage_value():
    # Kvaerno5 on van der Pol (mu = 10), one step of 0.05: with root_tol 1e-8 the stage
    # solves are exact to rounding; with 0.1 each stage value may be off by ~0.1 of the
    # allowance (atol + rtol |y|), so the step differs by about that much, not more.
    term, y0, h = _vdp_field(10.0), jnp.array([2.0, 0.0]), 0.05
    rtol = atol = 1e-6

    def solver(kappa):
        return dfx.Kvaerno5(root_finder=StageNewton(rtol=rtol, atol=atol, kappa=kappa))

    exact, *_, result = _step(solver(1e-8), term, y0, h)
    loose, *_, loose_result = _step(solver(0.1), term, y0, h)
    assert result == dfx.RESULTS.successful and loose_result == dfx.RESULTS.successful
    allowance = atol + rtol * jnp.abs(exact)
    deviation = float(jnp.max(jnp.abs(loose - exact) / allowance))
    assert 0 < deviation < 1.0, deviation
    # The same stages solved by an independent root finder (full Newton, residual and
    # step below 1e-13) give the same step.
    newton = dfx.Kvaerno5(root_finder=optx.Newton(rtol=1e-13, atol=1e-13))
    reference, *_, ref_result = _step(newton, term, y0, h)
    assert ref_result == dfx.RESULTS.successful
    np.testing.assert_allclose(exact, reference, rtol=1e-12, atol=1e-13)


def test_a_failed_stage_solve_rejects_the_step_and_shrinks_it():
    # A step of 5 on stiff van der Pol (mu = 1000) from (2, 0) cannot converge: the solve
    # fails quickly, diffrax flags the step (y_error = inf), and the controller proposes a
    # finite, smaller step rather than NaN (issue 14: "dt = NaN after a failed chord").
    term, y0, h = _vdp_field(1000.0), jnp.array([2.0, 0.0]), 5.0
    solver = dfx.Kvaerno5(root_finder=StageNewton(rtol=1e-6, atol=1e-6, kappa=1e-2))
    y1, y_error, _, _, result = _step(solver, term, y0, h)
    assert result != dfx.RESULTS.successful
    assert bool(jnp.all(jnp.isinf(y_error)))
    controller = NonfiniteGuard(
        dfx.PIDController(rtol=1e-6, atol=1e-6, pcoeff=0.4, icoeff=0.3).wrap(1)
    )
    _, state = controller.init(term, 0.0, h, y0, h, None, None, 5)
    keep, next_t0, next_t1, _, _, res = controller.adapt_step_size(
        jnp.asarray(0.0), jnp.asarray(h), y0, y1, None, y_error, 5, state
    )
    assert not bool(keep) and float(next_t0) == 0.0 and res == dfx.RESULTS.successful
    assert np.isfinite(float(next_t1)) and 0 < float(next_t1) <= 0.2 * h


def test_stiff_van_der_pol_from_a_huge_first_step_succeeds():
    # Every first try fails its stage solves; the steps shrink until they converge.
    model = VanDerPol(mu=1e3)
    sol = ds.simulate(model, t0=0.0, t1=1.0, save="final", solver="kvaerno5", dt0=100.0,
                      rtol=1e-6, atol=1e-6)  # fmt: skip
    assert int(sol.status) == ds.Status.SUCCESS
    from scipy.integrate import solve_ivp

    ref = solve_ivp(lambda t, y: [y[1], 1e3 * (1 - y[0] ** 2) * y[1] - y[0]], (0, 1), [2.0, 0.0],
                    method="Radau", rtol=1e-12, atol=1e-12).y[:, -1]  # fmt: skip
    np.testing.assert_allclose(float(sol.final["x"]), ref[0], rtol=1e-5)


def test_gradient_through_the_stage_solves_matches_the_exact_derivative():
    # y' = -k y on [0, 1]: dy(1)/dk = -y0 exp(-k).
    def final(k):
        sol = ds.simulate(ExponentialDecay(k=k), **SPAN, solver="kvaerno5", rtol=1e-10,
                          atol=1e-10)  # fmt: skip
        return sol.final["y"]

    k = 2.0
    assert float(jax.grad(final)(k)) == pytest.approx(-np.exp(-k), rel=1e-7)


def test_stage_geometry_refuses_other_root_finds():
    with pytest.raises(TypeError, match="stage equations of diffrax's implicit"):
        stage_geometry((1.0, 2.0))
    solver = StageNewton(rtol=1e-8, atol=1e-8)
    with pytest.raises(TypeError, match="use optimistix.Newton"):
        optx.root_find(lambda y, args: y - 1.0, solver, jnp.array(0.0), args=None)


def test_named_implicit_solvers_take_root_tol():
    for name, info in ds.solvers.SOLVERS.items():
        if info.implicit:
            finder = ds.solvers.make_solver(name, root_tol=0.05).root_finder
            assert isinstance(finder, StageNewton) and finder.kappa == 0.05, name
    default = ds.solvers.make_solver("kvaerno5").root_finder
    assert default.kappa == ds.solvers.DEFAULT_ROOT_TOL
    controller = solver_settings(ExponentialDecay(), solver="kvaerno5").controller
    assert (controller.pcoeff, controller.icoeff) == (0.4, 0.3)  # PI for implicit solvers
    explicit = solver_settings(ExponentialDecay(), solver="tsit5").controller
    assert (explicit.pcoeff, explicit.icoeff) == (0, 1)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(solver="tsit5", root_tol=0.1), r"root_tol applies to the nonlinear solves.*'tsit5'"),
        (dict(solver="rodas5p", root_tol=0.1), r"'rodas5p' solves none"),
        (dict(solver=dfx.Kvaerno5(), root_tol=0.1), r"carries its own root_finder"),
        (dict(solver="kvaerno5", root_tol=0.0), r"root_tol must be a finite number > 0"),
        (dict(solver="kvaerno5", root_tol=1.0), r"root_tol must be < 1"),
        (dict(solver="kvaerno5", root_tol=float("nan")), r"root_tol must be a finite"),
        (dict(solver="kvaerno5", root_tol="tight"), r"root_tol must be a positive number"),
    ],
)
def test_bad_root_tol_is_a_clear_error(kw, match):
    with pytest.raises(ValueError, match=match):
        ds.simulate(ExponentialDecay(), **SPAN, **kw)


class StiffDecay(ExponentialDecay):
    solver_defaults = {"solver": "kvaerno5", "root_tol": 0.2}


def test_model_defaults_carry_root_tol_with_their_solver_only():
    assert solver_settings(StiffDecay()).solver.root_finder.kappa == 0.2
    assert solver_settings(StiffDecay(), root_tol=0.05).solver.root_finder.kappa == 0.05
    # Another solver drops it (it belongs to the model's choice of solver).
    assert solver_settings(StiffDecay(), solver="tsit5").root_tol is None

    class Bad(ExponentialDecay):
        solver_defaults = {"solver": "kvaerno5", "root_tol": 2.0}

    with pytest.raises(ValueError, match=r"Bad.solver_defaults\['root_tol'\] must be < 1"):
        solver_settings(Bad())


CONFIG = {"model": {"name": "robertson"}, "time": {"t1": 1.0}}


def test_config_root_tol_is_checked_and_reaches_the_solver():
    exp = load_config({**CONFIG, "solver": {"root_tol": 0.05}})
    assert exp.solver.root_tol == 0.05 and exp.solver.kwargs()["root_tol"] == 0.05
    assert "root_tol = 0.05" in exp.to_toml() and load_config(exp.to_dict()) == exp
    assert load_config(CONFIG).solver.root_tol is None
    for solver, value, words in [
        ({"name": "tsit5", "root_tol": 0.05}, None, "solver 'tsit5' solves none"),
        ({"root_tol": 1.5}, None, "root_tol must be < 1"),
        ({"root_tol": -1.0}, None, "positive number"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_config({**CONFIG, "solver": solver})
        assert info.value.key == "solver.root_tol" and words in str(info.value), info.value
        del value


def test_sweep_hash_covers_root_tol_only_when_set():
    # A sweep's chunks are reused only by the same settings: root_tol is one of them, and
    # left unset it leaves the hash of sweeps from before it existed unchanged.
    spec = ds.GridSweep({"k": np.array([1.0, 2.0])})

    def prepared(**kw):
        options = SweepOptions(**SPAN, solver="kvaerno5", **kw)
        return prepare(ExponentialDecay(), spec, options)

    plain, loose = prepared(), prepared(root_tol=0.1)
    assert plain.sweep_hash != loose.sweep_hash
    assert "root_tol" not in plain.settings["solver"]
    assert "root_tol=0.1" in loose.settings["solver"]
