"""ETDRK4 (difsim.solvers.ETDRK4): coefficients, exactness on linear problems, 4th order on
Kuramoto–Sivashinsky, stability at steps far beyond explicit limits, and use through simulate.

References are independent of the solver: Taylor series of the φ-functions, the exact
Fourier solution of the linear problem, and scipy's DOP853 at tight tolerance on the same
spectral semi-discretisation written in numpy.
"""

import math
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim.solvers import ETDRK4
from difsim.solvers._etdrk4 import _coefficients

from .helpers import scipy_reference

N = 64


# ------------------------------------------------------------------------------ KS problem
def _wavenumbers(length):
    """Angular wavenumbers of `rfft` on `N` points, and the same with the Nyquist mode zeroed
    (for the odd first derivative)."""
    k = 2 * np.pi * np.fft.rfftfreq(N, length / N)
    k_odd = k.copy()
    k_odd[-1] = 0.0
    return k, k_odd


def _nonstiff(t, y, args):
    """-c u u_x = -c (u^2/2)_x; y has shape (1, N)."""
    k_odd = args["k_odd"]
    flux = jnp.fft.rfft(0.5 * y**2, axis=-1)
    return -args["c"] * jnp.fft.irfft(1j * k_odd * flux, N, axis=-1)


def _stiff(t, y, args):
    """a (-u_xx - u_xxxx): symbol k^2 - k^4 (a = 1 unless a test breaks invariance)."""
    k = args["k"]
    return args["a"] * jnp.fft.irfft((k**2 - k**4) * jnp.fft.rfft(y, axis=-1), N, axis=-1)


TERMS = dfx.MultiTerm(dfx.ODETerm(_nonstiff), dfx.ODETerm(_stiff))


@jax.jit
def _solve(y0, t1, dt, args):
    # Everything that varies between tests is traced, so this compiles once for the file.
    sol = dfx.diffeqsolve(
        TERMS,
        ETDRK4(),
        0.0,
        t1,
        dt,
        y0,
        args=args,
        saveat=dfx.SaveAt(t1=True),
        stepsize_controller=dfx.ConstantStepSize(),
        max_steps=64,
    )
    return sol.ys[0]


def _run(u0, t1, dt, args):
    """`_solve` with every number as a float64 array (one compiled version for all calls)."""
    as64 = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    return np.asarray(_solve(as64(u0[None]), as64(t1), as64(dt), jax.tree.map(as64, args)))[0]


def _ks(length, c=1.0, a=None):
    k, k_odd = _wavenumbers(length)
    x = np.arange(N) * length / N
    u0 = np.cos(2 * np.pi * x / length) * (1 + np.sin(2 * np.pi * x / length))
    a = np.ones((1, N)) if a is None else a
    args = dict(k=k[None], k_odd=k_odd[None], c=np.asarray(c), a=np.asarray(a))
    return u0, args


def _ks_numpy(length):
    k, k_odd = _wavenumbers(length)

    def rhs(t, u):
        linear = np.fft.irfft((k**2 - k**4) * np.fft.rfft(u), N)
        return linear - np.fft.irfft(1j * k_odd * np.fft.rfft(0.5 * u**2), N)

    return rhs


def _reference(length, t1):
    u0, _ = _ks(length)
    return scipy_reference(_ks_numpy(length), (0.0, t1), u0, [t1], rtol=1e-13, atol=1e-13)[0]


# ------------------------------------------------------------------------------ tests
def _taylor(z, terms=40):
    """The four φ-coefficients (divided by h) by their Taylor series: accurate for |z| <= 2."""
    f = [math.factorial(j) for j in range(terms + 3)]
    q = sum(0.5 ** (j + 1) * z**j / f[j + 1] for j in range(terms))
    f1 = sum((4 / f[j] - 3 / f[j - 1] + 1 / f[j - 2]) * z ** (j - 3) for j in range(3, terms))
    f2 = sum((1 / f[j - 1] - 2 / f[j]) * z ** (j - 3) for j in range(3, terms))
    f3 = sum((4 / f[j] - 1 / f[j - 1]) * z ** (j - 3) for j in range(3, terms))
    return np.stack([q, f1, f2, f3])


def _closed_form(z):
    ez = np.exp(z)
    return np.stack(
        [
            np.expm1(z / 2) / z,
            (-4 - z + ez * (4 - 3 * z + z**2)) / z**3,
            (2 + z + ez * (z - 2)) / z**3,
            (-4 - 3 * z - z**2 + ez * (4 - z)) / z**3,
        ]
    )


@pytest.mark.parametrize("dtype, rtol", [(jnp.complex128, 1e-13), (jnp.complex64, 2e-5)])
def test_coefficients_match_series_and_closed_forms(dtype, rtol):
    # Near 0 (the contour branch) against the series, far away against the closed forms
    # (accurate there), including complex symbols (advection) and very stiff modes.
    small = np.array([0, 1e-9, 1e-3, -0.3, 0.5j, -0.99, 0.99, 0.7 - 0.7j])
    large = np.array([-1.01, 1.5, -3 + 2j, 20j, -50, -1e6])
    h = 0.5
    e, e2, *phis = _coefficients(jnp.asarray(np.concatenate([small, large]) / h, dtype), h, 32)
    expected = np.concatenate([_taylor(small), _closed_form(large)], axis=1)
    np.testing.assert_allclose(np.stack(phis) / h, expected, rtol=rtol, atol=0)
    z = np.concatenate([small, large])
    np.testing.assert_allclose(e, np.exp(z), rtol=rtol)
    np.testing.assert_allclose(e2, np.exp(z / 2), rtol=rtol)


def test_fourth_order_on_kuramoto_sivashinsky():
    # L = 32π, 64 points: modes up to |k| = 2 (hL down to -4.8 at h = 0.4, beyond RK4's
    # stability limit), the regime where ETDRK4 shows its classical order.
    length, t1 = 32 * np.pi, 2.0
    u0, args = _ks(length)
    reference = _reference(length, t1)
    steps = np.array([0.4, 0.2, 0.1, 0.05])
    errors = [np.max(np.abs(_run(u0, t1, h, args) - reference)) for h in steps]
    order = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(order - 4) < 0.2, (order, errors)
    assert errors[-1] < 1e-9


@pytest.mark.parametrize("length", [32 * np.pi, 8 * np.pi])
def test_linear_problem_is_solved_exactly_for_any_step(length):
    # N = 0: u(t) = irfft(exp((k^2 - k^4) t) rfft(u0)). dt = 0.3 does not divide t1 = 1, so
    # diffrax's later steps are shorter than the first: the coefficients must be recomputed.
    u0, args = _ks(length, c=0.0)
    k = args["k"][0]
    t1 = 1.0
    exact = np.fft.irfft(np.exp((k**2 - k**4) * t1) * np.fft.rfft(u0), N)
    for h in [1.0, 0.3, 0.05]:
        got = _run(u0, t1, h, args)
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-13)


def test_stable_and_accurate_far_beyond_the_explicit_step_limit():
    # L = 8π: |k| up to 8, so the stiff eigenvalues reach k^4 ≈ 4000 and explicit RK4 needs
    # h < 2.8/4000 ≈ 7e-4. ETDRK4 at h = 0.5 (about 700 times larger) stays accurate.
    length, t1 = 8 * np.pi, 2.0
    u0, args = _ks(length)
    reference = _reference(length, t1)
    got = _run(u0, t1, 0.5, args)
    assert np.max(np.abs(got - reference)) < 2e-3 * np.max(np.abs(reference))


def test_a_stiff_term_that_is_not_translation_invariant_is_rejected():
    # A space-dependent coefficient makes the Fourier symbol wrong: a clear run-time error.
    u0, args = _ks(32 * np.pi, a=jnp.asarray(1 + 0.5 * np.sin(np.arange(N))[None]))
    with pytest.raises(Exception, match="ETDRK4: the stiff term is not linear"):
        _run(u0, 1.0, 0.5, args)


def test_bad_state_layouts_raise_clear_errors():
    solver = ETDRK4()
    with pytest.raises(TypeError, match="one real array of shape"):
        solver.init(TERMS, 0.0, 0.1, {"u": jnp.zeros(N)}, None)
    with pytest.raises(ValueError, match="spatial_ndim=2 does not fit a state of shape"):
        ETDRK4(spatial_ndim=2).init(TERMS, 0.0, 0.1, jnp.zeros(N), None)
    with pytest.raises(ValueError, match="spatial_ndim must be None or an integer"):
        ETDRK4(spatial_ndim=-1)


# ------------------------------------------------------------------------------ via simulate
X = np.arange(N) * 8 * np.pi / N


class ForcedKS(ds.Model):
    """KS for u, and v_t = 0.1 v_xx + u: two fields coupled only through the non-stiff part."""

    length: ClassVar[float] = 8 * np.pi
    state = ds.State(u=np.cos(X / 4) * (1 + np.sin(X / 4)), v=np.zeros(N))

    def _k(self, dtype):
        return (2 * jnp.pi * jnp.fft.rfftfreq(N, self.length / N)).astype(dtype)

    def rhs_nonstiff(self, t, s):
        k = self._k(s.u.dtype)
        k_odd = k.at[-1].set(0)
        flux = jnp.fft.irfft(1j * k_odd * jnp.fft.rfft(0.5 * s.u**2), N)
        return dict(u=-flux, v=s.u)

    def rhs_stiff(self, t, s):
        k = self._k(s.u.dtype)

        def apply(symbol, f):
            return jnp.fft.irfft(symbol * jnp.fft.rfft(f), N)

        return dict(u=apply(k**2 - k**4, s.u), v=apply(-0.1 * k**2, s.v))


def _forced_ks_numpy(t, y):
    u, v = y[:N], y[N:]
    k = 2 * np.pi * np.fft.rfftfreq(N, ForcedKS.length / N)
    k_odd = np.where(np.arange(k.size) == k.size - 1, 0.0, k)
    du = np.fft.irfft((k**2 - k**4) * np.fft.rfft(u), N)
    du -= np.fft.irfft(1j * k_odd * np.fft.rfft(0.5 * u**2), N)
    dv = np.fft.irfft(-0.1 * k**2 * np.fft.rfft(v), N) + u
    return np.concatenate([du, dv])


def test_through_simulate_keeps_float32_and_couples_variables():
    # A float32 state: the solve must stay float32 (complex64 in Fourier space).
    model = ForcedKS()
    u0 = np.asarray(model.state["u"], np.float32)
    model = model.replace(**{"state.u": u0, "state.v": np.zeros(N, np.float32)})
    t1 = 1.0
    sol = ds.simulate(model, t0=0.0, t1=t1, save="final", solver="etdrk4", dt0=0.05)
    assert sol.u.dtype == np.float32 and sol.v.dtype == np.float32
    y0 = np.concatenate([u0.astype(np.float64), np.zeros(N)])
    reference = scipy_reference(_forced_ks_numpy, (0.0, t1), y0, [t1], rtol=1e-12, atol=1e-12)[0]
    got = np.concatenate([np.asarray(sol.u[-1]), np.asarray(sol.v[-1])])
    scale = np.max(np.abs(reference))
    assert np.max(np.abs(got - reference)) < 1e-5 * scale
