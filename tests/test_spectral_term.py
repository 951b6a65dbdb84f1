"""The Fourier-space non-stiff term: `solvers.SpectralODETerm`, `Model.rhs_nonstiff_spectrum`
and ETDRK4 working on spectra.

References: the same equations with the non-stiff term in physical space (the path ETDRK4
took before the hook, itself checked against scipy in test_etdrk4.py), scipy's DOP853 for
a solve by another solver, and the FFT of the physical term.
"""

import functools
import math
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim.solvers import ETDRK4, SpectralODETerm

from .helpers import scipy_reference

N = 64
GRID = ds.Grid.periodic(N, 8 * math.pi)  # modes up to |k| = 4: k⁴ = 256, stiff
X = np.asarray(GRID.x)
U0 = np.cos(X / 4) * (1 + np.sin(X / 4))


def _multiplier(grid, dtype):
    """-(ik/2) on the 2/3-rule band: the spectrum of -(u²/2)_x is this times FFT(u²)."""
    derivative = ds.spectral.derivative_symbol(grid, "x", dtype=dtype)
    return jnp.where(ds.spectral.dealias_mask(grid), -0.5 * derivative, 0)


class FromSpectrum(ds.Model):
    """Kuramoto–Sivashinsky with the non-stiff term given only as a spectrum, computed from
    `s_hat` (one inverse FFT for u, one forward FFT for u²)."""

    grid: ds.Grid = GRID
    state = ds.State(u=U0)
    solver_defaults: ClassVar = {"solver": "etdrk4", "dt0": 0.05, "controller": "constant"}

    def rhs_nonstiff_spectrum(self, t, s, s_hat):
        u = ds.spectral.irfftn(s_hat.u, self.grid)
        return dict(u=_multiplier(self.grid, u.dtype) * ds.spectral.rfftn(u**2, self.grid))

    def rhs_stiff(self, t, s):
        k2 = -ds.spectral.laplacian_symbol(self.grid, dtype=s.u.dtype)
        return dict(
            u=ds.spectral.irfftn((k2 - k2**2) * ds.spectral.rfftn(s.u, self.grid), self.grid)
        )


class Physical(FromSpectrum):
    """The same equations with the non-stiff term in physical space (no hook)."""

    rhs_nonstiff_spectrum = ds.Model.rhs_nonstiff_spectrum

    def rhs_nonstiff(self, t, s):
        flux_hat = _multiplier(self.grid, s.u.dtype) * ds.spectral.rfftn(s.u**2, self.grid)
        return dict(u=ds.spectral.irfftn(flux_hat, self.grid))


@jax.jit
def _final(model):
    return ds.simulate(model, t0=0.0, t1=2.0, save="final", dt0=0.05).ys["u"][-1]


def test_hook_is_detected_and_rhs_nonstiff_derived_from_it():
    assert FromSpectrum.has_spectrum() and FromSpectrum.has_split()
    assert not Physical.has_spectrum() and Physical.has_split()
    field = np.sin(3 * X / 4) + 0.3 * np.cos(X / 2) ** 3
    state = FromSpectrum().state.with_values({"u": jnp.asarray(field)})
    derived = FromSpectrum().rhs_nonstiff(0.0, state)["u"]
    np.testing.assert_allclose(derived, Physical().rhs_nonstiff(0.0, state)["u"], atol=1e-13)


@pytest.mark.parametrize("model", [FromSpectrum(), ds.models.KuramotoSivashinsky(grid=GRID)])
def test_etdrk4_on_spectra_equals_the_physical_path(model):
    # The zoo model reads the physical state, FromSpectrum the spectrum: both must give the
    # physical-space solve (same method, fewer transforms) to rounding.
    model = model.replace(**{"state.u": jnp.asarray(U0)})
    expected = _final(Physical())
    np.testing.assert_allclose(_final(model), expected, rtol=0, atol=1e-12)


def test_other_solvers_use_the_derived_physical_term():
    # Tsit5 knows nothing of spectra: it integrates rhs = irfft(spectrum) + stiff part. On a
    # long domain (|k| <= 1, not stiff) against scipy on the same semi-discretisation.
    grid = ds.Grid.periodic(32, 32 * math.pi)
    x = np.asarray(grid.x)
    u0 = np.cos(x / 16) * (1 + np.sin(x / 16))
    model = FromSpectrum(grid=grid).replace(**{"state.u": jnp.asarray(u0)})
    sol = ds.simulate(model, t0=0.0, t1=5.0, save="final", solver="tsit5", rtol=1e-11, atol=1e-11)
    k = 2 * np.pi * np.fft.rfftfreq(32, 32 * np.pi / 32)
    keep = np.asarray(ds.spectral.dealias_mask(grid))

    def rhs(t, u):
        nonlinear = np.fft.irfft(np.where(keep, -0.5j * k, 0) * np.fft.rfft(u**2), 32)
        return nonlinear + np.fft.irfft((k**2 - k**4) * np.fft.rfft(u), 32)

    reference = scipy_reference(rhs, (0.0, 5.0), u0, [5.0], rtol=1e-12, atol=1e-12)[0]
    np.testing.assert_allclose(sol.u[-1], reference, rtol=0, atol=1e-8)


def _while_body_ffts(model) -> int:
    """FFTs in the compiled step loop of a 20-step ETDRK4 solve (most FFTs of any loop)."""
    solve = jax.jit(lambda m: ds.simulate(m, t0=0.0, t1=1.0, save="final").ys["u"])
    computations = solve.lower(model).compile().as_text().split("\n\n")
    return max(c.count(" fft(") for c in computations if not c.lstrip().startswith("ENTRY"))


def test_a_step_costs_two_transforms_per_stage():
    # The zoo model reads the physical stage: 4 stages × (inverse FFT of the stage, FFT of
    # u²), less the first stage's inverse FFT (the state is known in physical space), plus
    # the step's result in physical space: 8. FromSpectrum reads the spectrum, so it also
    # transforms the first stage: 9. In physical space every stage also transforms the
    # term's output back and forth.
    zoo = ds.models.KuramotoSivashinsky(grid=GRID)
    assert _while_body_ffts(zoo) == 8
    assert _while_body_ffts(FromSpectrum()) == 9
    assert _while_body_ffts(Physical()) >= 15


@functools.cache
def _raw_terms(spectrum):
    """Hand-written KS terms on a `(1, N)` state for diffrax directly (the same objects for
    the same spectrum, so that diffrax's compiled solve is reused)."""
    k = 2 * np.pi * np.fft.rfftfreq(N, 8 * np.pi / N)
    multiplier = np.where(np.asarray(ds.spectral.dealias_mask(GRID)), -0.5j * k, 0)[None]

    def physical(t, y, args):
        return jnp.fft.irfft(multiplier * jnp.fft.rfft(y**2), N)

    def stiff(t, y, args):
        return jnp.fft.irfft(((k**2 - k**4) * args)[None] * jnp.fft.rfft(y), N)

    first = dfx.ODETerm(physical) if spectrum is None else SpectralODETerm(physical, spectrum)
    return dfx.MultiTerm(first, dfx.ODETerm(stiff))


def _diffrax_solve(spectrum, dt=0.1):
    # diffrax's own loop: it wraps the terms (WrapTerm) and passes a traced made_jump.
    # The step as an array: traced, so either step runs the same compiled solve.
    sol = dfx.diffeqsolve(
        _raw_terms(spectrum), ETDRK4(), 0.0, 2.0, jnp.asarray(dt), jnp.asarray(U0)[None], args=1.0,
        saveat=dfx.SaveAt(t1=True), stepsize_controller=dfx.ConstantStepSize(),
    )  # fmt: skip
    return np.asarray(sol.ys[0, 0])


def test_spectral_term_in_diffrax_loop_equals_physical_term():
    k = 2 * np.pi * np.fft.rfftfreq(N, 8 * np.pi / N)
    multiplier = np.where(np.asarray(ds.spectral.dealias_mask(GRID)), -0.5j * k, 0)[None]

    def spectrum(t, y, y_hat, args):
        return multiplier * jnp.fft.rfft(y**2)

    expected = _diffrax_solve(None)
    np.testing.assert_allclose(_diffrax_solve(spectrum), expected, rtol=0, atol=1e-12)
    # 0.3 does not divide 2: the last step is shorter, coefficients recomputed; still equal.
    np.testing.assert_allclose(_diffrax_solve(spectrum, 0.3), _diffrax_solve(None, 0.3), atol=1e-12)


def test_a_spectrum_that_disagrees_with_the_physical_term_is_rejected():
    k = 2 * np.pi * np.fft.rfftfreq(N, 8 * np.pi / N)
    multiplier = np.where(np.asarray(ds.spectral.dealias_mask(GRID)), -0.5j * k, 0)[None]

    def normalised(t, y, y_hat, args):  # a common slip: the "ortho" FFT normalisation
        return multiplier * jnp.fft.rfft(y**2, norm="ortho")

    with pytest.raises(Exception, match="spectral form of the non-stiff term does not equal"):
        _diffrax_solve(normalised)

    def physical_space(t, y, y_hat, args):
        return jnp.fft.irfft(multiplier * jnp.fft.rfft(y**2), N)

    with pytest.raises(ValueError, match=r"spectrum has shape \(1, 64\), but .* \(1, 33\)"):
        _diffrax_solve(physical_space)


def test_model_hook_errors_name_the_culprit():
    class WrongShape(FromSpectrum):
        def rhs_nonstiff_spectrum(self, t, s, s_hat):
            return dict(u=s.u)  # the field, not its spectrum

    with pytest.raises(ValueError, match=r"rhs_nonstiff_spectrum returned shape \(64,\) for "
                       r"state variable 'u', whose spectrum's shape is \(33,\)"):  # fmt: skip
        ds.simulate(WrongShape(), t0=0.0, t1=0.1)

    class OnAWall(FromSpectrum):
        pass

    with pytest.raises(ValueError, match="needs exactly one Grid field, periodic on every axis"):
        ds.simulate(OnAWall(grid=ds.Grid.neumann(N)), t0=0.0, t1=0.1)
