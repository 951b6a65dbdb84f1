"""Equation discovery (`ds.discover`, SINDy's STLSQ): a known polynomial term recovered from
a Lotka–Volterra trajectory, the coefficients of pysindy's STLSQ on the same library and
data, the library's terms against pysindy's, the discovered term in a model's `rhs`, and
bad input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

# The UDE Lotka–Volterra of Rackauckas et al. 2020 ("Universal differential equations for
# scientific machine learning"), in the paper's parametrisation: u' = alpha u - beta u v,
# v' = gamma u v - delta v. The network stands for the interaction terms (-0.9 u v, 0.8 u v),
# the "learned" term to be found again.
P = dict(alpha=1.3, beta=0.9, gamma=0.8, delta=1.8)
U0 = dict(u=0.44249296, v=4.6280594)
TRUE = np.array([-0.9, 0.8])  # the interaction coefficients in the learned term


class LotkaVolterra(ds.Model):
    alpha: float = P["alpha"]
    beta: float = P["beta"]
    gamma: float = P["gamma"]
    delta: float = P["delta"]
    state = ds.State(**U0)

    def rhs(self, t, s):
        return dict(
            u=self.alpha * s.u - self.beta * s.u * s.v,
            v=self.gamma * s.u * s.v - self.delta * s.v,
        )


class Interaction(eqx.Module):
    """A stand-in for a trained network: exactly the interaction term, w * u * v."""

    weights: jax.Array

    def __call__(self, x):
        return self.weights * x[0] * x[1]


class UDE(ds.Model):
    alpha: float = P["alpha"]
    delta: float = P["delta"]
    net: eqx.Module = eqx.field(default_factory=lambda: Interaction(jnp.asarray(TRUE)))
    state = ds.State(**U0)

    def rhs(self, t, s):
        learned = self.net(jnp.stack([s.u, s.v]))
        return dict(u=self.alpha * s.u + learned[0], v=-self.delta * s.v + learned[1])


T = jnp.linspace(0.0, 5.0, 101)


@pytest.fixture(scope="module")
def sol():
    return ds.simulate(LotkaVolterra(), t=T, rtol=1e-10, atol=1e-10)


def _interaction(x):
    return TRUE * (x[:, 0] * x[:, 1])[:, None]


def test_recovers_the_interaction_terms_from_noisy_values(sol):
    x = np.stack([sol.ys["u"], sol.ys["v"]], axis=-1)
    exact = _interaction(x)
    noisy = exact + 1e-3 * exact.std(axis=0) * np.random.default_rng(0).normal(size=exact.shape)
    found = ds.discover(noisy, sol)
    assert found.terms == ("1", "u", "v", "u^2", "u*v", "v^2")
    assert found.targets == ("d_u", "d_v") and found.variables == ("u", "v")
    uv = found.terms.index("u*v")
    np.testing.assert_allclose(found.coefficients[:, uv], TRUE, rtol=1e-2)
    others = np.delete(found.coefficients, uv, axis=1)
    assert np.all(others == 0.0)  # dropped terms are exactly zero
    assert found.converged.all() and np.all(found.r2 > 0.999)
    # R² and RMS residual are those of the returned coefficients.
    residual = noisy - found.predict(x)
    np.testing.assert_allclose(found.rmse, np.sqrt(np.mean(residual**2, axis=0)), rtol=1e-10)
    np.testing.assert_allclose(
        found.r2, 1 - np.sum(residual**2, 0) / np.sum((noisy - noisy.mean(0)) ** 2, 0)
    )


def test_the_network_field_of_a_model_and_its_outputs(sol):
    model = UDE()
    by_field = ds.discover(model, sol, field="net")
    by_function = ds.discover(lambda x: jax.vmap(model.net)(x), sol)
    by_module = ds.discover(model.net, sol)
    for found in (by_field, by_function, by_module):
        np.testing.assert_array_equal(found.coefficients, by_field.coefficients)
    assert by_field.equations() == ("d_u = -0.9 u*v", "d_v = 0.8 u*v")
    assert str(by_field).splitlines()[1].startswith("  d_u = -0.9 u*v")
    data = by_field.to_xarray()
    assert data.coefficients.dims == ("target", "term")
    assert float(data.coefficients.sel(target="d_v", term="u*v")) == pytest.approx(0.8, 1e-12)
    assert data.attrs["equations"] == "d_u = -0.9 u*v\nd_v = 0.8 u*v"
    assert by_field.active("d_u") == pytest.approx({"u*v": -0.9}, rel=1e-12)


def test_the_discovered_term_inside_a_model_reproduces_the_trajectory(sol):
    found = ds.discover(UDE(), sol.to_xarray(), field="net")

    class Discovered(ds.Model):
        state = ds.State(**U0)

        def rhs(self, t, s):
            term = found.predict(s)  # traced: the state's scalars give shape (targets,)
            return dict(u=P["alpha"] * s.u + term[0], v=-P["delta"] * s.v + term[1])

    again = ds.simulate(Discovered(), t=T, rtol=1e-10, atol=1e-10)
    for name in ("u", "v"):
        np.testing.assert_allclose(again.ys[name], sol.ys[name], rtol=1e-7, atol=1e-9)


def test_function_library_beside_polynomials(sol):
    u, v = np.asarray(sol.ys["u"]), np.asarray(sol.ys["v"])
    target = {"d_u": 2.0 * np.sin(u) - 0.9 * u * v}
    library = [ds.PolynomialLibrary(degree=2), {"sin(u)": lambda s: jnp.sin(s.u)}]
    found = ds.discover(target, dict(u=u, v=v), library=library, threshold=0.01)
    assert found.active("d_u") == pytest.approx({"u*v": -0.9, "sin(u)": 2.0}, rel=1e-10)
    np.testing.assert_allclose(found.predict({"u": u, "v": v})[:, 0], target["d_u"], atol=1e-12)


def _sindy_case(sol):
    """A degree-3 library on the trajectory and a noisy target of terms of very different
    sizes (0.004 v^3, 0.05 beside O(1) terms)."""
    x = np.stack([sol.ys["u"], sol.ys["v"]], axis=-1)
    u, v = x[:, 0], x[:, 1]
    y = np.stack([1.3 * u - 0.9 * u * v + 0.004 * v**3, 0.8 * u * v - 1.8 * v + 0.05], -1)
    y = y + 0.02 * np.random.default_rng(1).normal(size=y.shape)
    return x, y


@pytest.mark.parametrize("threshold, rounds", [(0.005, 4), (0.05, 2)])
def test_coefficients_match_pysindy_stlsq(sol, threshold, rounds):
    ps = pytest.importorskip("pysindy")
    x, y = _sindy_case(sol)
    library = ds.PolynomialLibrary(degree=3)
    found = ds.discover(y, x, names=("u", "v"), library=library, threshold=threshold)
    assert found.iterations.max() == rounds  # 0.005: four rounds, the six true terms kept
    assert np.count_nonzero(found.coefficients) == (6 if threshold == 0.005 else 4)
    # pysindy's library: the same columns, in the same order.
    theirs = ps.PolynomialLibrary(degree=3).fit(x)
    theta = np.asarray(theirs.transform([x])[0])  # a plain array (not pysindy's AxesArray)
    names = [n.replace(" ", "*") for n in theirs.get_feature_names(["u", "v"])]
    assert tuple(names) == found.terms
    # (a) pysindy's STLSQ (no ridge, refit) on the library and targets scaled to unit RMS,
    # difsim's normalisation: the threshold is then the same number.
    col, tgt = np.sqrt(np.mean(theta**2, 0)), np.sqrt(np.mean(y**2, 0))
    opt = ps.STLSQ(threshold=threshold, alpha=0.0, max_iter=20, unbias=True)
    opt.fit(theta / col, y / tgt)
    reference = opt.coef_ * tgt[:, None] / col
    assert np.array_equal(found.coefficients != 0, reference != 0)
    np.testing.assert_allclose(found.coefficients, reference, rtol=1e-10, atol=1e-12)
    # (b) pysindy's own column normalisation (by the L2 norm), one target at a time: its
    # threshold on xi_j |Theta_j| is difsim's times |y_k|.
    for k in range(y.shape[1]):
        opt = ps.STLSQ(
            threshold=threshold * np.linalg.norm(y[:, k]),
            alpha=0.0,
            normalize_columns=True,
            unbias=True,
        )
        opt.fit(theta, y[:, k])
        np.testing.assert_allclose(found.coefficients[k], opt.coef_[0], rtol=1e-10, atol=1e-12)


def test_polynomial_options_name_the_terms_as_pysindy():
    ps = pytest.importorskip("pysindy")
    x = np.random.default_rng(2).normal(size=(30, 3))
    for interaction, bias in ((False, True), (True, False)):
        ours = ds.PolynomialLibrary(degree=3, interaction=interaction, bias=bias)
        theirs = ps.PolynomialLibrary(
            degree=3, include_interaction=interaction, include_bias=bias
        ).fit(x)
        names = tuple(n.replace(" ", "*") for n in theirs.get_feature_names(["a", "b", "c"]))
        assert ours.names(("a", "b", "c")) == names
        found = ds.discover(x[:, :1], x, names=("a", "b", "c"), library=ours, threshold=0.0)
        np.testing.assert_allclose(
            found.predict(x),
            np.asarray(theirs.transform([x])[0]) @ found.coefficients.T,
            rtol=1e-12,
        )


def _error(match, *args, **kwargs):
    with pytest.raises((ValueError, TypeError), match=match) as info:
        ds.discover(*args, **kwargs)
    assert "\n" not in str(info.value)


def test_bad_input_errors(sol):
    x = np.stack([sol.ys["u"], sol.ys["v"]], axis=-1)
    y = _interaction(x)
    _error("the library has no terms", y, sol, library=ds.PolynomialLibrary(0, bias=False))
    _error("the library has no terms", y, sol, library={})
    _error(r"learned term has shape \(100, 2\), expected \(101, targets\)", y[:-1], sol)
    _error("differ in shape: u \\(101,\\), v \\(100,\\)", y, dict(u=x[:, 0], v=x[1:, 1]))
    _error("3 names \\(u, v, w\\) for 2 state columns", y, x, names=("u", "v", "w"))
    _error("1 target names \\(a\\) for a learned term with 2 outputs", y, sol, targets=["a"])
    bad = np.array(sol.ys["v"]).copy()
    bad[7] = np.nan
    _error("state variable 'v' holds nan at sample 7", y, dict(u=x[:, 0], v=bad))
    _error("the learned target 'd_v' is inf at sample 3", np.where(np.arange(101)[:, None] == 3,
           np.array([0.0, np.inf]), y), sol)  # fmt: skip
    _error("library term 'log\\(u - 1\\)' is nan", y, sol, library={"log(u - 1)":
           lambda s: jnp.log(s.u - 1)})  # fmt: skip
    _error("threshold must be >= 0, got -0.1", y, sol, threshold=-0.1)
    _error("threshold must be >= 0, got nan", y, sol, threshold=float("nan"))
    _error("max_iter must be an integer >= 1, got 0", y, sol, max_iter=0)
    _error("the states have no variable 'w'; they have u, v", y, sol, names=["w"])
    _error("UDE has no field 'nett'.*callable fields are net", UDE(), sol, field="nett")
    _error("UDE is not callable: give field='<name>'", UDE(), sol)
    _error("4 samples for 6 library terms", y[:4], x[:4], names=("u", "v"))
    _error("library names term 'u' twice", y, sol, library=[ds.PolynomialLibrary(1), {"u":
           lambda s: s.u}])  # fmt: skip
    _error("library must be a ds.PolynomialLibrary", y, sol, library="poly")
    with pytest.raises(ValueError, match="degree must be an integer >= 0, got -1"):
        ds.PolynomialLibrary(degree=-1)
