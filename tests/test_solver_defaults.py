"""Model.solver_defaults: the caller's settings win, then the model's, then difsim's; resolved
once into a `SolverSettings`."""

import diffrax as dfx
import numpy as np
import optimistix as optx
import pytest

import difsim as ds
from difsim._core import solver_settings
from difsim._core._solver_defaults import resolve_solver_settings
from difsim.solvers import wants_split_terms

from .pde_helpers import Heat1D, ReactionDiffusion


def test_resolution_order():
    got = resolve_solver_settings(Heat1D)
    assert got == dict(
        solver="heun",
        dt0=1e-4,
        controller="constant",
        rtol=1e-9,
        atol=1e-6,
        max_steps=16384,
        root_tol=None,
    )
    # Another solver drops the model's step settings (tied to its own solver) but keeps rtol.
    got = resolve_solver_settings(Heat1D, solver="tsit5")
    assert (got["dt0"], got["controller"], got["rtol"]) == (None, None, 1e-9)
    got = resolve_solver_settings(Heat1D, solver="heun", dt0=5e-5, rtol=1e-3)
    assert (got["dt0"], got["controller"], got["rtol"]) == (5e-5, "constant", 1e-3)
    assert resolve_solver_settings(ReactionDiffusion)["solver"] == "tsit5"


def test_simulate_uses_model_defaults():
    sol = ds.simulate(Heat1D(), t0=0.0, t1=0.01, save="final")
    assert sol.solver == "Heun"
    assert int(sol.num_steps) == 100  # t1 / dt0 fixed steps
    lam = 4 * np.sin(np.pi / 32) ** 2 * 32**2
    np.testing.assert_allclose(sol.ys["u"][-1].max(), np.exp(-lam * 0.01), rtol=1e-4)
    adaptive = ds.simulate(Heat1D(), t0=0.0, t1=0.01, save="final", solver="tsit5")
    assert adaptive.solver == "Tsit5" and int(adaptive.num_steps) != 100


def test_bad_solver_defaults_name_the_key():
    class Bad(Heat1D):
        solver_defaults = {"solver": "heun", "step": 0.1}

    with pytest.raises(ValueError, match="Bad.solver_defaults has unknown key 'step'"):
        ds.simulate(Bad(), t0=0.0, t1=0.01)


# ------------------------------------------------------------------------------ SolverSettings
class Decay(ds.Model):
    """y' = -k y, y(0) = 2: y = 2 exp(-k t)."""

    k: float = 0.7
    state = ds.State(y=2.0)

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)


class BigDecay(ds.Model):
    """1001 independent decays: a state just over the size where named implicit solvers go
    matrix-free."""

    state = ds.State(y=ds.Var(np.ones(1001)))

    def rhs(self, t, s):
        return dict(y=-s.y)


def test_settings_are_objects_in_the_same_precedence():
    got = solver_settings(Heat1D())
    assert isinstance(got.solver, dfx.Heun) and isinstance(got.controller, dfx.ConstantStepSize)
    assert (got.dt0, got.rtol, got.atol, got.max_steps) == (1e-4, 1e-9, 1e-6, 16384)
    assert (got.solver_requested, got.controller_requested) == ("heun", "constant")
    assert got.fixed_step and not got.imex
    # Another solver drops the model's step settings but keeps its rtol.
    got = solver_settings(Heat1D(), solver="tsit5", atol=1e-8)
    assert isinstance(got.solver, dfx.Tsit5) and isinstance(got.controller, dfx.PIDController)
    assert (got.controller.rtol, got.controller.atol, got.dt0) == (1e-9, 1e-8, None)
    assert got.controller_requested is None and not got.fixed_step
    instance = dfx.Dopri5()
    assert solver_settings(Decay(), solver=instance).solver is instance


def test_named_implicit_solver_with_fixed_steps_takes_rtol_atol():
    got = solver_settings(Decay(), solver="kvaerno5", controller="constant", dt0=0.1, rtol=1e-7)
    finder = got.solver.root_finder
    assert (finder.rtol, finder.atol, finder.norm) == (1e-7, 1e-6, optx.max_norm)
    # With an adaptive controller the tolerances stay the controller's (diffrax's marker).
    adaptive = solver_settings(Decay(), solver="kvaerno5").solver.root_finder
    assert not isinstance(adaptive.rtol, float)


def test_large_states_make_named_implicit_solvers_matrix_free():
    big = solver_settings(BigDecay(), solver="kvaerno5", root_tol=0.05).solver.root_finder
    assert isinstance(big, ds.solvers.StageNewton) and not big.reuse_jacobian
    assert isinstance(big.linear_solver, ds.solvers.ScaledKrylov) and big.kappa == 0.05
    small = solver_settings(Decay(), solver="kvaerno5").solver.root_finder
    assert isinstance(small, ds.solvers.StageNewton) and small.reuse_jacobian
    assert small.kappa == ds.solvers.DEFAULT_ROOT_TOL
    # An instance is the caller's choice: kept as given.
    own = dfx.Kvaerno5()
    assert solver_settings(BigDecay(), solver=own).solver is own


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(solver="kencarp4"), r"solver KenCarp4 is IMEX: Decay must define rhs_nonstiff"),
        (dict(solver="rk4"), r"unknown solver 'rk4'"),
        (dict(solver="euler"), r"solver Euler with a constant step size needs a step: pass dt0"),
        (dict(controller="adaptive"), r"unknown step-size controller 'adaptive'"),
    ],
)
def test_bad_settings_name_the_culprit(kw, match):
    with pytest.raises(ValueError, match=match):
        solver_settings(Decay(), **kw)


def test_simulate_takes_resolved_settings():
    settings = solver_settings(Decay(), solver="dopri8", rtol=1e-12, atol=1e-12)
    sol = ds.simulate(Decay(), t0=0.0, t1=2.0, save=5, solver=settings)
    named = ds.simulate(Decay(), t0=0.0, t1=2.0, save=5, solver="dopri8", rtol=1e-12, atol=1e-12)
    assert sol.solver == "Dopri8"
    np.testing.assert_array_equal(sol.y, named.y)
    np.testing.assert_allclose(sol.y, 2 * np.exp(-0.7 * np.linspace(0, 2, 5)), rtol=1e-8)
    with pytest.raises(ValueError, match=r"solver is a SolverSettings, which holds rtol"):
        ds.simulate(Decay(), t0=0.0, t1=2.0, solver=settings, rtol=1e-3)


# ------------------------------------------------------------------------------ IMEX by type
@pytest.mark.parametrize(
    "solver, split",
    [
        (dfx.Tsit5(), False),
        (dfx.Kvaerno5(), False),
        (dfx.KenCarp4(), True),
        (ds.solvers.ETDRK4(), True),
        (ds.solvers.CrankNicolson(), True),
        (ds.solvers.newton_krylov("kencarp4"), True),
    ],
)
def test_split_terms_read_from_the_solver_type(solver, split):
    assert wants_split_terms(solver) is split


def test_split_terms_agree_with_the_registry():
    # The registry's hand-written `imex` column is an independent statement of the same fact.
    for name, info in ds.solvers.SOLVERS.items():
        assert wants_split_terms(ds.solvers.make_solver(name)) is info.imex, name


@pytest.mark.parametrize("kw", [dict(), dict(solver="kvaerno5", controller="constant", dt0=0.1)])
def test_equal_settings_hash_alike(kw):
    # A sweep caches its compiled function on the settings: resolving twice must hit it.
    first, second = solver_settings(Decay(), **kw), solver_settings(Decay(), **kw)
    assert first == second and hash(first) == hash(second)
    assert first != solver_settings(Decay(), **kw, rtol=1e-3)
