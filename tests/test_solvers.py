"""The solver registry, and every registered solver's observed order of convergence.

Orders are checked against the published orders of the methods (not against the registry's own
`order` field alone): the slope of log(error) against log(dt) at fixed steps, fitted with
`scipy.stats.linregress`, on problems with closed-form solutions.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import difsim as ds
from difsim.solvers import ADJOINT_DESCRIPTIONS, ADJOINTS, CONTROLLERS, SOLVERS, wants_split_terms

from .helpers import scipy_reference

# Published orders: Hairer, Nørsett & Wanner, "Solving ODEs I" (Euler, Heun, midpoint,
# Ralston, Dormand–Prince 5(4) and 8(7)); Bogacki & Shampine (1989); Tsitouras (2011);
# Kværnø (2004); Kennedy & Carpenter (2003, 2019).
PUBLISHED_ORDER = dict(
    euler=1,
    heun=2,
    midpoint=2,
    ralston=2,
    bosh3=3,
    tsit5=5,
    dopri5=5,
    dopri8=8,
    implicit_euler=1,
    kvaerno3=3,
    kvaerno4=4,
    kvaerno5=5,
    rodas5p=5,  # Steinebach (2023)
    radau5=5,  # Radau IIA, 3 stages: 2s - 1 (Hairer & Wanner II, §IV.5)
    bdf=5,  # its highest order (Shampine & Reichelt 1997)
    kencarp3=3,
    kencarp4=4,
    kencarp5=5,
    etdrk4=4,  # Cox & Matthews (2002)
    crank_nicolson=2,  # Crank & Nicolson (1947)
    imex_euler=1,
)
# The PDE steppers need a linear stiff term of a special form (Fourier-diagonal, or solved
# with lineax): their orders are measured in tests/test_etdrk4.py, test_linear_implicit.py.
PDE_STEPPERS = {"etdrk4", "crank_nicolson", "imex_euler"}


# ------------------------------------------------------------------------------ test problems
class SplitOscillator(ds.Model):
    """x'' = -x as x' = v (explicit part), v' = -x (implicit part): x = cos t, v = -sin t."""

    state = ds.State(x=1.0, v=0.0)

    def rhs_nonstiff(self, t, s):
        return dict(x=s.v, v=jnp.zeros_like(s.v))

    def rhs_stiff(self, t, s):
        return dict(x=jnp.zeros_like(s.x), v=-s.x)


class SplitRiccati(ds.Model):
    """y' = -y^2 cos t, split as (-y^2 cos t + y) + (-y): y = 1 / (1 + sin t), y(0) = 1.

    Nonlinear and non-autonomous; near t = 3π/2 it blows up, so the closer the end time, the
    larger the error constants (used to lift Dopri8's errors above the roundoff floor).
    """

    state = ds.State(y=1.0)

    def rhs_nonstiff(self, t, s):
        return dict(y=-(s.y**2) * jnp.cos(t) + s.y)

    def rhs_stiff(self, t, s):
        return dict(y=-s.y)


def _oscillator_error(final, t1):
    return np.hypot(float(final["x"]) - np.cos(t1), float(final["v"]) + np.sin(t1))


def _riccati_error(final, t1):
    return abs(float(final["y"]) - 1 / (1 + np.sin(t1)))


PROBLEMS = {
    "oscillator": (SplitOscillator, _oscillator_error),
    "riccati": (SplitRiccati, _riccati_error),
}

# Variable order: its fixed-step error is its order-1 start's; its tolerance proportionality
# is tested in test_solvers_bdf.py.
VARIABLE_ORDER = {"bdf"}

# solver: (problem, end time, numbers of steps). Chosen so that the errors lie in the
# asymptotic regime and well above roundoff (>= 1e-11). Dopri8 converges like order 9 on the
# smooth problems (its principal error coefficients are tiny), so it gets the hard end time.
CONVERGENCE = dict(
    euler=("riccati", 3.0, [128, 256, 512, 1024]),
    heun=("oscillator", 20.0, [128, 256, 512, 1024]),
    midpoint=("oscillator", 20.0, [128, 256, 512, 1024]),
    ralston=("oscillator", 20.0, [128, 256, 512, 1024]),
    bosh3=("oscillator", 20.0, [96, 192, 384, 768]),
    tsit5=("oscillator", 20.0, [256, 384, 512, 768]),
    dopri5=("oscillator", 20.0, [96, 128, 192, 256]),
    dopri8=("riccati", 4.5, [96, 128, 192, 256]),
    implicit_euler=("riccati", 3.0, [128, 256, 512, 1024]),
    kvaerno3=("oscillator", 20.0, [96, 192, 384, 768]),
    kvaerno4=("oscillator", 20.0, [128, 192, 256, 384]),
    kvaerno5=("oscillator", 20.0, [64, 96, 128, 192]),
    rodas5p=("riccati", 3.0, [32, 48, 64, 96]),
    radau5=("riccati", 3.0, [32, 48, 64, 96]),
    kencarp3=("oscillator", 20.0, [96, 192, 384, 768]),
    kencarp4=("oscillator", 20.0, [48, 96, 192, 384]),
    kencarp5=("oscillator", 20.0, [96, 128, 192, 256]),
)


# ------------------------------------------------------------------------------ registry
def test_registry_lists_every_solver_with_its_published_order():
    assert set(SOLVERS) == set(PUBLISHED_ORDER) == set(CONVERGENCE) | PDE_STEPPERS | VARIABLE_ORDER
    for name, info in SOLVERS.items():
        assert info.name == name
        assert info.order == PUBLISHED_ORDER[name], name
        assert issubclass(info.cls, dfx.AbstractSolver)
        assert info.implicit == issubclass(info.cls, dfx.AbstractImplicitSolver), name
        assert info.adaptive == issubclass(info.cls, dfx.AbstractAdaptiveSolver), name
        assert info.imex == ("MultiTerm" in str(info.cls.term_structure)), name
        assert info.description
        assert isinstance(ds.solvers.make_solver(name), info.cls)
        assert ds.solvers.solver_info(info.cls()) is info


def test_names_are_case_insensitive_and_instances_pass_through():
    assert isinstance(ds.solvers.make_solver("Tsit5"), dfx.Tsit5)
    solver = dfx.Dopri5()
    assert ds.solvers.make_solver(solver) is solver
    assert ds.solvers.solver_info(dfx.ReversibleHeun()) is None  # unregistered: no info
    assert set(CONTROLLERS) == {"pid", "constant"}
    assert set(ADJOINTS) == {"checkpoint", "direct", "forward", "backsolve"}
    assert isinstance(ds.solvers.make_adjoint("Forward"), dfx.ForwardMode)
    pid = ds.solvers.make_controller(None, dfx.Tsit5(), rtol=1e-3, atol=1e-4, dt0=None)
    assert isinstance(pid, dfx.PIDController) and (pid.rtol, pid.atol) == (1e-3, 1e-4)
    fixed = ds.solvers.make_controller(None, dfx.Euler(), rtol=1e-3, atol=1e-4, dt0=0.1)
    assert isinstance(fixed, dfx.ConstantStepSize)


def test_wants_split_terms_reads_the_solver_type():
    # Every registered solver answers as its table entry says; diffrax IMEX solvers the
    # registry does not list, and a wrapper of one, are recognised by type alone.
    for name, info in SOLVERS.items():
        assert wants_split_terms(ds.solvers.make_solver(name)) is info.imex, name
    assert wants_split_terms(dfx.KenCarp4())
    assert wants_split_terms(dfx.Sil3())
    assert wants_split_terms(dfx.HalfSolver(dfx.KenCarp3()))
    assert not wants_split_terms(dfx.HalfSolver(dfx.Tsit5()))
    assert not wants_split_terms(dfx.ReversibleHeun())
    assert not wants_split_terms(object())  # no term_structure at all


def test_tables_list_a_class_and_a_description_per_name():
    assert set(ADJOINT_DESCRIPTIONS) == set(ADJOINTS)
    for name, build in ADJOINTS.items():
        assert isinstance(ds.solvers.make_adjoint(name), build), name
        assert isinstance(build(), dfx.AbstractAdjoint) and ADJOINT_DESCRIPTIONS[name], name
    assert all(isinstance(text, str) and text for text in CONTROLLERS.values())
    # Each controller name builds the diffrax class its description names.
    for name, cls in (("pid", dfx.PIDController), ("constant", dfx.ConstantStepSize)):
        built = ds.solvers.make_controller(
            name.upper(), dfx.Tsit5(), rtol=1e-6, atol=1e-8, dt0=0.1, dtmin=1e-9, dtmax=0.5
        )
        assert type(built) is cls and f"diffrax.{cls.__name__}" in CONTROLLERS[name]
        if cls is dfx.PIDController:  # the keywords reach the controller
            assert (built.rtol, built.atol, built.dtmin, built.dtmax) == (1e-6, 1e-8, 1e-9, 0.5)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(solver="rk99"), r"unknown solver 'rk99'; choose one of 'euler', .*'kencarp5'"),
        (dict(adjoint="magic"), r"unknown adjoint 'magic' for simulate; choose one of 'check"),
        (dict(controller="fuzzy"), r"unknown step-size controller 'fuzzy'; .*'pid', 'constant'"),
        (dict(solver="euler"), r"solver Euler with a constant step size needs a step: pass dt0"),
        (dict(controller="constant"), r"Tsit5 with a constant step size needs a step"),
        (dict(solver="euler", controller="pid"), r"Euler has no embedded error estimate"),
        (dict(solver=dfx.KenCarp3()), r"KenCarp3 is IMEX: Plain must define rhs_nonstiff"),
    ],
)
def test_bad_solver_choices_are_named(kwargs, match):
    class Plain(ds.Model):
        state = ds.State(y=1.0)

        def rhs(self, t, s):
            return dict(y=-s.y)

    with pytest.raises(ValueError, match=match):
        ds.simulate(Plain(), t0=0.0, t1=1.0, **kwargs)
    with pytest.raises(TypeError, match=r"solver must be a name or a diffrax solver, got int"):
        ds.solvers.make_solver(3)


def test_diffrax_solver_and_controller_instances():
    ts = np.linspace(0.0, 20.0, 5)
    sol = ds.simulate(
        SplitOscillator(),
        t=ts,
        solver=dfx.Dopri5(),
        controller=dfx.PIDController(rtol=1e-11, atol=1e-11),
    )
    assert sol.solver == "Dopri5"
    np.testing.assert_allclose(sol.x, np.cos(ts), atol=1e-9)


def test_imex_solver_adaptive_on_split_model():
    ts = np.linspace(0.0, 3.0, 4)
    sol = ds.simulate(SplitRiccati(), t=ts, solver="kencarp4", rtol=1e-10, atol=1e-10)
    assert sol.solver == "KenCarp4"
    np.testing.assert_allclose(sol.y, 1 / (1 + np.sin(ts)), rtol=1e-7)


class Robertson(ds.Model):
    """Robertson's (1966) stiff chemical kinetics, rate constants 0.04, 1e4, 3e7."""

    stiff = True
    state = ds.State(a=1.0, b=0.0, c=0.0)

    def rhs(self, t, s):
        return dict(
            a=-0.04 * s.a + 1e4 * s.b * s.c,
            b=0.04 * s.a - 1e4 * s.b * s.c - 3e7 * s.b**2,
            c=3e7 * s.b**2,
        )


def test_stiff_default_solver_is_accurate_and_cheap():
    def rhs(t, y):
        a, b, c = y
        return [-0.04 * a + 1e4 * b * c, 0.04 * a - 1e4 * b * c - 3e7 * b * b, 3e7 * b * b]

    ts = np.array([0.0, 1.0, 1e2, 1e5])
    # rtol 1e-10: within 1.1e-11 (relative) of Radau at 1e-12, in half the time (~5500 Python
    # steps at 1e-12), and still far below the tolerances checked here.
    reference = scipy_reference(
        rhs, (0.0, 1e5), [1.0, 0.0, 0.0], ts, method="Radau", rtol=1e-10, atol=1e-16
    )
    sol = ds.simulate(Robertson(), t=ts, rtol=1e-8, atol=1e-10)
    assert sol.solver == "Kvaerno5"
    got = np.stack([sol.a, sol.b, sol.c], axis=-1)
    # Save times inside a step come from Kvaerno5's third-order dense output: looser there.
    np.testing.assert_allclose(got[:-1], reference[:-1], rtol=3e-5, atol=1e-12)
    np.testing.assert_allclose(got[-1], reference[-1], rtol=1e-6)
    # ~120 steps with a working Newton iteration; diffrax 0.7.2's default VeryChord needs
    # ~1200, half of them rejected.
    assert int(sol.num_steps) < 300, int(sol.num_steps)


# ------------------------------------------------------------------------------ convergence
@pytest.mark.parametrize("name", list(CONVERGENCE))
def test_observed_order_of_convergence(name):
    problem, t1, steps = CONVERGENCE[name]
    model_cls, error = PROBLEMS[problem]

    # One compiled function per solver, the step a traced argument. Tight root-finder
    # tolerances keep the implicit solvers' Newton error far below their truncation error.
    @jax.jit
    def final(dt0):
        sol = ds.simulate(
            model_cls(),
            t0=0.0,
            t1=t1,
            save="final",
            solver=name,
            controller="constant",
            dt0=dt0,
            max_steps=1100,
            rtol=1e-13,
            atol=1e-13,
        )
        return sol.final

    dts = t1 / np.asarray(steps, dtype=float)
    errors = np.array([error(final(dt), t1) for dt in dts])
    assert np.all(errors > 1e-11), errors  # above the roundoff floor, so the slope means order
    slope = scipy.stats.linregress(np.log(dts), np.log(errors)).slope
    assert abs(slope - PUBLISHED_ORDER[name]) <= 0.2, (slope, errors)
