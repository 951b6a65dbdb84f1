r"""`solve_poisson`: $\nabla^2 u = f$ with the grid's boundary conditions.

The discrete problem is the one the operators see: $L(u) = f$ with $L$ the second-order
finite-difference [`laplacian`][] including the boundary data (an affine map). Writing
$L(u) = A u + L(0)$, the solve is the linear system $A u = f - L(0)$, where $A$ is the same
stencil with homogeneous boundary values. On cell-centred grids $A$ is symmetric and
negative semi-definite; it is singular exactly when no side is Dirichlet (pure
Neumann/periodic), with the constants as null space.
"""

import math
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from difsim._pde._boundary import Dirichlet, Neumann, Periodic
from difsim._pde._fd import laplacian
from difsim._pde._grid import Grid
from difsim._pde._spectral import inverse_laplacian, mode_numbers

Method = Literal["auto", "fft", "spectral", "cg", "gmres", "bicgstab", "tridiagonal"]
_METHODS = ("auto", "fft", "spectral", "cg", "gmres", "bicgstab", "tridiagonal")


def solve_poisson(
    f: Float[ArrayLike, "*shape"],
    grid: Grid,
    *,
    method: Method = "auto",
    t: Any = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    max_steps: int | None = None,
) -> Float[Array, "*shape"]:
    r"""Solve the Poisson equation $\nabla^2 u = f$ with the boundary conditions of `grid`.

    The Laplacian is the second-order finite-difference one of [`laplacian`][] (3 points
    per axis, ghost cells from the boundary conditions), so `laplacian(u, grid, t=t)`
    reproduces `f` to the solver tolerance: the solution is second-order accurate.

    Pure Neumann and periodic problems (no Dirichlet side) are singular: $u$ is defined up
    to a constant and exists only if $\int f\,dV = \oint \partial u/\partial n\,dS$. Here the
    constant is fixed by **zero mean** of $u$, and the **incompatible part is removed**:
    the problem solved is $\nabla^2 u = f - c$ with
    $c = (\int f\,dV - \oint g\,dS)/|\Omega|$ ($g$ the Neumann data; discretely, the mean of
    the right-hand side is projected out). A non-zero $c$ is not an error, since a sampled
    compatible $f$ is compatible only up to the discretisation error.

    **Arguments:**

    - `f`: the source, shape `(*batch, *grid.shape)` (units of `u` / length²).
    - `grid`: the grid and boundary conditions (Dirichlet values are those of `u`,
      Neumann values its outward normal derivative).
    - `method`:
        - `"auto"`: `"fft"` on a periodic grid, `"tridiagonal"` in 1-D, `"cg"` otherwise.
        - `"fft"`: periodic grids only; divides by the Fourier symbol of the
          finite-difference Laplacian, $-\sum_i 4\sin^2(k_i \Delta x_i/2)/\Delta x_i^2$, so
          it agrees with the iterative methods to rounding.
        - `"spectral"`: periodic grids only; the exact symbol $-|k|^2$, i.e.
          [`ds.spectral.inverse_laplacian`][difsim.spectral.inverse_laplacian] (spectrally
          accurate, not the FD discrete problem).
        - `"cg"`: conjugate gradients (lineax), matrix-free on the symmetric operator.
        - `"gmres"`, `"bicgstab"`: the other lineax Krylov solvers, matrix-free.
        - `"tridiagonal"`: 1-D non-periodic grids; a direct (Thomas) solve.
    - `t`: the time, for time-dependent boundary values.
    - `rtol`, `atol`: tolerances of the iterative methods, on the residual of every point:
      $|r_i| \le$ `atol` $+$ `rtol` $|b_i|$ (they must be attainable in the dtype of `f`).
    - `max_steps`: iteration limit of the iterative methods (default lineax's:
      `10 × grid.size` for CG).

    **Returns:** $u$, an array like `f` (zero mean for pure Neumann/periodic problems).

    Differentiable with respect to `f` and the boundary values (lineax solves have
    implicit derivatives), and works under `jax.jit`/`jax.vmap`. If an iterative method
    fails to converge, an `EquinoxRuntimeError` names it and suggests what to change.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, bc=ds.Dirichlet(0.0))  # on [0, 1], u = 0 at both ends
    x = grid.axis("x")
    u = ds.fd.solve_poisson(-jnp.pi**2 * jnp.sin(jnp.pi * x), grid)
    assert jnp.allclose(u, jnp.sin(jnp.pi * x), atol=1e-3)  # second order: error ~ h²
    ```
    """
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a ds.Grid, got {type(grid).__name__}")
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(_METHODS)}")
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not tol >= 0:
            raise ValueError(f"{name} must be >= 0, got {tol!r}")
    if max_steps is not None and (not isinstance(max_steps, (int, np.integer)) or max_steps < 1):
        raise ValueError(f"max_steps must be a positive integer or None, got {max_steps!r}")
    grid.check(f, "f")
    f = jnp.asarray(f)
    if not jnp.issubdtype(f.dtype, jnp.floating):
        f = f.astype(jnp.result_type(float))

    if method == "auto":
        method = "fft" if grid.is_periodic else "tridiagonal" if grid.ndim == 1 else "cg"
    if method in ("fft", "spectral"):
        _require_periodic(grid, method)
    if method == "tridiagonal":
        if grid.ndim != 1 or not isinstance(grid.bc[0][0], (Dirichlet, Neumann)):
            raise ValueError(
                f"method='tridiagonal' needs a 1-D grid with non-periodic boundaries, got "
                f"{grid.describe()}: use 'fft' (periodic) or 'cg'"
            )
    return _solve(f, grid, method, t, rtol, atol, max_steps)


# Jitted like `diffrax.diffeqsolve`, after `method` is resolved, so that eager calls reuse
# the compiled lineax loops (and "auto" shares them with the method it picks).
@eqx.filter_jit
def _solve(f, grid, method, t, rtol, atol, max_steps):
    if method == "spectral":
        return inverse_laplacian(f, grid)
    if method == "fft":
        return _fft_solve(f, grid)
    axes = tuple(range(f.ndim - grid.ndim, f.ndim))
    singular = not any(isinstance(side, Dirichlet) for pair in grid.bc for side in pair)
    rhs = f - laplacian(jnp.zeros_like(f), grid, t=t)
    if singular:
        rhs = rhs - jnp.mean(rhs, axis=axes, keepdims=True)
    homogeneous = _homogeneous(grid)
    if method == "tridiagonal":
        u = _tridiagonal_solve(rhs, homogeneous, singular)
    else:
        u = _krylov_solve(rhs, homogeneous, singular, axes, method, rtol, atol, max_steps)
    if singular:
        u = u - jnp.mean(u, axis=axes, keepdims=True)
    return u


def _require_periodic(grid: Grid, method: str) -> None:
    grid.require_periodic(f"method={method!r}", "use method='cg' (or 'auto')")


def _homogeneous(grid: Grid) -> Grid:
    """The grid with every boundary value set to zero: the linear part `A` of `L`."""

    def zero(side):
        return side if isinstance(side, Periodic) else type(side)(0.0)

    return grid.with_bc(tuple((zero(low), zero(high)) for low, high in grid.bc))


def _fft_solve(f: Array, grid: Grid) -> Array:
    # Symbol of the 3-point second difference along each axis: (2cos(k dx) - 2) / dx².
    symbol = np.zeros(grid.shape[:-1] + (grid.shape[-1] // 2 + 1,))
    for i, (m, n, dx) in enumerate(zip(mode_numbers(grid), grid.shape, grid.dx)):
        shape = [1] * grid.ndim
        shape[i] = len(m)
        symbol = symbol - (4 / dx**2 * np.sin(np.pi * m / n) ** 2).reshape(shape)
    inverse = np.where(symbol == 0, 0.0, 1 / np.where(symbol == 0, 1.0, symbol))
    inverse = inverse.reshape((1,) * (f.ndim - grid.ndim) + inverse.shape)
    axes = tuple(range(-grid.ndim, 0))
    f_hat = jnp.fft.rfftn(f, s=grid.shape, axes=axes)
    u_hat = f_hat * jnp.asarray(inverse, jnp.finfo(f.dtype).dtype)
    return jnp.fft.irfftn(u_hat, s=grid.shape, axes=axes).astype(f.dtype)


def _krylov_solve(rhs, grid, singular, axes, method, rtol, atol, max_steps):
    # For a singular (pure Neumann/periodic) A, solve instead with A - c·P, P the mean:
    # non-singular and still symmetric negative definite, and for a zero-mean right-hand
    # side its solution is the zero-mean solution of A u = rhs. That keeps the Krylov
    # iteration, and the transposed solves of reverse-mode autodiff, well posed.
    shift = sum((math.pi / length) ** 2 for length in grid.extent)

    def operator(v):
        out = laplacian(v, grid)
        if singular:
            out = out - shift * jnp.mean(v, axis=axes, keepdims=True)
        return out

    structure = jax.ShapeDtypeStruct(rhs.shape, rhs.dtype)
    tags = (lx.symmetric_tag, lx.negative_semidefinite_tag)
    op = lx.FunctionLinearOperator(operator, structure, tags)
    solver = {"cg": lx.CG, "gmres": lx.GMRES, "bicgstab": lx.BiCGStab}[method](
        rtol=rtol, atol=atol, max_steps=max_steps
    )
    solution = lx.linear_solve(op, rhs, solver, throw=False)
    steps = "lineax's default max_steps" if max_steps is None else f"max_steps={max_steps}"
    shape = "×".join(map(str, grid.shape))
    return eqx.error_if(
        solution.value,
        solution.result != lx.RESULTS.successful,
        f"ds.fd.solve_poisson(method={method!r}) did not converge to rtol={rtol:g}, atol={atol:g} "
        f"within {steps} on a {shape} grid: raise max_steps, loosen rtol/atol (float32 "
        "cannot reach ~1e-8), or try another method ('cg' suits this symmetric operator)",
    )


def _tridiagonal_solve(rhs: Array, grid: Grid, singular: bool) -> Array:
    # Probe the 3-point stencil with the vectors e_j = [i % 3 == j]: (A e_j)_i is the one
    # entry of row i in a column ≡ j (mod 3), which recovers the three diagonals.
    n = grid.shape[0]
    index = np.arange(n)
    probes = jnp.asarray(index[None, :] % 3 == np.arange(3)[:, None], rhs.dtype)
    columns = laplacian(probes, grid)
    diagonal = columns[index % 3, index]
    upper = columns[(index[:-1] + 1) % 3, index[:-1]]
    lower = columns[index[:-1] % 3, index[1:]]
    if singular:
        # Pure Neumann: the last equation is implied by the others for a compatible
        # right-hand side, so replace it with u[-1] = 0 (the mean is removed afterwards).
        diagonal = diagonal.at[-1].set(1)
        lower = lower.at[-1].set(0)
        rhs = rhs.at[..., -1].set(0)
    op = lx.TridiagonalLinearOperator(diagonal, lower, upper)

    def solve(b):
        return lx.linear_solve(op, b, lx.Tridiagonal()).value

    flat = rhs.reshape((-1, n))
    return jax.vmap(solve)(flat).reshape(rhs.shape)
