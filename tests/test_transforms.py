"""Parameter transforms: bijections checked against closed forms and finite differences."""

import math

import jax.numpy as jnp
import numpy as np
import pytest

import difsim._fit._transforms as tr
from tests.helpers import central_difference

TRANSFORMS = [
    (tr.Identity(), np.array([-1e3, -2.5, 0.0, 3.0, 1e6])),
    (tr.Positive(), np.array([1e-8, 0.028, 1.0, 34.6, 1e5])),
    (tr.Positive("softplus"), np.array([1e-8, 0.028, 1.0, 34.6, 200.0])),
    (tr.Bounded(0.1, 2.0), np.array([0.1000001, 0.5, 1.0, 1.9999])),
    (tr.Bounded(-3, 5), np.array([-2.9, 0.0, 4.5])),
]


@pytest.mark.parametrize("transform,x", TRANSFORMS, ids=lambda v: getattr(v, "describe", str)())
def test_round_trip(transform, x):
    u = transform.inverse(x)
    assert np.all(np.isfinite(np.asarray(u)))
    # A bounded value is computed as lower + width * sigmoid: absolute accuracy ~ eps * width.
    atol = 1e-14 * (transform.upper - transform.lower) if isinstance(transform, tr.Bounded) else 0
    np.testing.assert_allclose(np.asarray(transform.forward(u)), x, rtol=1e-12, atol=atol)
    assert np.all(transform.contains(x))


def test_closed_forms():
    u = np.array([-3.0, -0.2, 0.0, 1.5, 4.0])
    np.testing.assert_allclose(tr.Positive().forward(u), np.exp(u), rtol=1e-14)
    np.testing.assert_allclose(tr.Positive("softplus").forward(u), np.log1p(np.exp(u)), rtol=1e-14)
    sigmoid = 1.0 / (1.0 + np.exp(-u))
    np.testing.assert_allclose(tr.Bounded(0.1, 2.0).forward(u), 0.1 + 1.9 * sigmoid, rtol=1e-14)
    # Bounded maps 0 to the midpoint; Positive(log) maps 0 to 1.
    assert float(tr.Bounded(-3, 5).forward(0.0)) == 1.0
    assert float(tr.Positive().forward(0.0)) == 1.0


@pytest.mark.parametrize("transform,x", TRANSFORMS, ids=lambda v: getattr(v, "describe", str)())
def test_derivative_matches_finite_differences(transform, x):
    for u in np.asarray(transform.inverse(x)):
        h = 1e-6 * max(1.0, abs(u))
        fd = central_difference(lambda v: float(transform.forward(v)), float(u), h)
        assert float(transform.derivative(u)) == pytest.approx(fd, rel=1e-6, abs=1e-12)


def test_outside_domain():
    assert not tr.Positive().contains(0.0)
    assert not tr.Positive().contains(-1.0)
    assert not tr.Bounded(0.1, 2.0).contains(2.0)
    assert not tr.Bounded(0.1, 2.0).contains(0.05)
    assert not tr.Identity().contains(math.inf)
    assert np.isnan(float(tr.Positive().inverse(-1.0)))


@pytest.mark.parametrize(
    "args,match",
    [
        ((2.0, 1.0), "lower must be less than upper"),
        ((1.0, 1.0), "lower must be less than upper"),
        ((0.0, math.inf), "must be finite"),
        ((math.nan, 1.0), "must be finite"),
    ],
)
def test_bad_bounds(args, match):
    with pytest.raises(ValueError, match=match):
        tr.Bounded(*args)
    with pytest.raises(TypeError, match="must be a number"):
        tr.Bounded("0", 1.0)


def test_bad_positive_kind():
    with pytest.raises(ValueError, match="kind must be one of log, softplus"):
        tr.Positive("exp")


def test_as_transform():
    assert isinstance(tr.as_transform("positive"), tr.Positive)
    assert tr.as_transform("softplus").kind == "softplus"
    assert isinstance(tr.as_transform(None), tr.Identity)
    b = tr.as_transform([0.1, 2.0])
    assert (b.lower, b.upper) == (0.1, 2.0)
    with pytest.raises(ValueError, match="'gamma': unknown transform 'bounded'"):
        tr.as_transform("bounded", "gamma")


def test_works_on_arrays_and_under_jit():
    import jax

    x = jnp.array([0.5, 1.5])
    f = jax.jit(lambda v: tr.Bounded(0.1, 2.0).forward(tr.Bounded(0.1, 2.0).inverse(v)))
    np.testing.assert_allclose(np.asarray(f(x)), np.asarray(x), rtol=1e-12)
