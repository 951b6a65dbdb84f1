"""No adjoint returns an unflagged wrong gradient, and a derivative through an adjoint that
cannot take it says which adjoint to use (issue 14, point 6)."""

import diffrax as dfx
import equinox as eqx
import jax
import numpy as np
import pytest

import difsim as ds
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
def _robertson_y1(k1, adjoint):
    # Forward: 37 Kvaerno5 steps, well inside max_steps = 74. The backward solve of the
    # augmented (state, adjoint) system needs many more, and runs out. (diffrax's own
    # BacksolveAdjoint returns -0.0025 here, with no error; the derivative is -2.8036.)
    sol = ds.simulate(
        Robertson(k1=k1), t0=0.0, t1=10.0, save="final", rtol=1e-8, atol=1e-10, max_steps=74,
        adjoint=adjoint, throw=False,
    )  # fmt: skip
    return sol.final["y1"]


def test_failed_backward_solve_raises():
    # (The forward solve succeeds: the message below is the backward solve's own.)
    grad = eqx.filter_jit(jax.grad(lambda k: _robertson_y1(k, "backsolve")))
    with pytest.raises(eqx.EquinoxRuntimeError) as info:
        grad(0.04)
    text = str(info.value)
    assert "adjoint='backsolve': the backward (adjoint) solve failed [MAX_STEPS]" in text
    assert "Use adjoint='checkpoint'" in text


def test_diffrax_backsolve_instances_are_checked_too():
    own = dfx.BacksolveAdjoint(max_steps=3)  # too few for the backward solve
    checked = ds.solvers.make_adjoint(own)
    assert isinstance(checked, CheckedBacksolveAdjoint) and checked.kwargs == own.kwargs
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"backward \(adjoint\) solve failed"):
        eqx.filter_jit(jax.grad(_final_y))(K, own)


def test_backsolve_gradient_is_exact_when_it_succeeds():
    assert isinstance(ds.solvers.make_adjoint("backsolve"), CheckedBacksolveAdjoint)
    value, grad = jax.value_and_grad(_final_y)(K, "backsolve")
    np.testing.assert_allclose([value, grad], [EXACT, EXACT_DK], rtol=1e-7)


# ------------------------------------------------------------------- mode and adjoint pairs
def test_reverse_mode_through_forward_adjoint_names_the_fix():
    with pytest.raises(RuntimeError) as info:
        jax.grad(_final_y)(K, "forward")
    text = str(info.value)
    assert "cannot pass through adjoint='forward'" in text
    assert "use adjoint='checkpoint' (the default) for jax.grad" in text
    # Forward mode, what the adjoint is for, is untouched.
    np.testing.assert_allclose(jax.jacfwd(_final_y)(K, "forward"), EXACT_DK, rtol=1e-7)


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
