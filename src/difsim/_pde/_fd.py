"""Finite-difference operators on a [`Grid`][]: central differences of order 2 or 4.

Every operator differences one axis at a time on the field padded by `grid.pad` along that
axis only, so all operators see the same ghost cells (periodic wrap, or the polynomial that
matches the Dirichlet/Neumann condition at the cell face). Slicing the padded array is what
XLA fuses best on CPU: a 128² Laplacian is ~25% faster than the same stencil built from
`jnp.roll`s.

Fields may carry leading batch axes; the operators act on the trailing `grid.ndim` axes.
"""

from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from difsim._pde._boundary import Periodic
from difsim._pde._grid import Grid

# Central stencils `{offset: weight}` (spacing 1) for d/dx and d²/dx², by order of accuracy.
_FIRST = {2: {-1: -0.5, 1: 0.5}, 4: {-2: 1 / 12, -1: -2 / 3, 1: 2 / 3, 2: -1 / 12}}
_SECOND = {
    2: {-1: 1.0, 0: -2.0, 1: 1.0},
    4: {-2: -1 / 12, -1: 4 / 3, 0: -5 / 2, 1: 4 / 3, 2: -1 / 12},
}


def _check_order(order: Any) -> int:
    if isinstance(order, bool) or order not in (2, 4):
        raise ValueError(f"order must be 2 or 4 (order of accuracy), got order={order!r}")
    return int(order)


def _apply_stencil(
    u: Array, grid: Grid, dim: int, stencil: dict[int, float], scale: float, t: Any, bc: Any
) -> Array:
    """`scale · Σ_k w_k u[i + k]` along grid axis `dim`, ghost cells from `grid.pad`."""
    width = max(abs(k) for k in stencil)
    padded = grid.pad(u, dim, width, t=t, bc=bc)
    axis = jnp.ndim(u) - grid.ndim + dim
    n = grid.shape[dim]
    out = None
    for offset, weight in stencil.items():
        index = [slice(None)] * padded.ndim
        index[axis] = slice(width + offset, width + offset + n)
        term = (weight * scale) * padded[tuple(index)]
        out = term if out is None else out + term
    return out


def prepare_field(u: ArrayLike, grid: Grid, name: str, bc: Any) -> Array:
    """`u` as a floating array checked against `grid` (errors name `name`), and `bc` checked."""
    if not isinstance(grid, Grid):
        raise TypeError(f"grid must be a ds.Grid, got {type(grid).__name__}")
    if bc is not None:
        if not isinstance(bc, Grid) or bc.shape != grid.shape:
            raise ValueError(
                f"bc must be a ds.Grid with the same shape {grid.shape} whose boundary "
                f"conditions apply to this field, got {bc!r}"
            )
    grid.check(u, name)
    u = jnp.asarray(u)
    if not jnp.issubdtype(u.dtype, jnp.inexact):
        u = u.astype(jnp.result_type(float))
    return u


def derivative(
    u: Float[ArrayLike, "..."],
    grid: Grid,
    dim: str | int,
    *,
    order: int = 2,
    t: Any = None,
    bc: Grid | None = None,
) -> Float[Array, "..."]:
    r"""First derivative $\partial u/\partial x_d$ by central differences.

    **Arguments:**

    - `u`: a field, shape `(*batch, *grid.shape)` (units of `u`).
    - `grid`: the grid, whose boundary conditions fill the ghost cells.
    - `dim`: the axis, by name (`"x"`) or index.
    - `order`: 2 (3-point stencil) or 4 (5-point stencil): the order of accuracy in the
      interior. Next to a Dirichlet face the first row loses one order (the ghost value
      is exact to $O(h^{order})$ only).
    - `t`: the time, for time-dependent boundary values.
    - `bc`: another grid whose boundary conditions apply to this field instead.

    **Returns:**

    An array shaped like `u`, in units of `u` per unit length.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)
    x = grid.axis("x")
    assert jnp.allclose(ds.fd.derivative(jnp.sin(x), grid, "x", order=4), jnp.cos(x), atol=1e-4)
    ```
    """
    order = _check_order(order)
    u = prepare_field(u, grid, "u", bc)
    d = grid._axis_index(dim)
    return _apply_stencil(u, grid, d, _FIRST[order], 1.0 / grid.dx[d], t, bc)


def gradient(
    u: Float[ArrayLike, "..."],
    grid: Grid,
    *,
    order: int = 2,
    t: Any = None,
    bc: Grid | None = None,
) -> tuple[Float[Array, "..."], ...]:
    r"""The gradient $(\partial_x u, \partial_y u, \ldots)$: one [`derivative`][] per axis.

    **Returns:**

    A tuple of `grid.ndim` arrays shaped like `u`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((64, 64), extent=2 * jnp.pi)
    x, y = grid.mesh()
    gx, gy = ds.fd.gradient(jnp.sin(x) * jnp.cos(y), grid, order=4)
    assert jnp.allclose(gy, -jnp.sin(x) * jnp.sin(y), atol=1e-4)
    ```
    """
    order = _check_order(order)
    u = prepare_field(u, grid, "u", bc)
    return tuple(
        _apply_stencil(u, grid, d, _FIRST[order], 1.0 / grid.dx[d], t, bc) for d in range(grid.ndim)
    )


def divergence(
    v: Sequence[Float[ArrayLike, "..."]] | Float[ArrayLike, "..."],
    grid: Grid,
    *,
    order: int = 2,
    t: Any = None,
    bc: Grid | None = None,
) -> Float[Array, "..."]:
    r"""The divergence $\nabla\cdot v = \sum_d \partial v_d / \partial x_d$.

    **Arguments:**

    - `v`: the vector field: a sequence of `grid.ndim` component arrays (or an array with the
      components stacked on axis 0), each of shape `(*batch, *grid.shape)`; on a 1-D grid a
      single array is the `x` component.
    - `grid`, `order`, `t`, `bc`: as for [`derivative`][]; the boundary conditions apply
      to every component.

    **Returns:**

    An array of shape `(*batch, *grid.shape)`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((64, 64), extent=2 * jnp.pi)
    x, y = grid.mesh()
    div = ds.fd.divergence((jnp.sin(x), jnp.cos(y)), grid, order=4)
    assert jnp.allclose(div, jnp.cos(x) - jnp.sin(y), atol=1e-4)
    ```
    """
    order = _check_order(order)
    if grid.ndim == 1 and not isinstance(v, (list, tuple)):
        v = (v,)
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence | np.ndarray | Array):
        raise TypeError(f"v must be a sequence of {grid.ndim} component arrays, got {type(v)}")
    if len(v) != grid.ndim:
        raise ValueError(
            f"v has {len(v)} components, but the grid has {grid.ndim} axes "
            f"({', '.join(grid.dims)}): pass one component per axis"
        )
    out = None
    for d in range(grid.ndim):
        component = prepare_field(v[d], grid, f"v[{d}] ({grid.dims[d]} component)", bc)
        term = _apply_stencil(component, grid, d, _FIRST[order], 1.0 / grid.dx[d], t, bc)
        out = term if out is None else out + term
    return out


def laplacian(
    u: Float[ArrayLike, "..."],
    grid: Grid,
    *,
    order: int = 2,
    t: Any = None,
    bc: Grid | None = None,
) -> Float[Array, "..."]:
    r"""The Laplacian $\nabla^2 u = \sum_d \partial^2 u/\partial x_d^2$.

    **Arguments:**

    - `u`: a field, shape `(*batch, *grid.shape)`.
    - `grid`: the grid, whose boundary conditions fill the ghost cells.
    - `order`: 2 (3-point stencil per axis) or 4 (5-point): the order of accuracy in the
      interior. The rows next to a Dirichlet face are two orders less accurate (the ghost
      value is exact to $O(h^2)$ for `order=2`, $O(h^4)$ for `order=4`), which still gives
      a solution of the discrete Poisson/heat problem of the full order.
    - `t`: the time, for time-dependent boundary values.
    - `bc`: another grid whose boundary conditions apply to this field instead.

    **Returns:**

    An array shaped like `u`, in units of `u` per length².

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi)  # periodic
    u = jnp.sin(grid.axis("x"))
    assert jnp.allclose(ds.fd.laplacian(u, grid, order=4), -u, atol=1e-4)  # ∇² sin x = -sin x
    ```
    """
    order = _check_order(order)
    u = prepare_field(u, grid, "u", bc)
    out = None
    for d in range(grid.ndim):
        term = _apply_stencil(u, grid, d, _SECOND[order], 1.0 / grid.dx[d] ** 2, t, bc)
        out = term if out is None else out + term
    return out


def biharmonic(
    u: Float[ArrayLike, "..."],
    grid: Grid,
    *,
    order: int = 2,
    t: Any = None,
) -> Float[Array, "..."]:
    r"""The biharmonic operator $\nabla^4 u = \nabla^2(\nabla^2 u)$ on a periodic grid.

    Two applications of [`laplacian`][] (of the same `order`), which on a periodic axis is
    accurate to that order. Non-periodic axes are refused: one ghost layer from the
    field's boundary condition does not fix the second condition a fourth-order operator
    needs.

    **Arguments:**

    - `u`: a field, shape `(*batch, *grid.shape)`.
    - `grid`: a grid periodic on every axis.
    - `order`: 2 or 4.
    - `t`: unused (periodic axes carry no boundary data); accepted for uniformity.

    **Returns:**

    An array shaped like `u`, in units of `u` per length⁴.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(32, extent=2 * jnp.pi)
    u = jnp.sin(grid.axis("x"))
    assert jnp.allclose(ds.fd.biharmonic(u, grid, order=4), u, atol=2e-3)  # ∇⁴ sin x = sin x
    ```
    """
    order = _check_order(order)
    for dim, (low, high) in zip(grid.dims, grid.bc):
        if not isinstance(low, Periodic):
            raise ValueError(
                f"biharmonic needs periodic axes, but axis {dim!r} has boundary condition "
                f"{low.describe()} / {high.describe()}"
            )
    u = prepare_field(u, grid, "u", None)
    return laplacian(laplacian(u, grid, order=order, t=t), grid, order=order, t=t)
