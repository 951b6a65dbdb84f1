r"""Rodas5P for the ensemble engine: a stiff Rosenbrock method for blocks of small
systems, with the tableau of [`difsim.solvers.Rodas5P`][] (same equations, same numbers
as one trajectory through diffrax).

Per step and lane: one Jacobian $J$ (forward mode, [`BlockRHS.jacobian`][]), one LU
factorisation of $I - \gamma h J$, then 8 stages, each one evaluation of the right-hand
side and two triangular solves with that factorisation. The matrices are
`(size, size, lanes)`: every lane has its own. Up to `UNROLLED_MAX` entries the
factorisation is unrolled when traced, in structure-of-arrays layout (each matrix entry one
lane vector, partial pivoting by per-lane selects), and calls no LAPACK routine per lane;
the factors and each stage are stored once per step (`_boundary.py`). Above that the lanes
move first and `jax.scipy.linalg.lu_factor`/`lu_solve` work on the batch. Measured inside
whole ensemble solves (`bench_stiff_ensemble.py --lu-engine`: 1,000 lanes, float64, 2-core
Xeon, 2026-11-28), unrolled / batched CPU time: a stiff chain of 4, 6, 8, 10, 12 species
0.08, 0.30, 0.57, 1.66, 2.96; HIRES (8 species) 0.44. Beyond 8, XLA recomputes shared
entries of the unrolled elimination inside its kernels, and its compile time grows fast
(8: 4 s, 10: 14 s, 12: 24 s, against 1.3 s batched): the threshold is 8.
"""

from typing import Any, ClassVar, NamedTuple

import jax.numpy as jnp
from jax.scipy.linalg import lu_factor, lu_solve
from jaxtyping import Array, Float, Int

from difsim import solvers
from difsim._ensemble._field import BlockRHS, Lanes, per_lane
from difsim._ensemble._method import AbstractEnsembleMethod, StepOut

# State sizes up to which the LU factorisation is unrolled (see the module docstring).
UNROLLED_MAX = 8

Row = list[Float[Array, " lanes"]]


class UnrolledLU(NamedTuple):
    """`P A = L U` of every lane, entry by entry: `lu[i][j]` is `(lanes,)` (`L` strictly
    below the diagonal, unit diagonal implied; `U` on and above it), `inv_diag[i]` is
    `1 / U[i][i]`, `pivots[k]` the row swapped with row `k` at elimination step `k`."""

    lu: list[Row]
    inv_diag: Row
    pivots: list[Int[Array, " lanes"]]


def _swap_rows(rows: list, k: int, piv) -> list:
    """`rows` with row `k` and row `piv` (per lane, `piv >= k`) exchanged. Every new value
    selects among the old ones directly: a chain of pairwise swaps would make each entry
    depend on the previous one twice, and XLA's fusion would recompute such chains
    exponentially often in `n`."""
    old_k = rows[k]
    new = list(rows)
    for i in range(k + 1, len(rows)):
        new[k] = _where_lanes(piv == i, rows[i], new[k])
        new[i] = _where_lanes(piv == i, old_k, rows[i])
    return new


def _where_lanes(cond, a, b):
    """`jnp.where` over a row (a list of lane vectors) or one lane vector."""
    if isinstance(a, list):
        return [jnp.where(cond, x, y) for x, y in zip(a, b)]
    return jnp.where(cond, a, b)


def lu_unrolled(a: Float[Array, "n n lanes"]) -> UnrolledLU:
    """LU factorisation with partial pivoting of `(n, n, lanes)` matrices, unrolled."""
    n = a.shape[0]
    m = [[a[i, j] for j in range(n)] for i in range(n)]
    inv_diag, pivots = [], []
    for k in range(n):
        best, piv = jnp.abs(m[k][k]), jnp.zeros(m[k][k].shape, jnp.int32) + k
        for i in range(k + 1, n):
            bigger = jnp.abs(m[i][k]) > best
            best, piv = jnp.where(bigger, jnp.abs(m[i][k]), best), jnp.where(bigger, i, piv)
        for i in range(k + 1, n):  # at most one of these swaps acts in each lane
            swap = piv == i
            for j in range(n):
                m[k][j], m[i][j] = (
                    jnp.where(swap, m[i][j], m[k][j]),
                    jnp.where(swap, m[k][j], m[i][j]),
                )
        inv = 1 / m[k][k]
        for i in range(k + 1, n):
            m[i][k] = m[i][k] * inv
            for j in range(k + 1, n):
                m[i][j] = m[i][j] - m[i][k] * m[k][j]
        inv_diag.append(inv)
        pivots.append(piv)
    return UnrolledLU(m, inv_diag, pivots)


def solve_unrolled(f: UnrolledLU, b: Float[Array, "n lanes"]) -> Float[Array, "n lanes"]:
    """`A x = b` for every lane, from [`lu_unrolled`][]'s factorisation."""
    n = b.shape[0]
    x = [b[i] for i in range(n)]
    for k, piv in enumerate(f.pivots):
        x = _swap_rows(x, k, piv)
    for i in range(n):
        for j in range(i):
            x[i] = x[i] - f.lu[i][j] * x[j]
    for i in reversed(range(n)):
        for j in range(i + 1, n):
            x[i] = x[i] - f.lu[i][j] * x[j]
        x[i] = x[i] * f.inv_diag[i]
    return jnp.stack(x)


def lu_batched(a: Float[Array, "n n lanes"]):
    """LAPACK-style batched LU, lanes first: `(lu (lanes, n, n), pivots (lanes, n))`."""
    return lu_factor(jnp.moveaxis(a, -1, 0))


def solve_batched(f, b: Float[Array, "n lanes"]) -> Float[Array, "n lanes"]:
    """`A x = b` for every lane, from [`lu_batched`][]'s factorisation."""
    lu, piv = f
    return lu_solve((lu, piv), b.T[..., None])[..., 0].T


def factorise(a: Float[Array, "n n lanes"]):
    """The factorisation used for `(n, n, lanes)` matrices: unrolled when `n` is small."""
    if a.shape[0] <= UNROLLED_MAX:
        return lu_unrolled(a)
    return lu_batched(a)


def solve(factors, b: Float[Array, "n lanes"]) -> Float[Array, "n lanes"]:
    if isinstance(factors, UnrolledLU):
        return solve_unrolled(factors, b)
    return solve_batched(factors, b)


def _combine(base, coeffs, ks: list[Array]):
    """`base + Σ_j coeffs[j] ks[j]`, skipping zero coefficients when traced."""
    for c, k in zip(coeffs, ks):
        if c != 0:
            base = base + float(c) * k
    return base


class Rodas5P(AbstractEnsembleMethod):
    """Rodas5P (Steinebach 2023), Rosenbrock 5(4), L-stable and stiffly accurate, 4th-order
    dense output: the ensemble twin of [`difsim.solvers.Rodas5P`][]. Per step: one
    Jacobian and LU per lane, 8 evaluations of the right-hand side (7 stages after the
    carried `f(t, y)`, and `f(t + h, y1)` for the next step). For a differential-algebraic
    model, the same with its singular mass matrix (`BlockRHS.mass_diagonal`).

    Unlike the single-trajectory method, the stage solves are not refined
    (`difsim.solvers._rosenbrock.refined_solve`): the refinement cost 1.6x the CPU time of
    a 1,000-lane Robertson ensemble at rtol 1e-6 (same steps), and matters only where the
    stage matrices are badly conditioned at tight tolerances (Robertson to t = 1e11 at
    rtol 1e-10: 1.2e-8 relative error unrefined, 6.5e-10 refined)."""

    name: ClassVar[str] = "rodas5p"
    order: ClassVar[int] = 5
    error_order: ClassVar[float] = 5
    interpolant_order: ClassVar[int] = 4

    def step(self, f: BlockRHS, t, y: Lanes, h, f0: Lanes) -> StepOut:
        tab = solvers.Rodas5P.tableau
        y0 = f.ravel(y)
        hh = h[None]
        n = y0.shape[0]
        mass = f.mass_diagonal()  # a differential-algebraic model's, else None
        diag = jnp.ones(n, y0.dtype) if mass is None else jnp.asarray(mass, y0.dtype)
        eye = jnp.diag(diag)[..., None]
        # The Jacobian, its factorisation and each stage are computed once and stored
        # (`_boundary.py`): Robertson's ensemble took 1.5x the time without.
        jac = f.stored(f.jacobian(t, y))
        matrix = eye - tab.gamma * hh[None] * jac
        if mass is not None:
            # A lane not stepping (h = 0) would factorise the singular M: its step is
            # discarded, but reverse mode would carry the NaN of its LU through the select.
            matrix = jnp.where(hh[None] == 0, jnp.eye(n, dtype=y0.dtype)[..., None], matrix)
        factors = f.stored(factorise(matrix))
        f_t = f.ravel(f.time_derivative(t, y))
        ks: list[Array] = []
        for i in range(tab.stages):
            u = _combine(y0, tab.a[i], ks)
            fi = f.ravel(f0 if i == 0 else f(t + tab.c[i] * h, f.unravel(u)))
            if mass is None:
                rhs = hh * fi + _combine(hh * hh * tab.d[i] * f_t, tab.C[i], ks)
            else:  # M y' = f: the carried stages enter through M (Hairer & Wanner §VI.4)
                carried = _combine(jnp.zeros_like(y0), tab.C[i], ks)
                rhs = hh * fi + hh * hh * tab.d[i] * f_t + diag[:, None] * carried
            ks.append(f.stored(solve(factors, tab.gamma * rhs)))
        y1 = f.unravel(u + ks[-1])
        dense = tuple(f.unravel(_combine(jnp.zeros_like(y0), row, ks)) for row in tab.H)
        return StepOut(y1=y1, y_err=f.unravel(ks[-1]), f1=f(t + h, y1), dense=dense)

    def interpolate(self, dense: Any, t0, t1, y0: Lanes, y1: Lanes, t) -> Lanes:
        empty = t1 == t0  # a lane that did not move: its `t` is `t0`
        theta = jnp.where(empty, 0.0, (t - t0) / jnp.where(empty, 1.0, t1 - t0))
        dense_output = solvers.Rodas5P.tableau.dense_output
        return {
            name: dense_output(
                per_lane(theta, y0[name]), y0[name], y1[name], [k[name] for k in dense]
            )
            for name in y0
        }
