"""The ensemble engine's differentiation strategies (`adjoint=`): reverse mode with
checkpointing against forward mode, finite differences and diffrax's own gradient; the
automatic choice; every JAX transformation through the reverse-mode path."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._ensemble import AutoAdjoint, _solve, simulate_ensemble


class Oscillator(ds.Model):
    """Damped oscillator: few parameters, well conditioned (reverse and forward mode then
    agree to rounding)."""

    k: float = 2.0
    c: float = 0.3
    state = ds.State(x=1.0, v=0.0)

    def rhs(self, t, s):
        return dict(x=s.v, v=-self.k * s.x - self.c * s.v)


class Coupled(ds.Model):
    """`dx/dt = -W x`, `x` of 3 entries: `W` is 9 differentiated scalars."""

    W: jax.Array
    state = ds.State(x=ds.Var(np.array([1.0, 0.5, -0.5])))

    def rhs(self, t, s):
        return dict(x=-(self.W @ s.x))


OSC = Oscillator()
W0 = jnp.array([[1.0, 0.2, 0.0], [-0.1, 0.8, 0.3], [0.0, -0.2, 1.2]])
K = jnp.linspace(1.0, 3.0, 5)
KW = dict(t0=0.0, t1=3.0, save=4, rtol=1e-10, atol=1e-10)


def _loss(c, k, adjoint):
    sol = simulate_ensemble(OSC.replace(c=c), {"k": k}, adjoint=adjoint, **KW)
    return jnp.sum(sol.ys["x"] ** 2) + jnp.sum(sol.ys["v"])


# Value and gradient in one compiled program: the finite differences read the loss off
# the forward-mode one (one compile, not two).
_value_and_grads = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)), static_argnums=2)


def _grads(c, k, adjoint):
    return _value_and_grads(c, k, adjoint)[1]


def _loss_jit(c, k, adjoint):
    return _value_and_grads(c, k, adjoint)[0]


def test_reverse_mode_matches_forward_mode_finite_differences_and_diffrax():
    reverse = _grads(0.3, K, "checkpoint")
    forward = _grads(0.3, K, "forward")
    for r, f in zip(reverse, forward):
        np.testing.assert_allclose(r, f, rtol=1e-12, atol=1e-14)
    eps = 1e-6
    fd = (_loss_jit(0.3 + eps, K, "forward") - _loss_jit(0.3 - eps, K, "forward")) / (2 * eps)
    np.testing.assert_allclose(reverse[0], fd, rtol=1e-7)
    up, down = (
        _loss_jit(0.3, K.at[2].add(eps), "forward"),
        _loss_jit(0.3, K.at[2].add(-eps), "forward"),
    )
    np.testing.assert_allclose(reverse[1][2], (up - down) / (2 * eps), rtol=1e-7)

    def diffrax_loss(c, k):
        sol = jax.vmap(lambda k: ds.simulate(OSC.replace(c=c, k=k), **KW))(k)
        return jnp.sum(sol.ys["x"] ** 2) + jnp.sum(sol.ys["v"])

    ref = jax.jit(jax.grad(diffrax_loss, argnums=(0, 1)))(0.3, K)
    np.testing.assert_allclose(reverse[0], ref[0], rtol=1e-9)
    np.testing.assert_allclose(reverse[1], ref[1], rtol=1e-9)


def test_auto_goes_reverse_for_many_parameters(monkeypatch):
    calls = []
    monkeypatch.setattr(
        _solve, "_reverse_jvp", lambda *a: calls.append(1) or _reverse(*a), raising=True
    )
    x0 = jnp.outer(jnp.array([0.5, 1.0, 2.0]), jnp.array([1.0, 0.5, -0.5]))

    # Forward mode up to 8 differentiated scalars (the default is 6).
    auto = AutoAdjoint(max_forward=8)

    def loss(W, adjoint=auto, x0=x0):
        sol = simulate_ensemble(
            Coupled(W=W), {"state.x": x0}, t0=0.0, t1=1.0, save="final", rtol=1e-10,
            atol=1e-10, adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(sol.ys["x"][:, -1] ** 3)

    W = W0
    g = jax.jit(jax.grad(loss))(W)  # 9 scalars > 8: reverse mode
    assert calls
    calls.clear()
    forward = jax.jit(jax.value_and_grad(lambda W: loss(W, "forward")))
    g_forward = forward(W)[1]
    assert not calls
    np.testing.assert_allclose(g, g_forward, rtol=1e-12)
    # Finite differences of the loss, read off the forward-mode program (no new compile).
    eps = 1e-6
    dW = jnp.zeros((3, 3)).at[1, 2].set(eps)
    up, down = forward(W + dW)[0], forward(W - dW)[0]
    np.testing.assert_allclose(g[1, 2], (up - down) / (2 * eps), rtol=1e-7)
    # With respect to the swept initial values: 3 per lane, one tangent each covering
    # every lane, so forward mode.
    jax.jit(jax.grad(lambda x0: loss(W, x0=x0)))(x0)
    assert not calls


_reverse = _solve._reverse_jvp


def test_forward_mode_in_groups_of_tangents(monkeypatch):
    # W's 9 scalars in groups of 4 (three passes, the last of one tangent): the same
    # gradient as reverse mode, and as finite differences of the loss.
    monkeypatch.setattr(_solve, "TANGENT_GROUP", 4)
    x0 = jnp.array([[1.0, 0.5, -0.5], [0.5, 0.25, -0.25]])

    def loss(W, adjoint):
        sol = simulate_ensemble(
            Coupled(W=W), {"state.x": x0}, t0=0.0, t1=1.0, save=3, rtol=1e-10,
            atol=1e-10, adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(sol.ys["x"] ** 3)

    grouped = jax.jit(jax.value_and_grad(lambda W: loss(W, "forward")))
    g = grouped(W0)[1]
    np.testing.assert_allclose(g, jax.jit(jax.grad(lambda W: loss(W, "checkpoint")))(W0),
                               rtol=1e-9)  # fmt: skip
    eps = 1e-6
    for i, j in ((0, 0), (2, 1)):
        dW = jnp.zeros((3, 3)).at[i, j].set(eps)
        fd = (grouped(W0 + dW)[0] - grouped(W0 - dW)[0]) / (2 * eps)
        np.testing.assert_allclose(g[i, j], fd, rtol=1e-7)


def test_every_transformation_passes_the_reverse_path():
    # jacfwd (forward mode under vmap), vmap of grad (reverse mode under vmap): the two
    # halves of the reverse-mode path, each through the batching rule it needs.
    def finals(c, k):
        sol = simulate_ensemble(
            OSC.replace(c=c), {"k": k}, t0=0.0, t1=3.0, save="final", rtol=1e-10, atol=1e-10,
            adjoint="checkpoint",
        )  # fmt: skip
        return sol.ys["x"][:, -1]

    # The primal values come out of the jacfwd program too (has_aux): the finite
    # differences below need no program of their own.
    def twice(c, k):
        y = finals(c, k)  # one solve: the output and, as aux, its primal value
        return y, y

    jac_and_finals = jax.jit(jax.jacfwd(twice, has_aux=True))
    jac_c = jac_and_finals(0.3, K)[0]
    rows = jax.jit(jax.vmap(jax.grad(lambda c, k: finals(c, k[None])[0]), in_axes=(None, 0)))
    np.testing.assert_allclose(rows(0.3, K), jac_c, rtol=1e-12)
    eps = 1e-6
    up, down = jac_and_finals(0.3 + eps, K)[1], jac_and_finals(0.3 - eps, K)[1]
    np.testing.assert_allclose(jac_c, (up - down) / (2 * eps), rtol=1e-7)


def test_adjoint_choice_is_checked():
    with pytest.raises(ValueError, match="simulate_ensemble does not take adjoint='backsolve'"):
        simulate_ensemble(OSC, {"k": K}, t0=0.0, t1=1.0, adjoint="backsolve")
    from difsim._ensemble import CheckpointAdjoint

    with pytest.raises(ValueError, match="checkpoints must be a positive int"):
        CheckpointAdjoint(checkpoints=0)
    with pytest.raises(ValueError, match="max_forward must be an int"):
        AutoAdjoint(max_forward=2.5)
