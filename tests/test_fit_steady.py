"""Steady states by Newton + implicit differentiation, and fitting equilibria data.

Reference: the model's equilibrium solves a cubic, so numpy's polynomial roots give it
independently, and implicit differentiation of the cubic gives the exact gradients.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._core._steady import steady_state
from difsim._fit._fit import fit
from difsim._fit._transforms import Positive


class Cubic(ds.Model):
    """x' = u - a x - b x³, y' = c x - y: one stable equilibrium for a, b > 0, with
    x* the real root of b x³ + a x - u and y* = c x*."""

    u: float = 1.0
    a: float = 1.0
    b: float = 0.5
    c: float = 2.0
    state = ds.State(x=1.0, y=1.0)

    def rhs(self, t, s):
        return dict(x=self.u - self.a * s.x - self.b * s.x**3, y=self.c * s.x - s.y)


def root(u, a, b):
    roots = np.roots([b, 0.0, a, -u])
    return float(roots[np.argmin(np.abs(roots.imag))].real)


U = np.linspace(0.5, 3.0, 6)


def test_tolerances_follow_the_precision():
    # float32: the default is 1e-5 (1e-10, float64's, cannot be met and used to end in
    # NEWTON_MAX_STEPS); a state in float32 reaches the cubic's root to float32 accuracy.
    x32 = steady_state(
        Cubic(u=jnp.float32(1.0), state=ds.State(x=jnp.float32(1.0), y=jnp.float32(1.0)))
    ).x
    assert x32.dtype == jnp.float32
    np.testing.assert_allclose(float(x32), root(1.0, 1.0, 0.5), rtol=1e-5)
    with pytest.raises(ValueError, match=r"steady_state rtol=1e-10 is below what float32"):
        steady_state(Cubic(state=ds.State(x=jnp.float32(1.0), y=jnp.float32(1.0))), rtol=1e-10)
    with pytest.raises(ValueError, match=r"steady_state rtol=1e-16 is below what float64"):
        steady_state(Cubic(), rtol=1e-16)


def test_steady_state_matches_the_cubic_root():
    states = jax.jit(jax.vmap(lambda u: steady_state(Cubic(u=u)).values))(jnp.asarray(U))
    for i, u in enumerate(U):
        x = root(u, 1.0, 0.5)
        assert float(states["x"][i]) == pytest.approx(x, rel=1e-12)
        assert float(states["y"][i]) == pytest.approx(2.0 * x, rel=1e-12)


def test_implicit_gradient_against_exact_and_finite_differences():
    model = Cubic(u=1.7, a=0.8, b=0.6, c=1.5)

    @eqx.filter_jit
    @eqx.filter_grad
    def grad(m):
        return steady_state(m).y

    g = grad(model)
    x = root(1.7, 0.8, 0.6)
    denom = 0.8 + 3 * 0.6 * x**2  # -∂f/∂x at the root
    exact = dict(u=1.5 / denom, a=-1.5 * x / denom, b=-1.5 * x**3 / denom, c=x)
    h = 1e-6
    for name, value in exact.items():
        assert float(getattr(g, name)) == pytest.approx(value, rel=1e-10)
        p = dict(u=1.7, a=0.8, b=0.6, c=1.5)
        up, down = dict(p, **{name: p[name] + h}), dict(p, **{name: p[name] - h})
        fd = (
            up["c"] * root(up["u"], up["a"], up["b"])
            - down["c"] * root(down["u"], down["a"], down["b"])
        ) / (2 * h)  # noqa: E501
        assert float(getattr(g, name)) == pytest.approx(fd, rel=1e-7)


class NoRoot(ds.Model):
    """x' = 1 + x²: never zero."""

    state = ds.State(x=0.0)

    def rhs(self, t, s):
        return dict(x=1.0 + s.x**2)


def test_failure_is_nan_or_an_error():
    assert np.isnan(float(steady_state(NoRoot(), max_steps=20, throw=False).x))
    with pytest.raises(Exception, match="(?i)nonlinear|steps|diverge"):
        steady_state(NoRoot(), max_steps=20)
    with pytest.raises(TypeError, match="expects a difsim.Model"):
        steady_state(object())


def test_fit_equilibria_recovers_parameters():
    truth = dict(a=0.8, b=0.6)
    xs = np.array([root(u, **truth) for u in U])
    data = xr.Dataset({"x_obs": ("u", xs), "y_obs": ("u", 2.0 * xs)}, coords={"u": U})
    start = Cubic(a=0.8 * 1.3, b=0.6 * 0.7)
    res = fit(
        start,
        data,
        {"a": Positive(), "b": Positive()},
        control="u",
        observe={"x_obs": "x", "y_obs": "y"},
    )
    assert res.status is ds.Status.CONVERGED, res.message
    for k, v in truth.items():
        assert res.parameters[k] == pytest.approx(v, rel=1e-6)
    np.testing.assert_allclose(res.predict()[:, 0], xs, rtol=1e-8)
