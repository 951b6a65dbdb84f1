"""No adjoint returns an unflagged wrong gradient, and a derivative through an adjoint that
cannot take it says which adjoint to use (issue 14, point 6)."""

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np
import pytest

import difsim as ds
from difsim._config import ConfigError, load_config
from difsim.models import ExponentialDecay, Robertson
from difsim.solvers._backsolve import CheckedBacksolveAdjoint

K, T1 = 0.7, 2.0
EXACT = np.exp(-K * T1)  # y(T1) from y(0) = 1
EXACT_DK = -T1 * np.exp(-K * T1)  # its derivative in k
TOL = dict(rtol=1e-10, atol=1e-10)


def _final_y(k, adjoint):
    sol = ds.simulate(ExponentialDecay(k=k), t0=0.0, t1=T1, save="final", adjoint=adjoint, **TOL)
    return sol.final["y"]


# ----------------------------------------------------------------------------- backsolve
def _decay_y(k, max_steps):
    # Forward: 28 Tsit5 steps at these tolerances. The backward solve of the augmented
    # (state, adjoint) system takes more, and inherits max_steps: with 30 it runs out.
    sol = ds.simulate(ExponentialDecay(k=k), t0=0.0, t1=T1, save="final", adjoint="backsolve",
                      max_steps=max_steps, throw=False, **TOL)  # fmt: skip
    return sol.status, sol.final["y"]


def test_failed_backward_solve_raises():
    status, value = _decay_y(K, 30)
    assert int(status) == ds.Status.SUCCESS  # the forward solve succeeds: the error below
    np.testing.assert_allclose(value, EXACT, rtol=1e-8)  # is the backward solve's own
    grad = eqx.filter_jit(jax.grad(lambda k: _decay_y(k, 30)[1]))
    with pytest.raises(eqx.EquinoxRuntimeError) as info:
        grad(K)
    text = str(info.value)
    assert "adjoint='backsolve': the backward (adjoint) solve failed [MAX_STEPS]" in text
    assert "Use adjoint='checkpoint'" in text


@pytest.mark.parametrize(
    ("model", "kw", "why"),
    [
        (Robertson(), {}, "Robertson declares stiff = True"),
        (Robertson(), dict(solver="tsit5"), "Robertson declares stiff = True"),
        (ExponentialDecay(), dict(solver="kvaerno5"), "solver 'kvaerno5' is for stiff"),
        (ExponentialDecay(), dict(solver="rodas5p"), "solver 'rodas5p' is for stiff"),
        (ExponentialDecay(), dict(solver=dfx.Kvaerno5()), "solver Kvaerno5 is for stiff"),
    ],
)
@pytest.mark.parametrize("adjoint", ["backsolve", dfx.BacksolveAdjoint()])
def test_backsolve_on_a_stiff_problem_is_refused(model, kw, why, adjoint):
    # Re-solving a stiff state backwards in time is unstable: on Robertson the continuous
    # adjoint returned 1647 for -2.80 with every backward step succeeding, and on
    # Robertson, HIRES, the Oregonator and stiff van der Pol it now fails. Refused at once.
    with pytest.raises(ValueError) as info:
        ds.simulate(model, t0=0.0, t1=1.0, save="final", adjoint=adjoint, **kw)
    text = str(info.value)
    name = "'backsolve'" if isinstance(adjoint, str) else "BacksolveAdjoint(...)"
    assert text.startswith(f"adjoint={name} on a stiff problem ({why}")
    assert "use adjoint='checkpoint'" in text


def test_backsolve_with_a_stiff_backward_solver_is_refused():
    adjoint = dfx.BacksolveAdjoint(solver=dfx.Kvaerno5())
    with pytest.raises(ValueError, match=r"the backward solver Kvaerno5 is for stiff problems"):
        ds.simulate(ExponentialDecay(), t0=0.0, t1=1.0, adjoint=adjoint)


def test_diffrax_backsolve_instances_are_checked_too():
    own = dfx.BacksolveAdjoint(max_steps=3)  # too few for the backward solve
    checked = ds.solvers.make_adjoint(own)
    assert isinstance(checked, CheckedBacksolveAdjoint) and checked.kwargs == own.kwargs
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"backward \(adjoint\) solve failed"):
        eqx.filter_jit(jax.grad(_final_y))(K, own)


def test_backsolve_gradient_is_exact_when_it_succeeds():
    assert isinstance(ds.solvers.make_adjoint("backsolve"), CheckedBacksolveAdjoint)
    value, grad = eqx.filter_jit(jax.value_and_grad(_final_y))(K, "backsolve")
    np.testing.assert_allclose([value, grad], [EXACT, EXACT_DK], rtol=1e-7)


# ------------------------------------------------------------------- mode and adjoint pairs
def test_reverse_mode_through_forward_adjoint_names_the_fix():
    with pytest.raises(RuntimeError) as info:
        jax.grad(_final_y)(K, "forward")
    text = str(info.value)
    assert "cannot pass through adjoint='forward'" in text
    assert "use adjoint='checkpoint' (the default) for jax.grad" in text
    # Forward mode, what the adjoint is for, is untouched.
    derivative = eqx.filter_jit(jax.jacfwd(_final_y))(K, "forward")
    np.testing.assert_allclose(derivative, EXACT_DK, rtol=1e-7)


@pytest.mark.parametrize(
    ("adjoint", "name"),
    [("checkpoint", "'checkpoint' (the default)"), ("backsolve", "'backsolve'")],
)
def test_forward_mode_through_reverse_only_adjoint_names_the_fix(adjoint, name):
    with pytest.raises(TypeError) as info:
        jax.jvp(lambda k: _final_y(k, adjoint), (K,), (1.0,))
    text = str(info.value)
    assert f"cannot pass through adjoint={name}, which is reverse mode only" in text
    assert "use adjoint='forward' for forward mode, adjoint='direct' for both" in text


def test_direct_adjoint_takes_forward_mode():
    value, tangent = jax.jvp(lambda k: _final_y(k, "direct"), (K,), (1.0,))
    np.testing.assert_allclose([value, tangent], [EXACT, EXACT_DK], rtol=1e-7)


def test_a_config_refuses_backsolve_for_a_stiff_model():
    config = {"model": {"name": "robertson"}, "time": {"t1": 1.0}, "solver": {}}
    with pytest.raises(ConfigError) as info:
        load_config(config, overrides={"solver.adjoint": "backsolve"})
    assert info.value.key == "solver.adjoint"
    assert "Robertson declares stiff = True" in str(info.value)
    load_config(config, overrides={"solver.adjoint": "direct"})  # another adjoint is fine
