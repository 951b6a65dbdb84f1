"""Differentiating through the ensemble engine in forward mode (`adjoint="forward"`):
`jax.grad`, `jax.jvp`, `jax.jacfwd` with respect to shared parameters and to each lane's
swept values, against finite differences and against diffrax's own gradient of the same
solves (reverse mode: tests/test_ensemble_adjoint.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._ensemble import simulate_ensemble

MODEL = ds.models.Lorenz()
RHO = jnp.linspace(0.0, 21.0, 12)
KW = dict(t0=0.0, t1=1.0, save=3, rtol=1e-10, atol=1e-10)


def _loss(model, rho):
    # Six differentiated scalars (sigma, beta, the initial state, each lane's rho), in
    # forward mode whatever "auto"'s threshold.
    sol = simulate_ensemble(model, {"rho": rho}, adjoint="forward", **KW)
    return sum(jnp.sum(sol.ys[v] ** 2) for v in "xyz")


# Jitted once: an eager ensemble solve compiles its loop again at every call. The finite
# differences read the loss off the same compiled program (one compile, not two).
_value_and_grads = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)))


def _loss_jit(model, rho):
    return _value_and_grads(model, rho)[0]


def _loss_diffrax(model, rho):
    sol = jax.vmap(lambda r: ds.simulate(model.replace(rho=r), **KW))(rho)
    return sum(jnp.sum(sol.ys[v] ** 2) for v in "xyz")


@pytest.fixture(scope="module")
def grads():
    return _value_and_grads(MODEL, RHO)[1]


def test_grad_matches_finite_differences(grads):
    g_model, g_rho = grads
    eps = 1e-6
    for name in ("sigma", "beta"):
        value = getattr(MODEL, name)
        up = _loss_jit(MODEL.replace(**{name: value + eps}), RHO)
        down = _loss_jit(MODEL.replace(**{name: value - eps}), RHO)
        np.testing.assert_allclose(getattr(g_model, name), (up - down) / (2 * eps), rtol=1e-6)
    for i in (3, 9):
        up, down = _loss_jit(MODEL, RHO.at[i].add(eps)), _loss_jit(MODEL, RHO.at[i].add(-eps))
        np.testing.assert_allclose(g_rho[i], (up - down) / (2 * eps), rtol=1e-6)


def test_grad_matches_diffrax(grads):
    g_model, g_rho = grads
    ref_model, ref_rho = jax.jit(jax.grad(_loss_diffrax, argnums=(0, 1)))(MODEL, RHO)
    for name in ("sigma", "beta", "rho"):
        np.testing.assert_allclose(getattr(g_model, name), getattr(ref_model, name), rtol=1e-9)
    np.testing.assert_allclose(g_rho, ref_rho, rtol=1e-9, atol=1e-12)


def test_forward_mode():
    # jvp in one direction and jacfwd over a parameter equal the reverse-mode gradient.
    @jax.jit
    def finals(sigma):
        return simulate_ensemble(MODEL.replace(sigma=sigma), {"rho": RHO}, **KW).ys["z"][:, -1]

    jac = jax.jit(jax.jacfwd(finals))(10.0)
    jvp = jax.jit(lambda s, t: jax.jvp(finals, (s,), (t,)))
    _, tangent = jvp(10.0, 1.0)
    np.testing.assert_allclose(jac, tangent, rtol=1e-12)
    # Finite differences of the primal values, read off the jvp's compiled program.
    eps = 1e-6
    up, down = jvp(10.0 + eps, 1.0)[0], jvp(10.0 - eps, 1.0)[0]
    np.testing.assert_allclose(jac, (up - down) / (2 * eps), rtol=1e-5, atol=1e-8)


def test_initial_state_gradient():
    # Swept initial values are differentiable too (one tangent gives every lane's).
    x0 = jnp.array([0.5, 1.0, 2.0])

    def loss(x0):
        sol = simulate_ensemble(MODEL, {"state.x": x0}, **KW)
        return jnp.sum(sol.ys["z"] ** 2)

    value_and_grad = jax.jit(jax.value_and_grad(loss))  # one program for both
    g = value_and_grad(x0)[1]
    eps = 1e-6
    fd = np.array(
        [
            (value_and_grad(x0.at[i].add(eps))[0] - value_and_grad(x0.at[i].add(-eps))[0])
            / (2 * eps)
            for i in range(3)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_time_derivatives_are_refused():
    with pytest.raises(ValueError, match="t0, t1"):
        jax.grad(lambda t1: jnp.sum(simulate_ensemble(MODEL, {"rho": RHO}, t0=0.0, t1=t1).ys["x"]))(
            1.0
        )
