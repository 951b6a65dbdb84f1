"""ETDRK4: exponential time differencing for stiff semilinear PDEs on periodic grids."""

from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from diffrax import AbstractTerm, LocalLinearInterpolation, MultiTerm
from jax import lax
from jaxtyping import Array, Complex, Float, PyTree

_Coefficients = tuple[Array, Array, Array, Array, Array, Array]  # E, E/2, Q, f1, f2, f3


class ETDRK4(dfx.AbstractSolver):
    r"""Fourth-order exponential time differencing Runge–Kutta (Cox & Matthews 2002).

    For $u' = L u + N(t, u)$ where $L$ is a linear, autonomous, translation-invariant
    operator on a periodic grid (diagonal in Fourier space, e.g. $\nu \nabla^2$, $-\nabla^4$,
    $-c\,\partial_x$) and $N$ is the non-stiff rest. The linear part is integrated exactly,
    so the step is limited by $N$ alone, not by the stiffness of $L$.

    `terms` is `MultiTerm(ODETerm(N), ODETerm(L))` (non-stiff, stiff), as difsim's IMEX path
    builds it from `rhs_nonstiff` and `rhs_stiff`. The solver finds $L$'s Fourier symbol
    itself: it applies the stiff vector field to a unit impulse at the grid origin in every
    variable and takes the FFT of the response. At the start of each solve it checks that
    this symbol reproduces the stiff term on a random field (else a clear error: the stiff
    term is nonlinear, has a forcing, a non-periodic boundary or couples variables).

    **State layout.** The state is one real array of shape `(*vars, *grid)`: the trailing
    `spatial_ndim` axes are the periodic grid, the leading ones index variables, which may
    be coupled through $N$ only ($L$ acts on each variable separately). `spatial_ndim=None`
    (default) takes every axis after the first: difsim's packed state `(n_vars, *grid.shape)`;
    for a 1-D array state that means no spatial axes (an ODE with diagonal $L$). Pass
    `spatial_ndim` explicitly for a state without a variable axis, e.g. `spatial_ndim=1` for
    a single field of shape `(nx,)`.

    **Coefficients.** The $\varphi$-function coefficients are evaluated as in Kassam &
    Trefethen (2005) by the mean over `num_points` points of a circle around each $hL$
    (Cauchy's integral formula), which avoids the cancellation of the direct formulas near
    $hL = 0$. The circle has radius 2, not 1, and is used only where $|hL| < 1$ (the direct
    formulas are accurate beyond): points of a unit circle around $|hL| \approx 1$ pass close
    to 0 and lose digits in float32. They are computed once, in `init`, for the step
    $h = t_1 - t_0$ of the first step; a step of another length (a shorter final step of
    `ConstantStepSize`) recomputes them (`lax.cond`: correct, but slower, so prefer a `dt0`
    that divides the interval).

    Works in Fourier space with real FFTs and keeps the state's dtype (float32 stays
    float32). Fixed step only (no error estimate): use `diffrax.ConstantStepSize`. Dense
    output is linear between steps. Not usable with `diffrax.BacksolveAdjoint` (a two-term
    solver).

    Reference: S. M. Cox and P. C. Matthews, "Exponential time differencing for stiff
    systems", J. Comput. Phys. 176, 430 (2002); A.-K. Kassam and L. N. Trefethen,
    "Fourth-order time-stepping for stiff PDEs", SIAM J. Sci. Comput. 26, 1214 (2005).
    """

    spatial_ndim: int | None = eqx.field(default=None, static=True)
    num_points: int = eqx.field(default=32, static=True)

    term_structure: ClassVar = MultiTerm[tuple[AbstractTerm, AbstractTerm]]
    interpolation_cls: ClassVar[Callable[..., LocalLinearInterpolation]] = LocalLinearInterpolation

    def __check_init__(self):
        if self.spatial_ndim is not None and (
            not isinstance(self.spatial_ndim, int) or self.spatial_ndim < 0
        ):
            raise ValueError(
                f"ETDRK4 spatial_ndim must be None or an integer >= 0, got {self.spatial_ndim!r}"
            )
        if not isinstance(self.num_points, int) or self.num_points < 16:
            raise ValueError(f"ETDRK4 num_points must be an integer >= 16, got {self.num_points!r}")

    def order(self, terms):
        return 4

    def init(self, terms, t0, t1, y0, args):
        axes = self._axes(y0)
        _, stiff = terms.terms
        symbol = _symbol(lambda y: jnp.asarray(stiff.vf(t0, y, args), y0.dtype), y0, axes)
        symbol = _check_symbol(symbol, stiff, t0, y0, args, axes)
        h = jnp.asarray(t1 - t0)
        return h, symbol, _coefficients(symbol, h, self.num_points)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del made_jump
        axes = self._axes(y0)
        explicit, _ = terms.terms
        h0, symbol, coefficients = solver_state
        h = t1 - t0
        eps = jnp.finfo(jnp.result_type(h)).eps
        same = jnp.abs(h - h0) <= 16 * eps * jnp.maximum(jnp.maximum(jnp.abs(t0), jnp.abs(t1)), 1)
        coefficients = lax.cond(
            same,
            lambda: coefficients,
            lambda: _coefficients(symbol, h, self.num_points),
        )
        e, e2, q, f1, f2, f3 = coefficients

        def n_hat(t, y):
            return _fft(jnp.asarray(explicit.vf(t, y, args), y0.dtype), axes)

        def real(v):
            return _ifft(v, axes, y0.shape)

        th = t0 + 0.5 * h
        v = _fft(y0, axes)
        nv = n_hat(t0, y0)
        a = e2 * v + q * nv
        na = n_hat(th, real(a))
        b = e2 * v + q * na
        nb = n_hat(th, real(b))
        c = e2 * a + q * (2 * nb - nv)
        nc = n_hat(t1, real(c))
        y1 = real(e * v + f1 * nv + 2 * f2 * (na + nb) + f3 * nc)
        return y1, None, dict(y0=y0, y1=y1), solver_state, dfx.RESULTS.successful

    def func(self, terms, t0, y0, args):
        explicit, stiff = terms.vf(t0, y0, args)
        return jax.tree.map(jnp.add, explicit, stiff)

    def _axes(self, y) -> tuple[int, ...]:
        if not isinstance(y, jax.Array | np.ndarray) or not jnp.issubdtype(y.dtype, jnp.floating):
            what = type(y).__name__ if not hasattr(y, "dtype") else f"an array of {y.dtype}"
            raise TypeError(
                "ETDRK4 needs the state as one real array of shape (*vars, *grid), got "
                f"{what} (difsim packs the variables into one array only when they all have "
                "the same shape)"
            )
        ndim = y.ndim - 1 if self.spatial_ndim is None else self.spatial_ndim
        if ndim < 0 or ndim > y.ndim:
            raise ValueError(
                f"ETDRK4 spatial_ndim={self.spatial_ndim} does not fit a state of shape {y.shape}"
            )
        return tuple(range(y.ndim - ndim, y.ndim))


def _complex(dtype):
    return jnp.result_type(dtype, jnp.complex64)


def _fft(y: Float[Array, "..."], axes: tuple[int, ...]) -> Complex[Array, "..."]:
    if not axes:  # no spatial axes: an ODE with a diagonal stiff part
        return y.astype(_complex(y.dtype))
    return jnp.fft.rfftn(y, axes=axes)


def _ifft(v: Complex[Array, "..."], axes: tuple[int, ...], shape) -> Float[Array, "..."]:
    if not axes:
        return jnp.real(v)
    return jnp.fft.irfftn(v, s=tuple(shape[a] for a in axes), axes=axes)


def _symbol(stiff: Callable, y0, axes: tuple[int, ...]) -> Complex[Array, "..."]:
    """The Fourier symbol of the linear, translation-invariant, variable-wise map `stiff`."""
    # The response to a unit impulse at the origin of every variable is the operator's
    # kernel, whose FFT is the symbol. In float32 that kernel is dominated by the stiffest
    # modes, so the symbol of the slow modes (the ones that matter over long times) has an
    # absolute error ~eps * max|symbol|: 1e-3 to 1e-1 relative for Kuramoto–Sivashinsky.
    # A second probe whose spectrum is ~1/|symbol| (floored at sqrt(eps) * max) gives a
    # response of even magnitude across modes, hence the symbol to ~1e-6 relative in float32.
    impulse = jnp.zeros_like(y0).at[(..., *(0,) * len(axes))].set(1)
    magnitude = jnp.abs(_fft(stiff(impulse), axes))
    floor = jnp.sqrt(jnp.finfo(y0.dtype).eps) * jnp.max(magnitude, axis=axes, keepdims=True)
    magnitude = jnp.maximum(magnitude, floor)
    magnitude = jnp.where(magnitude > 0, magnitude, 1)  # a zero stiff term: the impulse again
    spectrum = jnp.min(magnitude, axis=axes, keepdims=True) / magnitude  # in [sqrt(eps), 1]
    probe = _ifft(spectrum.astype(_complex(y0.dtype)), axes, y0.shape)
    # Divide by the probe's actual (rounded) spectrum, not the intended one.
    return _fft(stiff(probe), axes) / _fft(probe, axes)


def _check_symbol(symbol, stiff: AbstractTerm, t0, y0, args, axes) -> Complex[Array, "..."]:
    """Error unless `symbol` reproduces the stiff term on a random field (a run-time check:
    it catches a nonlinear term, a forcing, non-periodic boundaries and coupled variables)."""
    # The check needs no gradient: keep it out of reverse-mode (and its compile time).
    checked, stiff, args = jax.tree.map(
        lambda x: lax.stop_gradient(x) if eqx.is_array(x) else x, (symbol, stiff, args)
    )
    v = jax.random.normal(jax.random.key(0), y0.shape, y0.dtype)
    exact = jnp.asarray(stiff.vf(t0, v, args), y0.dtype)
    error = jnp.max(jnp.abs(exact - _ifft(checked * _fft(v, axes), axes, y0.shape)))
    scale = jnp.max(jnp.abs(checked)) * jnp.max(jnp.abs(v))
    tol = jnp.sqrt(jnp.finfo(y0.dtype).eps) * scale
    return eqx.error_if(
        symbol,
        ~(error <= tol),
        "ETDRK4: the stiff term is not linear, translation-invariant and variable-wise over "
        "the trailing spatial axes of the state (its Fourier symbol does not reproduce it). "
        "The stiff part must be a linear operator with constant coefficients and no forcing, "
        "on a periodic grid, acting on each variable alone; move the rest to the non-stiff "
        "part (and check ETDRK4's spatial_ndim).",
    )


def _phis(z: Complex[Array, "..."]) -> tuple[Array, Array, Array, Array]:
    """Kassam–Trefethen's four functions of z = hL (each the coefficient divided by h)."""
    ez = jnp.exp(z)
    z3 = z**3
    return (
        jnp.expm1(0.5 * z) / z,
        (-4 - z + ez * (4 - 3 * z + z**2)) / z3,
        (2 + z + ez * (z - 2)) / z3,
        (-4 - 3 * z - z**2 + ez * (4 - z)) / z3,
    )


def _coefficients(
    symbol: Complex[Array, "..."], h: Float[Array, ""], num_points: int
) -> PyTree[Array]:
    """`(e^{hL}, e^{hL/2}, Q, f1, f2, f3)` of ETDRK4 for the step `h`."""
    z = jnp.asarray(h, symbol.real.dtype) * symbol
    small = jnp.abs(z) < 1
    # Both branches get safe inputs, so neither makes a NaN (nor a NaN gradient).
    direct = _phis(jnp.where(small, 2, z))
    centre = jnp.where(small, z, 0)
    angles = 2 * np.pi * (np.arange(num_points) + 0.5) / num_points
    points = jnp.asarray(2 * np.exp(1j * angles), symbol.dtype)

    def add(total, point):
        return tuple(s + p for s, p in zip(total, _phis(centre + point))), None

    totals, _ = lax.scan(add, tuple(jnp.zeros_like(z) for _ in range(4)), points)
    phis = [jnp.where(small, s / num_points, d) for s, d in zip(totals, direct)]
    hc = jnp.asarray(h, symbol.dtype)
    return (jnp.exp(z), jnp.exp(0.5 * z), *(hc * p for p in phis))


ETDRK4.__init__.__doc__ = """**Arguments:**

- `spatial_ndim`: how many trailing axes of the state are the periodic grid (default: all
    but the first).
- `num_points`: points on the contour for the coefficients (default 32, which gives them
    to float64 precision; at least 16).
"""
