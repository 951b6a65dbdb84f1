"""The ensemble engine's discrete adjoint (`_ensemble/_discrete.py`): reverse-mode gradients
against forward mode (an independent derivative: tangents pushed through the same steps),
central finite differences and diffrax's `RecursiveCheckpointAdjoint`, on a non-stiff model
with save times, a stiff one with Rodas5P, a PDE, and with the iterations recomputed from
checkpoints (`segment` smaller than the number of steps)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim import models
from difsim._ensemble import DiscreteAdjoint, simulate_ensemble


class Oscillator(ds.Model):
    k: float = 2.0
    c: float = 0.3
    state = ds.State(x=1.0, v=0.0)

    def rhs(self, t, s):
        return dict(x=s.v, v=-self.k * s.x - self.c * s.v * s.v * s.v)


OSC = Oscillator()
K = jnp.linspace(1.0, 3.0, 5)
# Save times at t0 (the initial state), between steps and at t1.
KW = dict(t=jnp.array([0.0, 0.3, 0.35, 1.7, 3.0]), rtol=1e-10, atol=1e-10)


def _loss(c, k, adjoint):
    sol = simulate_ensemble(OSC.replace(c=c), {"k": k}, adjoint=adjoint, **KW)
    return jnp.sum(sol.ys["x"] ** 2 * jnp.arange(5.0)[None]) + jnp.sum(sol.ys["v"])


_value_and_grads = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)), static_argnums=2)


@pytest.mark.parametrize("segment", [None, 4])
def test_gradient_with_saves_matches_forward_mode_differences_and_diffrax(segment):
    # segment=4: the solve's ~150 iterations fill 4 checkpoint slots many times over
    # (the stride between checkpoints doubles to 64); every 4-iteration chunk but the last
    # is recomputed on the backward pass.
    adjoint = DiscreteAdjoint(segment=segment)
    discrete = _value_and_grads(0.3, K, adjoint)[1]
    forward = _value_and_grads(0.3, K, "forward")[1]
    for d, f in zip(discrete, forward):
        np.testing.assert_allclose(d, f, rtol=1e-11, atol=1e-13)
    if segment is not None:
        return
    eps = 1e-6
    value = lambda c, k: _value_and_grads(c, k, "forward")[0]  # noqa: E731
    np.testing.assert_allclose(
        discrete[0], (value(0.3 + eps, K) - value(0.3 - eps, K)) / (2 * eps), rtol=1e-7
    )
    up, down = value(0.3, K.at[1].add(eps)), value(0.3, K.at[1].add(-eps))
    np.testing.assert_allclose(discrete[1][1], (up - down) / (2 * eps), rtol=1e-7)

    def diffrax_loss(c, k):
        sol = jax.vmap(lambda k: ds.simulate(OSC.replace(c=c, k=k), adjoint="checkpoint", **KW))(k)
        return jnp.sum(sol.ys["x"] ** 2 * jnp.arange(5.0)[None]) + jnp.sum(sol.ys["v"])

    ref = jax.jit(jax.grad(diffrax_loss, argnums=(0, 1)))(0.3, K)
    np.testing.assert_allclose(discrete[0], ref[0], rtol=1e-9)
    np.testing.assert_allclose(discrete[1], ref[1], rtol=1e-9)


def test_final_state_and_a_failed_lane():
    # One lane runs out of steps (k = 400: stiff for Tsit5 at max_steps 60); its final
    # state is NaN and gives no gradient, the others' are exact.
    k = jnp.array([1.0, 2.0, 400.0])

    def loss(c, adjoint):
        sol = simulate_ensemble(
            OSC.replace(c=c), {"k": k}, t0=0.0, t1=2.0, save="final", rtol=1e-8, atol=1e-8,
            max_steps=60, adjoint=adjoint,
        )  # fmt: skip
        x = sol.ys["x"][:, -1]
        return jnp.sum(jnp.where(jnp.isfinite(x), x, 0.0) ** 2), sol.status

    grad = jax.jit(jax.grad(loss, has_aux=True), static_argnums=1)
    g, status = grad(0.3, DiscreteAdjoint())
    assert list(np.asarray(status)) == [int(ds.Status.SUCCESS)] * 2 + [int(ds.Status.MAX_STEPS)]
    np.testing.assert_allclose(g, grad(0.3, "forward")[0], rtol=1e-11)


def test_stiff_robertson_with_rodas5p():
    rob = models.Robertson()
    k1 = jnp.array([0.04, 0.05])

    def loss(k3, adjoint):
        sol = simulate_ensemble(
            rob.replace(k3=k3), {"k1": k1}, t=jnp.array([0.0, 1.0, 5.0]),
            solver="rodas5p", rtol=1e-10, atol=1e-12, adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(sol.ys["y2"] * 1e4) + jnp.sum(sol.ys["y3"])

    # One compiled program (Rodas5P's step differentiated twice over compiles slowly): the
    # finite differences read the loss off the same program.
    value_and_grad = jax.jit(jax.value_and_grad(lambda k3: loss(k3, DiscreteAdjoint(segment=256))))
    k3 = 1e4
    # Fewer iterations than the ring holds: nothing recomputed, the derivative of the
    # forward pass's own steps. (Recomputed, Rodas5P's iterations round differently in the
    # last bits, and the steps then differ slightly: 2e-8 relative, see _discrete.py.)
    g = value_and_grad(k3)[1]
    eps = 1.0
    fd = (value_and_grad(k3 + eps)[0] - value_and_grad(k3 - eps)[0]) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_pde_initial_field():
    # The 1-D heat equation on 16 cells, each lane a diffusivity; the gradient in the
    # shared initial field (16 scalars) against diffrax's reverse mode.
    heat = models.Heat(grid=ds.Grid.periodic((16,), (16.0,)))
    x = jnp.arange(16) / 16
    u0 = jnp.sin(2 * jnp.pi * x) + 0.3 * jnp.cos(6 * jnp.pi * x)
    diff = jnp.array([0.05, 0.1])
    kw = dict(t=jnp.array([0.0, 0.5, 2.0]), solver="tsit5", rtol=1e-10, atol=1e-10)

    def loss(u0):
        m = heat.replace(**{"state.u": u0})
        sol = simulate_ensemble(m, {"D": diff}, adjoint=DiscreteAdjoint(), **kw)
        return jnp.sum(sol.ys["u"] ** 3)

    def diffrax_loss(u0):
        m = heat.replace(**{"state.u": u0})
        one = lambda d: ds.simulate(m.replace(D=d), controller="pid", **kw)  # noqa: E731
        return jnp.sum(jax.vmap(one)(diff).ys["u"] ** 3)

    g = jax.jit(jax.grad(loss))(u0)
    ref = jax.jit(jax.grad(diffrax_loss))(u0)
    np.testing.assert_allclose(g, ref, rtol=1e-8, atol=1e-10)


def test_vmap_of_grad_and_jacfwd_through_the_discrete_path():
    def final_x(c, k):
        sol = simulate_ensemble(OSC.replace(c=c), {"k": k}, t0=0.0, t1=2.0, save="final",
                                rtol=1e-10, atol=1e-10, adjoint=DiscreteAdjoint())  # fmt: skip
        return sol.ys["x"][:, -1]

    rows = jax.jit(jax.vmap(jax.grad(lambda c, k: final_x(c, k[None])[0]), in_axes=(None, 0)))
    jac = jax.jit(jax.jacfwd(final_x))(0.3, K)
    # The solves take more iterations than the ring holds: recomputed chunks may round
    # differently, and the steps then differ in the last bits (docs/sweeps.md).
    np.testing.assert_allclose(rows(0.3, K), jac, rtol=1e-8)
