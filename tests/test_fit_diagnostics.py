"""`difsim._fit._diagnostics`: the final-point test's numbers against numpy's least squares
and linear solves, its verdict, and the warnings on poorly determined estimates (a
near-singular Gauss–Newton Hessian checked on a model whose data fix only a product of two
rates, against the closed form exp(-a b t))."""

import warnings

import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._fit._diagnostics import (
    Estimate,
    _near_singular,
    is_stationary,
    newton_decrease,
    projected_decrease,
)

RNG = np.random.default_rng(0)


def _lstsq_decrease(jac, r):
    step = np.linalg.lstsq(jac, r, rcond=None)[0]
    return 0.5 * float(np.sum((jac @ step) ** 2))


def test_projected_decrease_is_the_gauss_newton_prediction():
    jac, r = RNG.normal(size=(20, 3)), RNG.normal(size=20)
    expected = _lstsq_decrease(jac, r)
    assert projected_decrease(r, jac) == pytest.approx(expected, rel=1e-12)
    # Invariant under scaling the variables (columns), however unequal.
    scaled = jac * np.array([1e-6, 1.0, 1e8])
    assert projected_decrease(r, scaled) == pytest.approx(expected, rel=1e-10)
    # A repeated column adds no direction; a zero column none either.
    extra = np.column_stack([jac, jac[:, 0], np.zeros(20)])
    assert projected_decrease(r, extra) == pytest.approx(expected, rel=1e-10)
    # Residuals orthogonal to the columns: nothing left to gain.
    q = np.linalg.qr(jac, mode="complete")[0]
    assert projected_decrease(q[:, 5], jac) == pytest.approx(0.0, abs=1e-28)
    assert np.isnan(projected_decrease(np.full(20, np.nan), jac))


def test_newton_decrease_is_half_the_newton_decrement():
    a = RNG.normal(size=(4, 4))
    hess, grad = a @ a.T + 0.1 * np.eye(4), RNG.normal(size=4)
    expected = 0.5 * grad @ np.linalg.solve(hess, grad)
    assert newton_decrease(grad, hess) == pytest.approx(expected, rel=1e-10)


def _estimate(decrease, step):
    p = np.eye(2)
    return Estimate(p, np.zeros(3), 1.0, 1, p, decrease, step)


def test_stationary_by_the_loss_tolerance_or_by_the_step():
    tol = (1e-8, 1e-8)
    assert is_stationary(_estimate(1e-9, 5.0), 1.0, tol)  # below atol + rtol * loss
    assert is_stationary(_estimate(1e-3, 0.05), 1.0, tol)  # a step of 0.05 standard errors
    assert not is_stationary(_estimate(1e-3, 0.5), 1.0, tol)
    assert not is_stationary(_estimate(3e-8, np.nan), 1.0, tol)  # no dof: the loss alone
    assert not is_stationary(_estimate(1e-9, 5.0), 1.0, None)  # optax: the step alone
    assert is_stationary(_estimate(np.nan, np.nan), 1.0, tol) is None  # cannot tell


def test_near_singular_names_the_direction():
    x = RNG.normal(size=(30, 1))
    names = ("k1", "k2", "c")
    jac = np.column_stack([x, -2e3 * x + 1e-6 * RNG.normal(size=(30, 1)), RNG.normal(size=30)])
    line = _near_singular(jac.T @ jac, names)
    assert line.startswith("the Gauss–Newton Hessian JᵀJ is near-singular (condition number ")
    assert "against 1/eps = 4.5e+15 of float64" in line
    assert "+1.00·k1 +1.00·k2 (scaled variables)" in line or "-1.00·k1 -1.00·k2" in line
    well = RNG.normal(size=(30, 3))
    assert _near_singular(well.T @ well, names) is None
    # float32 keeps fewer digits: k1 and k2 correlated to 1 - 1e-5 (condition number 2e5)
    # are near-singular there, not in float64.
    mild = np.array([[1.0, 1 - 1e-5, 0.0], [1 - 1e-5, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert _near_singular(mild, names) is None
    line = _near_singular(mild.astype(np.float32), names)
    assert "condition number 2e+05, against 1/eps = 8.4e+06 of float32" in line
    assert "+1.00·k1 -1.00·k2" in line or "-1.00·k1 +1.00·k2" in line


class Product(ds.Model):
    """dy/dt = -a b y: the data determine the product a b, not a and b."""

    a: float = ds.param(1.0)
    b: float = ds.param(0.5)
    state = ds.State(y=2.0)

    def rhs(self, t, s):
        return dict(y=-self.a * self.b * s.y)


def test_a_fit_of_an_undetermined_pair_warns():
    t = np.linspace(0.0, 3.0, 13)
    data = xr.Dataset({"y": ("time", 2.0 * np.exp(-0.7 * t))}, coords={"time": t})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = ds.fit(Product(), data, {"a": ds.Positive(), "b": ds.Positive()}, progress=False,
                     rtol=1e-10, atol=1e-10)  # fmt: skip
    assert fit.parameters["a"] * fit.parameters["b"] == pytest.approx(0.7, rel=1e-7)
    notes = [str(w.message) for w in caught if issubclass(w.category, ds.FitWarning)]
    singular = [n for n in notes if "near-singular" in n]
    assert len(singular) == 1 and singular[0].startswith("fit(Product): the Gauss–Newton")
    # In log coordinates a and b enter only through log a + log b: the null direction is
    # (1, -1)/sqrt(2), scaled to its largest entry.
    assert "+1.00·a -1.00·b" in singular[0] or "-1.00·a +1.00·b" in singular[0]
    assert any(f"warning: {n.removeprefix('fit(Product): ')}" in fit.summary() for n in singular)
