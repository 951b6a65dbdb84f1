"""`throw=True` (`difsim._core._throw`): a failed solve raises `ds.SolveError` carrying its
status from an eager call, in a few lines; inside `jit`/`vmap` an equinox error with the
same message, which a derivative under `jit` can no longer drop."""

import traceback

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

LORENZ = ds.models.Lorenz()
SPAN = dict(t0=0.0, t1=100.0, save="final")  # 10 steps cannot reach t = 100


def _x_final(rho, max_steps):
    return ds.simulate(ds.models.Lorenz(rho=rho), **SPAN, max_steps=max_steps).final["x"]


def test_eager_failure_is_a_solve_error_with_status_solution_and_a_short_traceback():
    with pytest.raises(ds.SolveError) as info:
        ds.simulate(LORENZ, **SPAN, max_steps=10)
    error = info.value
    assert isinstance(error, RuntimeError) and error.status == ds.Status.MAX_STEPS
    accepted = int(error.solution.num_accepted_steps)
    rejected = int(error.solution.num_rejected_steps)
    assert accepted + rejected == 10
    text = str(error)
    assert text.startswith("simulate(Lorenz) failed [MAX_STEPS] after 10 steps")
    assert f"({accepted} accepted, {rejected} rejected)" in text and "raise max_steps" in text
    assert np.isnan(float(error.solution.final["x"]))  # what throw=False gives
    # The user's call and simulate's raise: no frames of JAX, equinox or difsim's internals.
    frames = traceback.extract_tb(error.__traceback__)
    assert len(frames) == 2 and frames[-1].name == "simulate", frames
    assert error.__cause__ is None and error.__suppress_context__


def test_eager_success_and_throw_false_raise_nothing():
    sol = ds.simulate(LORENZ, t0=0.0, t1=1.0, save="final")
    assert int(sol.status) == ds.Status.SUCCESS
    sol = ds.simulate(LORENZ, **SPAN, max_steps=10, throw=False)
    assert int(sol.status) == ds.Status.MAX_STEPS


def test_under_jit_and_vmap_the_same_message_comes_from_equinox():
    with pytest.raises(Exception, match=r"simulate\(Lorenz\) failed \[MAX_STEPS\]"):
        jax.jit(_x_final, static_argnums=1)(28.0, 10)
    with pytest.raises(Exception, match=r"simulate\(Lorenz\) failed \[MAX_STEPS\]"):
        jax.vmap(_x_final, in_axes=(0, None))(jnp.array([20.0, 28.0]), 10)


def test_a_derivative_under_jit_does_not_drop_the_check():
    # jax.jit(jax.grad(...)) of a failed solve used to return 0.0 with no error: equinox's
    # check passes tangents through untouched, so only the discarded primal carried it.
    with pytest.raises(Exception, match=r"simulate\(Lorenz\) failed \[MAX_STEPS\]"):
        jax.jit(jax.grad(_x_final), static_argnums=1)(28.0, 10)
    with pytest.raises(ds.SolveError):  # an eager grad reads the status on the host
        jax.grad(_x_final)(28.0, 10)


def test_derivatives_through_the_check_are_unchanged():
    # Against central finite differences of the same (tight) solve.
    def x1(rho, adjoint="checkpoint"):
        model = ds.models.Lorenz(rho=rho)
        sol = ds.simulate(model, t0=0.0, t1=1.0, save="final", rtol=1e-12, atol=1e-12,
                          adjoint=adjoint)  # fmt: skip
        return sol.final["x"]

    h = 1e-5
    fd = (x1(28.0 + h) - x1(28.0 - h)) / (2 * h)
    for derivative in (jax.grad(x1), jax.jit(jax.grad(x1))):
        assert abs(float(derivative(28.0)) - float(fd)) < 1e-6 * abs(float(fd))
    forward = jax.jit(jax.jacfwd(lambda r: x1(r, "forward")))(28.0)
    assert abs(float(forward) - float(fd)) < 1e-6 * abs(float(fd))


class _NoRoot(ds.Model):
    """x' = c + x^2: no equilibrium for c > 0, Newton's method wanders."""

    c: float = 1.0
    state = ds.State(x=0.5)

    def rhs(self, t, s):
        return dict(x=self.c + s.x**2)


def test_steady_state_failures_alike():
    with pytest.raises(ds.SolveError) as info:
        ds.steady_state(_NoRoot(), max_steps=20)
    assert info.value.status == ds.Status.NEWTON_MAX_STEPS
    assert str(info.value).startswith("steady_state(_NoRoot) failed [NEWTON_MAX_STEPS]")

    def root(c):
        return ds.steady_state(_NoRoot(c=c), max_steps=20).x

    with pytest.raises(Exception, match=r"steady_state\(_NoRoot\) failed"):
        jax.jit(jax.grad(root))(1.0)
    # With roots (c = -4: Newton from 0.5 finds x* = sqrt(-c) = 2), the gradient through
    # the check is the implicit one, d/dc sqrt(-c) = -1 / (2 sqrt(-c)).
    assert float(jax.jit(jax.grad(root))(-4.0)) == pytest.approx(-0.25, rel=1e-10)
