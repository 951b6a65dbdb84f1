"""The ensemble engine on models holding an equinox network, an array field or a custom
module (issue 28, point 1). `ds.simulate_ensemble` of a model with an `eqx.nn.MLP` field
raised `TypeError: Output from batched function <PjitFunction of tanh> ... is not a valid
JAX type` (the activation went through `jax.vmap` as if it were an array). Each case is
checked against diffrax written by hand (Tsit5, the same tolerances, `jax.vmap` over the
lanes) and against central finite differences along a random direction."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

from .helpers import UDE

RTOL = ATOL = 1e-10
TS = jnp.linspace(0.0, 1.0, 6)
ALPHA = jnp.array([1.0, 1.3, 0.7])


class Closure(eqx.Module):
    """A small learned term: arrays and a callable (static) field."""

    w: jax.Array
    b: jax.Array
    act: object = eqx.field(static=True, default=jnp.sin)

    def __call__(self, x):
        return self.act(self.w @ x + self.b)


class Damped(ds.Model):
    k: float = 0.5
    term: Closure = eqx.field(
        default_factory=lambda: Closure(
            jnp.array([[0.1, 0.2], [0.3, -0.1]]), jnp.array([0.05, -0.02])
        )
    )
    state = ds.State(x=1.0, y=0.5)

    def rhs(self, t, s):
        c = self.term(jnp.stack([s.x, s.y]))
        return {"x": -self.k * s.x + c[0], "y": -self.k * s.y + c[1]}


class Reaction(ds.Model):
    """Diffusion with a decay rate that varies in space: `k` is a field on the grid."""

    D: float = 0.1
    k: jax.Array = eqx.field(default_factory=lambda: jnp.linspace(0.5, 1.5, 8))
    grid: ds.Grid = ds.Grid.dirichlet(8, 1.0)
    state = ds.State(u=ds.Var(None))

    def initial_state(self):
        return self.state.replace(u=jnp.sin(jnp.pi * self.grid.mesh()[0]))

    def rhs(self, t, s):
        return {"u": self.D * ds.fd.laplacian(s.u, self.grid) - self.k * s.u}


def _flat(sol_ys):
    """The state of a lane at the save times as one array `(time, entries)`."""
    return jnp.concatenate([jnp.reshape(v, (v.shape[0], -1)) for v in sol_ys], axis=1)


def _loss(ys):
    return jnp.sum(ys**2) + jnp.sum(jnp.sin(3.0 * ys))


@eqx.filter_jit
def ensemble_loss(model, key, values, adjoint="auto"):
    sol = ds.simulate_ensemble(model, {key: values}, TS, rtol=RTOL, atol=ATOL, adjoint=adjoint)
    names = model.initial_state().names
    return _loss(jax.vmap(lambda *ys: _flat(ys))(*[sol.ys[n] for n in names]))


@eqx.filter_jit
def diffrax_loss(model, key, values):
    """The same loss from `diffrax.diffeqsolve` by hand, `jax.vmap` over the lanes
    (forward-mode differentiable: `diffrax.ForwardMode`, whose `jax.jacfwd` compiles in a
    third of the time of a reverse-mode gradient)."""
    names = model.initial_state().names

    def one(value):
        m = eqx.tree_at(lambda m: getattr(m, key), model, value)
        y0 = {n: jnp.asarray(v) for n, v in m.initial_state().items()}
        f = lambda t, y, args: m.rhs(t, m.initial_state().with_values(y))  # noqa: E731
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f), diffrax.Tsit5(), TS[0], TS[-1], None, y0,
            saveat=diffrax.SaveAt(ts=TS), max_steps=10_000, adjoint=diffrax.ForwardMode(),
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
        )  # fmt: skip
        return _flat([sol.ys[n] for n in names])

    return _loss(jax.vmap(one)(values))


def diffrax_grad(model, key, values):
    """The gradient of [`diffrax_loss`][] in every floating array of `model` (`None`
    elsewhere, as `eqx.filter_grad` gives it), by `jax.jacfwd`."""
    params, static = eqx.partition(model, eqx.is_inexact_array)
    return jax.jacfwd(lambda p: diffrax_loss(eqx.combine(p, static), key, values))(params)


def _directional_fd(loss, model, direction, h=1e-6):
    plus = eqx.apply_updates(model, jax.tree.map(lambda d: h * d, direction))
    minus = eqx.apply_updates(model, jax.tree.map(lambda d: -h * d, direction))
    return (loss(plus) - loss(minus)) / (2 * h)


def _direction(model, seed):
    """A random unit-scale direction in every array of `model` (a pytree like it)."""
    params = eqx.filter(model, eqx.is_inexact_array)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    return jax.tree.unflatten(
        tree, [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    )


def _dot(a, b):
    return sum(jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def _rel(a, b):
    a, b = jax.tree.leaves(a), jax.tree.leaves(b)
    num = max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(a, b))
    return num / max(float(jnp.max(jnp.abs(y))) for y in b)


def test_the_issue_ensemble_runs_and_matches_diffrax():
    m = UDE()
    sol = ds.simulate_ensemble(m, {"alpha": jnp.array([1.0, 1.3])}, t0=0.0, t1=1.0)
    assert np.all(np.asarray(sol.status) == 0)
    # The network's activation passes through unbatched; its arrays get the lanes axis.
    assert sol.model.net.activation is jnp.tanh
    assert sol.model.net.layers[0].weight.shape == (2, 5, 2)
    assert float(ensemble_loss(m, "alpha", ALPHA)) == pytest.approx(
        float(diffrax_loss(m, "alpha", ALPHA)), rel=1e-12
    )


def test_reverse_mode_gradient_in_the_network_weights():
    """59 differentiated scalars (57 weights and delta): the reverse-mode path."""
    m = UDE()
    grad = eqx.filter_grad(lambda mm: ensemble_loss(mm, "alpha", ALPHA, "checkpoint"))(m)
    reference = diffrax_grad(m, "alpha", ALPHA)
    arrays = lambda g: eqx.filter((g.delta, g.net), eqx.is_array)  # noqa: E731
    assert _rel(arrays(grad), arrays(reference)) < 1e-12
    assert float(grad.alpha) == 0.0  # every lane overrides alpha
    direction = _direction(m, 1)
    direction = eqx.tree_at(lambda d: d.alpha, direction, jnp.zeros(()))
    fd = _directional_fd(lambda mm: ensemble_loss(mm, "alpha", ALPHA), m, direction)
    assert float(_dot(grad, direction)) == pytest.approx(float(fd), rel=1e-7)


def test_forward_mode_through_a_custom_module():
    """A jvp in the module's arrays and the initial state (8 scalars; `k` swept): the
    forward-mode path, whose primal is the finite differences'."""
    m = Damped()
    values = jnp.array([0.4, 0.6])
    direction = _direction(m, 2)
    tangent = eqx.filter_jvp(lambda mm: ensemble_loss(mm, "k", values, "forward"), (m,),
                             (direction,))[1]  # fmt: skip
    fd = _directional_fd(lambda mm: ensemble_loss(mm, "k", values, "forward"), m, direction)
    assert float(tangent) == pytest.approx(float(fd), rel=1e-7)
    reference = diffrax_grad(m, "k", values)
    assert float(tangent) == pytest.approx(float(_dot(reference, direction)), rel=1e-12)


def test_gradient_in_an_array_field_on_a_grid():
    m = Reaction()
    values = jnp.array([0.05, 0.1])
    grad = eqx.filter_grad(lambda mm: ensemble_loss(mm, "D", values))(m)
    reference = diffrax_grad(m, "D", values)
    assert grad.k.shape == (8,)
    assert _rel(grad.k, reference.k) < 1e-12
    direction = eqx.filter(_direction(m, 3), lambda x: x.shape == (8,))
    fd = _directional_fd(lambda mm: ensemble_loss(mm, "D", values), m, direction)
    assert float(jnp.vdot(grad.k, direction.k)) == pytest.approx(float(fd), rel=1e-7)


def test_a_network_is_not_a_lane_value():
    m = UDE()
    with pytest.raises(
        ValueError, match=r"points: UDE's 'net' is a sub-module \(MLP\), not a number or an array"
    ):
        ds.simulate_ensemble(m, {"net": [m.net, m.net]}, t0=0.0, t1=1.0)
