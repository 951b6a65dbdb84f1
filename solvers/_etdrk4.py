"""ETDRK4: exponential time differencing for stiff semilinear PDEs on periodic grids."""

import math
from collections.abc import Callable
from functools import partial
from typing import ClassVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from diffrax import AbstractTerm, LocalLinearInterpolation, MultiTerm
from jax import lax
from jaxtyping import Array, Bool, Complex, Float, PyTree

from difsim.solvers._spectral_term import spectral_part

_Coefficients = tuple[Array, Array, Array, Array, Array, Array]  # E, E/2, Q, f1, f2, f3
_CONTOUR_BLOCK = 2**20  # contour values evaluated at once (16 MiB per array in complex128)
_CONSTANT_SIZE = 2**16  # states up to this size may get their symbol as a compiled constant


class ETDRK4(dfx.AbstractSolver):
    r"""Fourth-order exponential time differencing Runge–Kutta (Cox & Matthews 2002).

    For $u' = L u + N(t, u)$ where $L$ is a linear, autonomous, translation-invariant
    operator on a periodic grid (diagonal in Fourier space, e.g. $\nu \nabla^2$, $-\nabla^4$,
    $-c\,\partial_x$) and $N$ is the non-stiff rest. The linear part is integrated exactly,
    so the step is limited by $N$ alone, not by the stiffness of $L$.

    `terms` is `MultiTerm(ODETerm(N), ODETerm(L))` (non-stiff, stiff), as difsim's IMEX path
    builds it from `rhs_nonstiff` and `rhs_stiff`. When the non-stiff term is a
    [`SpectralODETerm`][] (difsim builds one for a model with `rhs_nonstiff_spectrum`), each
    stage asks it for $\hat N$ directly, which saves the transform of its output (and, if
    it reads only the spectrum, of its input): 2 real FFTs per stage for Kuramoto–Sivashinsky
    instead of 4. The solver finds $L$'s Fourier symbol
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
    that divides the interval). With `step_size` set, every step is known to have that
    length: the coefficients are computed for it, never recomputed, and (like the symbol)
    at trace time when the stiff term reads no traced value. difsim's fixed-step scans set
    it.

    Works in Fourier space with real FFTs and keeps the state's dtype (float32 stays
    float32). The spectrum of the end of a step is kept in the solver state for the next one
    (as diffrax's first-same-as-last Runge–Kutta solvers keep $f(y_1)$; recomputed after a
    jump), so a step costs one transform into Fourier space fewer. Fixed step only (no
    error estimate): use `diffrax.ConstantStepSize`. Dense output is linear between steps.
    Not usable with `diffrax.BacksolveAdjoint` (a two-term solver).

    Reference: S. M. Cox and P. C. Matthews, "Exponential time differencing for stiff
    systems", J. Comput. Phys. 176, 430 (2002); A.-K. Kassam and L. N. Trefethen,
    "Fourth-order time-stepping for stiff PDEs", SIAM J. Sci. Comput. 26, 1214 (2005).
    """

    spatial_ndim: int | None = eqx.field(default=None, static=True)
    num_points: int = eqx.field(default=32, static=True)
    step_size: float | None = eqx.field(default=None, static=True)

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
        explicit, stiff = terms.terms
        symbol, wrong = _probe(stiff, args, y0, axes)
        # The error guards the initial spectrum, which every step uses (the symbol may be
        # unused, and is kept concrete for the coefficients); outside `_probe`, because
        # equinox's error callback would run (and raise) at trace time there.
        v0 = eqx.error_if(_fft(y0, axes), wrong, _WRONG_SYMBOL)
        spectral = spectral_part(explicit)
        if spectral is not None:
            v0 = _check_spectrum(v0, spectral, explicit, t0, y0, args, axes)
        if self.step_size is None:
            h = jnp.asarray(t1 - t0)
            coefficients = _coefficients(symbol, h, self.num_points)
        else:
            h = jnp.asarray(self.step_size, jnp.result_type(t0))
            coefficients = _constant_if_possible(
                partial(_coefficients, h=self.step_size, num_points=self.num_points), symbol
            )
        # The last item is the spectrum of the state the next step starts from (first same
        # as last, as diffrax's Runge–Kutta solvers carry f(y1)): one transform less a step.
        return h, symbol, coefficients, v0

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        axes = self._axes(y0)
        explicit, _ = terms.terms
        h0, symbol, coefficients, v_last = solver_state
        h = t1 - t0
        if self.step_size is None:
            eps = jnp.finfo(jnp.result_type(h)).eps
            scale = jnp.maximum(jnp.maximum(jnp.abs(t0), jnp.abs(t1)), 1)
            coefficients = lax.cond(
                jnp.abs(h - h0) <= 16 * eps * scale,
                lambda: coefficients,
                lambda: _coefficients(symbol, h, self.num_points),
            )
        e, e2, q, f1, f2, f3 = coefficients
        spectral = spectral_part(explicit)

        def n_hat(t, y, v):
            """The non-stiff term's spectrum at a stage known in both spaces."""
            if spectral is None:
                return _fft(jnp.asarray(explicit.vf(t, y, args), y0.dtype), axes)
            return spectral(t, y, v, args).astype(v.dtype)

        def real(v):
            return _ifft(v, axes, y0.shape)

        # After a jump (an event, a discontinuity) y0 is not the last step's y1.
        if made_jump is False:
            v = v_last
        else:
            v = lax.cond(made_jump, lambda: _fft(y0, axes), lambda: v_last)
        th = t0 + 0.5 * h
        nv = n_hat(t0, y0, v)
        a = e2 * v + q * nv
        na = n_hat(th, real(a), a)
        b = e2 * v + q * na
        nb = n_hat(th, real(b), b)
        c = e2 * a + q * (2 * nb - nv)
        nc = n_hat(t1, real(c), c)
        v1 = e * v + f1 * nv + 2 * f2 * (na + nb) + f3 * nc
        y1 = real(v1)
        state = (h0, symbol, solver_state[2], v1)
        return y1, None, dict(y0=y0, y1=y1), state, dfx.RESULTS.successful

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


def _probe(stiff: AbstractTerm, args, y0, axes) -> tuple[Array, Array]:
    """`(symbol, wrong)`: the stiff term's Fourier symbol and whether it fails the check.

    $L$ is autonomous (else ETDRK4 does not apply), so it is probed at `t = 0`, in one
    jitted function of two concrete fields: a stiff term that reads no traced value
    (Kuramoto–Sivashinsky's $k^2 - k^4$) then gets its symbol computed and checked once, at
    trace time, into a compiled constant, as other libraries precompute theirs outside the
    solve (else it costs ~100 µs a call on a CPU). A term with traced parameters, or a state
    above `_CONSTANT_SIZE` (its symbol would be a large constant), is staged as usual.
    """

    def probe(impulse, field):
        # The barrier keeps XLA from constant-folding FFTs of these fields when staged (its
        # compile-time evaluator takes seconds for an FFT XLA runs in microseconds).
        impulse, field = lax.optimization_barrier((impulse, field))
        vf = lambda y: jnp.asarray(stiff.vf(0.0, y, args), y0.dtype)  # noqa: E731
        symbol = _symbol(vf, impulse, axes)
        return symbol, _symbol_is_wrong(symbol, vf, field, axes)

    corner = (..., *(0,) * len(axes))
    if y0.size > _CONSTANT_SIZE:  # built in JAX: no large constants in the program
        impulse = jnp.zeros(y0.shape, y0.dtype).at[corner].set(1)
        field = _test_field(jnp, y0.shape, y0.dtype)
    else:
        impulse = np.zeros(y0.shape, y0.dtype)
        impulse[corner] = 1
        field = _test_field(np, y0.shape, y0.dtype)
    return _constant_if_possible(probe, impulse, field)


def _constant_if_possible(fn: Callable, *inputs):
    """`jax.jit(fn)(*inputs)`, evaluated at trace time (a compiled constant) when `inputs`
    and every value `fn` closes over are concrete and small; else staged as usual."""
    if any(jnp.size(x) > _CONSTANT_SIZE for x in inputs):
        return jax.jit(fn)(*inputs)
    with jax.ensure_compile_time_eval():
        return jax.jit(fn)(*inputs)


def _symbol(stiff: Callable, impulse, axes: tuple[int, ...]) -> Complex[Array, "..."]:
    """The Fourier symbol of the linear, translation-invariant, variable-wise map `stiff`,
    given a unit impulse at the origin of every variable."""
    # The response to a unit impulse at the origin of every variable is the operator's
    # kernel, whose FFT is the symbol. In float32 that kernel is dominated by the stiffest
    # modes, so the symbol of the slow modes (the ones that matter over long times) has an
    # absolute error ~eps * max|symbol|: 1e-3 to 1e-1 relative for Kuramoto–Sivashinsky.
    # A second probe whose spectrum is ~1/|symbol| (floored at sqrt(eps) * max) gives a
    # response of even magnitude across modes, hence the symbol to ~1e-6 relative in float32.
    magnitude = jnp.abs(_fft(stiff(impulse), axes))
    floor = jnp.sqrt(jnp.finfo(impulse.dtype).eps) * jnp.max(magnitude, axis=axes, keepdims=True)
    magnitude = jnp.maximum(magnitude, floor)
    magnitude = jnp.where(magnitude > 0, magnitude, 1)  # a zero stiff term: the impulse again
    spectrum = jnp.min(magnitude, axis=axes, keepdims=True) / magnitude  # in [sqrt(eps), 1]
    probe = _ifft(spectrum.astype(_complex(impulse.dtype)), axes, impulse.shape)
    # Divide by the probe's actual (rounded) spectrum, not the intended one.
    return _fft(stiff(probe), axes) / _fft(probe, axes)


def _test_field(xp, shape, dtype) -> Float[Array, "..."]:
    """A fixed field with values scattered in [-1/2, 1/2) and energy in every mode: a hash
    of the index, in NumPy or JAX (`xp`); `jax.random` would cost more than the check."""
    index = xp.arange(math.prod(shape), dtype=dtype).reshape(shape)
    value = xp.sin(0.7 + 12.9898 * index) * 43758.5453
    return value - xp.floor(value) - 0.5


def _symbol_is_wrong(symbol, stiff: Callable, v, axes) -> Bool[Array, ""]:
    """Whether `symbol` fails to reproduce `stiff` on a test field (a run-time check: it
    catches a nonlinear term, a forcing, non-periodic boundaries and coupled variables)."""
    # The check needs no gradient: keep it out of reverse-mode (and its compile time).
    symbol = lax.stop_gradient(symbol)
    exact = lax.stop_gradient(stiff(v))
    error = jnp.max(jnp.abs(exact - _ifft(symbol * _fft(v, axes), axes, v.shape)))
    scale = jnp.max(jnp.abs(symbol)) * jnp.max(jnp.abs(v))
    return ~(error <= jnp.sqrt(jnp.finfo(v.dtype).eps) * scale)


_WRONG_SYMBOL = (
    "ETDRK4: the stiff term is not linear, translation-invariant and variable-wise over "
    "the trailing spatial axes of the state (its Fourier symbol does not reproduce it). "
    "The stiff part must be a linear operator with constant coefficients and no forcing, "
    "on a periodic grid, acting on each variable alone; move the rest to the non-stiff "
    "part (and check ETDRK4's spatial_ndim)."
)


def _check_spectrum(v0, spectral: Callable, explicit: AbstractTerm, t0, y0, args, axes):
    """Error unless the spectral form of the non-stiff term equals the FFT of its physical
    form at the initial state (`v0` is returned, guarded by the check)."""
    expected = jax.eval_shape(lambda: v0)
    got = jax.eval_shape(lambda: spectral(t0, y0, v0, args))
    if got.shape != expected.shape:
        raise ValueError(
            f"ETDRK4: the non-stiff term's spectrum has shape {got.shape}, but the real FFT of "
            f"the state {y0.shape} over axes {axes} has shape {expected.shape}"
        )
    checked, explicit, args = jax.tree.map(
        lambda x: lax.stop_gradient(x) if eqx.is_array(x) else x, (v0, explicit, args)
    )
    y = lax.stop_gradient(y0)
    exact = _fft(jnp.asarray(explicit.vf(t0, y, args), y0.dtype), axes)
    error = jnp.max(jnp.abs(spectral(t0, y, checked, args) - exact))
    tol = jnp.sqrt(jnp.finfo(y0.dtype).eps) * jnp.maximum(jnp.max(jnp.abs(exact)), 1)
    return eqx.error_if(
        v0,
        ~(error <= tol),
        "ETDRK4: the spectral form of the non-stiff term does not equal the real FFT of its "
        "physical form at the initial state (check the spectrum's normalisation: unnormalised, "
        "as jnp.fft.rfftn, over the trailing spatial axes; and ETDRK4's spatial_ndim).",
    )


def _phis(z, ez, ez2_minus_1) -> tuple[Array, Array, Array, Array]:
    """Kassam–Trefethen's four functions of z = hL (each the coefficient divided by h),
    given `exp(z)` and `exp(z/2) - 1`."""
    r = 1 / z
    r3 = r * r * r  # one complex division, not four
    return (
        ez2_minus_1 * r,
        (-4 - z + ez * (4 - 3 * z + z**2)) * r3,
        (2 + z + ez * (z - 2)) * r3,
        (-4 - 3 * z - z**2 + ez * (4 - z)) * r3,
    )


def _coefficients(
    symbol: Complex[Array, "..."], h: Float[Array, ""], num_points: int
) -> PyTree[Array]:
    """`(e^{hL}, e^{hL/2}, Q, f1, f2, f3)` of ETDRK4 for the step `h`."""
    z = jnp.asarray(h, symbol.real.dtype) * symbol
    ez, ez2 = jnp.exp(z), jnp.exp(0.5 * z)
    small = jnp.abs(z) < 1
    # Both branches get safe inputs, so neither makes a NaN (nor a NaN gradient).
    safe = jnp.where(small, 2, z)
    direct = _phis(safe, jnp.exp(safe), jnp.expm1(0.5 * safe))
    # Where |z| < 1: the mean over points z + p of a circle of radius 2 (Cauchy's formula).
    # exp(z + p) = exp(z) exp(p) with exp(p) constants: no transcendental function per
    # point (complex exp costs ~100 ns on a CPU, and there are num_points per mode); on
    # the circle |z + p| > 1, so exp((z + p)/2) - 1 loses no digits to cancellation.
    centre = jnp.where(small, z, 0)
    e_centre, e2_centre = jnp.where(small, ez, 1), jnp.where(small, ez2, 1)
    angles = 2 * np.pi * (np.arange(num_points) + 0.5) / num_points
    points = 2 * np.exp(1j * angles)
    # A loop over blocks of points, each block one vectorised evaluation: a loop over single
    # points costs ~3 µs of overhead each on a CPU; unrolling all of them compiles slowly.
    fits = [d for d in range(2, 9) if num_points % d == 0 and d * z.size <= _CONTOUR_BLOCK]
    per = max(fits, default=1)
    table = np.stack([points, np.exp(points), np.exp(points / 2)])  # p, e^p, e^{p/2}
    table = jnp.asarray(table.reshape(3, -1, per, *(1,) * z.ndim).swapaxes(0, 1), symbol.dtype)

    def add(totals, block):
        p, e_p, e2_p = block
        values = _phis(centre[None] + p, e_centre[None] * e_p, e2_centre[None] * e2_p - 1)
        return tuple(s + jnp.sum(v, axis=0) for s, v in zip(totals, values)), None

    totals, _ = lax.scan(add, tuple(jnp.zeros_like(z) for _ in range(4)), table)
    phis = [jnp.where(small, s / num_points, d) for s, d in zip(totals, direct)]
    hc = jnp.asarray(h, symbol.dtype)
    return (ez, ez2, *(hc * p for p in phis))


ETDRK4.__init__.__doc__ = """**Arguments:**

- `spatial_ndim`: how many trailing axes of the state are the periodic grid (default: all
    but the first).
- `num_points`: points on the contour for the coefficients (default 32, which gives them
    to float64 precision; at least 16).
- `step_size`: the length of every step, when known in advance (a Python float; default
    None: the first step's length, with a recomputation for a step of another length).
"""
