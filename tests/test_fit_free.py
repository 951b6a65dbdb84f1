"""Array- and module-valued free variables of `fit` (`difsim._fit._free`): gradients
against finite differences and diffrax by hand, an array fit against the same fit written
with scalars, a learned term recovered, outputs, and the errors of bad `free` names.

Data are analytic (exponential decay) or from scipy's `solve_ivp` at 1e-12, never from
difsim itself.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import xarray as xr

import difsim as ds
from difsim._fit._fit import prepare_fit
from difsim._fit._free import flatten, path_steps
from difsim._plot._fit import estimates_text
from tests.helpers import scipy_reference

K = 0.7  # the decay rate the learned term must find
T = np.linspace(0.0, 3.0, 16)
TOL = dict(rtol=1e-10, atol=1e-10)


def mlp(key: int, width: int = 6) -> eqx.nn.MLP:
    return eqx.nn.MLP(1, 1, width, 1, activation=jnp.tanh, key=jax.random.key(key))


class Learned(ds.Model):
    """du/dt = -k u + net(u): a known term plus a network (a universal ODE)."""

    k: float = 0.0
    net: eqx.Module = eqx.field(default_factory=lambda: mlp(1))
    state = ds.State(u=2.0)

    def rhs(self, t, s):
        return {"u": -self.k * s.u + self.net(s.u[None])[0]}


class Quadratic(ds.Model):
    """du/dt = c0 + c1 u + c2 u², its coefficients an array..."""

    c: jax.Array = eqx.field(default_factory=lambda: np.array([0.1, -0.5, 0.05]))
    state = ds.State(u=1.0)

    def rhs(self, t, s):
        return {"u": self.c[0] + self.c[1] * s.u + self.c[2] * s.u**2}


class QuadraticScalars(ds.Model):
    """... and the same model with three scalar parameters (the independent code path)."""

    c0: float = 0.1
    c1: float = -0.5
    c2: float = 0.05
    state = ds.State(u=1.0)

    def rhs(self, t, s):
        return {"u": self.c0 + self.c1 * s.u + self.c2 * s.u**2}


def decay_data() -> xr.Dataset:
    return xr.Dataset({"u": ("time", 2.0 * np.exp(-K * T))}, coords={"time": T})


def quadratic_data(c=(0.2, -0.8, 0.1), noise=0.001) -> xr.Dataset:
    y = scipy_reference(lambda _, u: [c[0] + c[1] * u[0] + c[2] * u[0] ** 2], (0, 3), [1.0], T)
    y = y[:, 0] + noise * np.random.default_rng(0).standard_normal(T.shape)
    return xr.Dataset({"u": ("time", y)}, coords={"time": T})


@pytest.fixture(scope="module")
def clipped():
    """One problem for the gradient and the clipped step: SGD, a schedule, clip 1e-3 (the
    driver leaves the loss alone, so its gradient is the plain fit's)."""
    rate = optax.exponential_decay(0.1, 1, 0.5)
    setup = prepare_fit(Learned(k=0.3), decay_data(), ["net", "k"], optimizer="sgd",
                        learning_rate=rate, clip=1e-3, **TOL)  # fmt: skip
    return setup, np.asarray(jax.grad(setup.problem.loss)(setup.u0))


def test_network_gradient_matches_finite_differences_and_diffrax(clipped):
    setup, grad = clipped
    u0 = setup.u0
    assert u0.shape == (flatten(Learned().net).size + 1,)  # 19 weights, then k
    direction = jax.random.normal(jax.random.key(3), u0.shape)
    h = 1e-5
    fd = (setup.problem.loss(u0 + h * direction) - setup.problem.loss(u0 - h * direction)) / (2 * h)
    assert grad @ np.asarray(direction) == pytest.approx(float(fd), rel=1e-6)

    # diffrax + equinox by hand: the same loss, differentiated with respect to the network
    # and k together (one compiled gradient).
    def loss(net_k):
        net, k = net_k
        term = diffrax.ODETerm(lambda t, y, _: -k * y + net(y[None])[0])
        sol = diffrax.diffeqsolve(
            term, diffrax.Tsit5(), 0.0, 3.0, None, jnp.asarray(2.0),
            stepsize_controller=diffrax.PIDController(rtol=1e-12, atol=1e-12),
            saveat=diffrax.SaveAt(ts=jnp.asarray(T)), max_steps=100_000,
        )  # fmt: skip
        return 0.5 * jnp.sum((sol.ys - 2.0 * jnp.exp(-K * jnp.asarray(T))) ** 2)

    g_net, g_k = eqx.filter_grad(loss)((Learned().net, jnp.asarray(0.3)))
    by_hand = np.concatenate([np.asarray(flatten(g_net)), [float(g_k)]])
    np.testing.assert_allclose(grad, by_hand, rtol=1e-6, atol=1e-9)


def test_network_recovers_the_missing_term():
    # Nothing known (k = 0): the network alone must learn du/dt = -0.7 u on u in (0.2, 2).
    result = ds.fit(Learned(), decay_data(), ["net"], steps=60, **TOL, progress=False)
    u = np.linspace(0.25, 2.0, 15)
    learned = np.asarray(jax.vmap(result.model.net)(u[:, None]))[:, 0]
    assert np.max(np.abs(learned + K * u)) < 2e-3 * K * 2.0
    assert isinstance(result.parameters["net"], eqx.nn.MLP)
    assert "net" in result.summary() and "19 values (MLP)" in result.summary()
    assert np.all(np.isnan(result.covariance))  # a network's weights: no standard errors
    out = result.to_xarray()
    weight = out["fitted_net_layers_0_weight"]
    np.testing.assert_array_equal(weight.values, np.asarray(result.model.net.layers[0].weight))
    assert weight.attrs["path"] == "net.layers[0].weight" and weight.dims[0].endswith("_dim0")
    lines = estimates_text(out)  # the fit figure's panel: no `parameter` dimension here
    assert len(lines) == 1 and lines[0].startswith("net: 19 values in [")
    assert result.plot() is not None


def test_array_fit_equals_the_scalar_fit(tmp_path):
    data = quadratic_data()
    arr = ds.fit(Quadratic(), data, {"c": ds.Identity(), "state.u": "positive"}, **TOL)
    sca = ds.fit(QuadraticScalars(), data, ["c0", "c1", "c2", "state.u"], **TOL)
    assert arr.status is ds.Status.CONVERGED and sca.status is ds.Status.CONVERGED
    c = [sca.parameters[f"c{i}"] for i in range(3)]
    np.testing.assert_allclose(arr.parameters["c"], c, rtol=1e-7)
    np.testing.assert_allclose(arr.stderr["c"], [sca.stderr[f"c{i}"] for i in range(3)], rtol=1e-5)
    np.testing.assert_allclose(arr.covariance, sca.covariance, rtol=1e-5, atol=1e-12)
    assert arr.parameters["state.u"] == pytest.approx(sca.parameters["state.u"], rel=1e-7)
    assert "shape (3,)" in arr.summary()
    path = arr.save(tmp_path / "fit.nc")
    back = xr.open_dataset(path)
    np.testing.assert_allclose(back["fitted_c"].values, arr.parameters["c"])
    np.testing.assert_allclose(back["fitted_c_stderr"].values, arr.stderr["c"])
    assert list(back["parameter"].values) == ["state.u"]  # scalars stay on `parameter`
    assert arr.to_dict()["parameters"]["c"] == pytest.approx(list(arr.parameters["c"]))


def test_sub_path_and_elementwise_transform():
    # A sub-path frees that array alone (the fit itself is the same code as the whole
    # network's, which test_network_recovers_the_missing_term runs).
    setup = prepare_fit(Learned(k=0.5), decay_data(), ["net.layers[-1].bias", "k"], **TOL)
    assert setup.u0.shape == (2,)
    values = setup.problem.values_from(setup.u0 + 1.0)
    np.testing.assert_allclose(values["net.layers[-1].bias"],
                               np.asarray(Learned().net.layers[-1].bias) + 1.0)  # fmt: skip
    assert values["k"] == pytest.approx(1.5)
    bad = Quadratic()  # c[1] = -0.5 cannot start a Positive transform
    with pytest.raises(ValueError, match=r"1 of the 3 initial values of c lie outside .*index 1"):
        ds.fit(bad, quadratic_data(), {"c": "positive"}, **TOL)


@pytest.mark.parametrize(
    "free, message",
    [
        (["net.in_size"], "net.in_size is a static field of MLP"),
        (["net.layers[0].activation"], r"net.layers.0 \(Linear\) has no field 'activation'"),
        (["net.layers[9]"], r"net.layers \(tuple\) has no item \[9\]"),
        (["net.activation"], "holds no floating-point arrays to fit"),
        (["net", "net.layers[0]"], "one inside the other"),
        (["n"], r"'n' of Counted is an integer or boolean \(int\)"),
        (["network"], "unknown parameter 'network'"),
        (["net..x"], "is not a path like"),
    ],
)
def test_bad_free_names(free, message):
    class Counted(Learned):
        n: int = 3

    with pytest.raises(ValueError, match=message):
        ds.fit(Counted(), decay_data(), free, **TOL)


def test_mismatched_network_output_and_nan_loss():
    class Wide(Learned):
        net: eqx.Module = eqx.field(
            default_factory=lambda: eqx.nn.MLP(1, 3, 4, 1, key=jax.random.key(0))
        )

        def rhs(self, t, s):
            return {"u": self.net(s.u[None])}  # shape (3,) for a scalar state

    with pytest.raises(ValueError, match=r"Wide.rhs returned shape \(3,\) for state variable 'u'"):
        ds.fit(Wide(), decay_data(), ["net"], **TOL)

    class Logged(Learned):
        def rhs(self, t, s):
            return {"u": jnp.log(self.net(s.u[None])[0])}

    negative = eqx.tree_at(lambda m: m.net.layers[-1].bias, Logged(), jnp.array([-10.0]))
    with pytest.raises(ValueError, match="loss of Logged is not finite at the initial guess"):
        ds.fit(negative, decay_data(), ["net"], **TOL)
    poisoned = eqx.tree_at(lambda m: m.net.layers[0].bias, Learned(), jnp.full((6,), jnp.nan))
    with pytest.raises(ValueError, match="6 of the 19 initial values of net lie outside"):
        ds.fit(poisoned, decay_data(), ["net"], **TOL)


def test_checkpoint_of_another_network_is_refused(tmp_path):
    path = tmp_path / "fit.ckpt"
    ds.fit(Learned(), decay_data(), ["net"], optimizer="adam", steps=3, checkpoint=path, **TOL)
    other = Learned(net=mlp(1, width=5))
    with pytest.raises(ValueError, match="checkpoint"):
        ds.fit(other, decay_data(), ["net"], optimizer="adam", steps=3, checkpoint=path, **TOL)
    before = path.read_bytes()
    retrained = Learned(net=mlp(2))  # same shapes, other weights: another problem too
    with pytest.raises(ValueError, match="checkpoint"):
        ds.fit(retrained, decay_data(), ["net"], optimizer="adam", steps=3, checkpoint=path, **TOL)
    assert path.read_bytes() == before  # the refusal loses nothing


def test_clipped_step_with_a_schedule(clipped):
    # SGD's first step clipped to global norm c: exactly -rate * c * g / |g|.
    setup, grad = clipped
    u0 = setup.u0
    driver, state = setup.driver.prepare(setup.problem, u0)
    step = driver.step(setup.problem, u0, state, u0)
    np.testing.assert_allclose(step.u - u0, -0.1 * 1e-3 * grad / np.linalg.norm(grad), rtol=1e-6)
    with pytest.raises(ValueError, match="clip bounds the gradient steps of optax optimizers"):
        ds.fit(Learned(), decay_data(), ["net"], clip=1.0, **TOL)


def test_path_steps():
    assert path_steps("net.layers[0].weight") == ("net", "layers", 0, "weight")
    assert path_steps("net.layers.0") == ("net", "layers", 0)
    assert path_steps("net.layers[-1]") == ("net", "layers", -1)
