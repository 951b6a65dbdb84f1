"""`simulate(..., adjoint="discrete")`: one trajectory on the ensemble engine, reverse mode
by the discrete adjoint of its own steps (`_ensemble/_single.py`).

References: the same solve through diffrax (`adjoint="checkpoint"`, diffrax's
`RecursiveCheckpointAdjoint`), forward mode, and central differences. (The engine's
discrete adjoint itself, on stiff and PDE models too: `test_ensemble_discrete.py`.)
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._core import State, Var

T = jnp.linspace(0.0, 1.0, 11)
TOL = 1e-8


def _lorenz_loss(p, adjoint):
    m = eqx.tree_at(lambda q: (q.sigma, q.rho), ds.models.Lorenz(), (p[0], p[1]))
    sol = ds.simulate(m, T, rtol=TOL, atol=TOL, adjoint=adjoint)
    return sum(jnp.sum(v**2) for v in sol.ys.values())


_grad = jax.jit(jax.grad(_lorenz_loss), static_argnums=1)


def test_same_steps_as_diffrax_and_gradient_against_diffrax_forward_mode_and_differences():
    model = ds.models.Lorenz()
    ref = ds.simulate(model, T, rtol=TOL, atol=TOL)
    sol = ds.simulate(model, T, rtol=TOL, atol=TOL, adjoint="discrete")
    assert int(sol.status) == 0 and sol.ts.shape == T.shape
    assert int(sol.num_steps) == int(ref.num_steps)
    for k in ref.ys:
        np.testing.assert_allclose(sol.ys[k], ref.ys[k], rtol=1e-11, atol=1e-11)
    p = jnp.array([10.0, 28.0])
    g = _grad(p, "discrete")
    np.testing.assert_allclose(g, _grad(p, "checkpoint"), rtol=1e-9)
    np.testing.assert_allclose(g, jax.jacfwd(_lorenz_loss)(p, "discrete"), rtol=1e-10)
    # Called outside jit, each solve reuses the engine's program compiled above.
    h = 1e-5
    fd = [(_lorenz_loss(p + h * e, "discrete") - _lorenz_loss(p - h * e, "discrete")) / (2 * h)
          for e in jnp.eye(2)]  # fmt: skip
    np.testing.assert_allclose(g, fd, rtol=3e-5)  # to the accuracy of the adaptive solves


class _NeuralOscillator(ds.Model):
    net: eqx.nn.MLP
    state = State(x=Var(1.0), v=Var(0.0))

    def rhs(self, t, s):
        z = self.net(jnp.stack([s.x, s.v]))
        return dict(x=s.v + 0.1 * z[0], v=-s.x - 0.1 * s.v + 0.1 * z[1])


def test_network_weights_gradient_against_diffrax_and_a_directional_difference():
    net = eqx.nn.MLP(2, 2, 8, 2, activation=jnp.tanh, key=jax.random.key(0))
    model = _NeuralOscillator(net=net)
    ts = jnp.linspace(0.0, 4.0, 9)
    dyn, static = eqx.partition(net, eqx.is_inexact_array)

    def loss(d, adjoint):
        m = eqx.tree_at(lambda m: m.net, model, eqx.combine(d, static))
        sol = ds.simulate(m, ts, rtol=TOL, atol=TOL, adjoint=adjoint)
        return jnp.sum(sol.ys["x"] ** 2 + sol.ys["v"] ** 2)

    grad = jax.jit(jax.grad(loss), static_argnums=1)
    g, ref = grad(dyn, "discrete"), grad(dyn, "checkpoint")
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-12)
    direction = jax.tree.map(lambda x: jnp.cos(jnp.arange(x.size).reshape(x.shape)), dyn)
    along = sum(jnp.vdot(a, b) for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(direction)))
    f = jax.jit(lambda s: loss(jax.tree.map(lambda x, u: x + s * u, dyn, direction), "discrete"))
    h = 1e-5
    np.testing.assert_allclose(along, (f(h) - f(-h)) / (2 * h), rtol=1e-6)


@pytest.mark.parametrize(
    ("model", "kwargs", "culprit"),
    [
        (ds.models.BouncingBall(), {}, "events"),
        (ds.models.Lorenz(), {"event": lambda t, s, m: s.x - 5.0}, "events"),
        (ds.models.OrnsteinUhlenbeck(), {"key": jax.random.key(0)}, "stochastic"),
        (ds.models.Lorenz(), {"solver": "kvaerno5"}, "no ensemble kernel"),
        (ds.models.Lorenz(), {"controller": "constant", "dt0": 0.01}, "ConstantStepSize"),
    ],
)
def test_what_the_engine_does_not_run_is_refused_by_name(model, kwargs, culprit):
    with pytest.raises(ValueError, match=culprit) as info:
        ds.simulate(model, T, adjoint="discrete", **kwargs)
    assert "adjoint='checkpoint'" in str(info.value)
    with pytest.raises(ValueError, match="dense"):
        ds.simulate(ds.models.Lorenz(), t0=0.0, t1=1.0, save="dense", adjoint="discrete")


def test_a_failed_solve_raises_or_reports_its_status():
    with pytest.raises(ds.SolveError, match="MAX_STEPS") as info:
        ds.simulate(ds.models.Lorenz(), T, max_steps=4, adjoint="discrete")
    assert info.value.status == ds.Status.MAX_STEPS
    sol = ds.simulate(ds.models.Lorenz(), T, max_steps=4, adjoint="discrete", throw=False)
    assert int(sol.status) == ds.Status.MAX_STEPS
    assert np.isnan(np.asarray(sol.ys["x"][-1]))


def test_a_fit_through_the_discrete_adjoint_takes_the_checkpointed_fits_steps():
    t = np.linspace(0.0, 4.0, 21)
    data = xr.Dataset({"y": ("time", np.exp(-0.8 * t))}, coords={"time": t})
    fits = [
        ds.fit(
            ds.models.ExponentialDecay(),
            data,
            free=["k"],
            optimizer="adam",
            learning_rate=0.05,
            steps=40,
            adjoint=adjoint,
        )  # fmt: skip
        for adjoint in ("checkpoint", "discrete")
    ]
    np.testing.assert_allclose(fits[1].parameters["k"], fits[0].parameters["k"], rtol=1e-12)
    np.testing.assert_allclose(fits[1].loss_history, fits[0].loss_history, rtol=1e-10)
