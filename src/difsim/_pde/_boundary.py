"""Boundary conditions and the ghost cells every finite-difference operator reads.

All non-periodic axes are cell-centred: the boundary lies half a cell outside the first and
last points. An operator that needs `w` neighbours pads the field along one axis with `w`
ghost cells; the ghost values are those of the polynomial that matches the boundary
condition at the face and the field at the nearest interior points, so every operator sees
the same boundary. The degree follows the stencil: linear for `w = 1` (second-order
stencils), quartic for `w >= 2`. Quartic rather than cubic because a fourth-order
Laplacian with cubic Neumann ghosts is only third-order accurate globally (ghost error
O(h⁴), boundary rows O(h²)); with quartic ghosts the rows next to a face are O(h³) and the
discrete Poisson/heat solutions keep fourth order for Dirichlet and Neumann alike.
"""

import abc
import functools
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array


class BoundaryCondition(eqx.Module):
    """Base class of the condition on one side of one grid axis.

    Each condition fills its own ghost cells (`ghosts`), so a new kind
    of boundary is one new subclass: nothing else dispatches on the kind.

    **Example:**

    ```python
    import difsim as ds

    sides = (ds.Periodic(), ds.Dirichlet(0.0), ds.Neumann(1.0))
    assert all(isinstance(bc, ds.BoundaryCondition) for bc in sides)
    ```
    """

    @abc.abstractmethod
    def describe(self) -> str:
        """A short human-readable description, e.g. `"Dirichlet(0.0)"`."""

    @abc.abstractmethod
    def ghosts(
        self, u: Array, axis: int, width: int, spacing: float, t: Any, *, high: bool
    ) -> Array:
        """The `width` ghost cells beyond one end of array axis `axis` of `u`.

        **Arguments:**

        - `u`: the field, any shape; `axis` is the padded axis (`n` points).
        - `width`: how many ghost cells.
        - `spacing`: the grid spacing along `axis` (units of length).
        - `t`: the time, for time-dependent boundary data (may be `None` otherwise).
        - `high`: the high end (`True`) or the low end (`False`) of the axis.

        **Returns:** an array shaped like `u` with `width` entries along `axis`, in array
        order (so `concatenate([low_ghosts, u, high_ghosts], axis)` is the padded field).
        """


class Periodic(BoundaryCondition):
    """Periodic axis: the field wraps around (must be set on both sides of the axis).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(64, extent=2 * jnp.pi, bc=ds.Periodic())  # the default
    u = jnp.cos(grid.axis("x"))
    assert jnp.allclose(ds.fd.laplacian(u, grid), -u, atol=1e-3)  # wraps across x = 0
    ```
    """

    def describe(self) -> str:
        return "periodic"

    def ghosts(self, u, axis, width, spacing, t, *, high):
        del spacing, t  # wrapping needs neither
        return _take(u, axis, 0, width) if high else _take(u, axis, -width, None)


class _AbstractPolynomialGhosts(BoundaryCondition):
    """Ghost cells from the polynomial that meets the condition at the face and the field
    at the nearest interior points (see the module docstring).

    A subclass states its condition as a linear functional on that polynomial
    (`face_row`) and its right-hand side (`datum`); the weights follow.
    """

    @classmethod
    @abc.abstractmethod
    def face_row(cls, powers: np.ndarray) -> np.ndarray | None:
        """The condition as a row acting on the coefficients of `sum_k c_k x**k` (`x` in
        units of the spacing, the low face at `x = -1/2`, the interior outwards from 0);
        `None` when the condition imposes nothing."""

    @abc.abstractmethod
    def datum(self, t: Any, spacing: float, dtype: Any) -> Array:
        """The right-hand side `b` of the condition in the units of `face_row` (a derivative
        is multiplied by the spacing), of dtype `dtype`: a scalar or an array over the
        boundary face."""

    def ghost_weights(self, width: int) -> np.ndarray:
        """Weights `W` (shape `(width, 1 + m)`) giving ghost values `W @ [b, u_0, …, u_{m-1}]`.

        `b` is `datum`, `u_j` the interior values counted from the boundary; ghosts
        are ordered from the boundary outwards. The high side is the mirror image: the same
        weights act on the reversed field.
        """
        return _polynomial_weights(type(self), width)

    def ghosts(self, u, axis, width, spacing, t, *, high):
        n = u.shape[axis]
        weights = self.ghost_weights(width)
        m = weights.shape[1] - 1
        if n < m:
            raise ValueError(
                f"a grid axis with {n} points is too short for a {width}-cell boundary "
                f"stencil (needs at least {m})"
            )
        interior = jnp.moveaxis(_take(u, axis, -m, None) if high else _take(u, axis, 0, m), axis, 0)
        if high:
            interior = interior[::-1]
        datum = self.datum(t, spacing, u.dtype)
        try:
            datum = jnp.broadcast_to(datum, interior.shape[1:])
        except ValueError:
            raise ValueError(
                f"boundary value of {self.describe()} has shape {datum.shape}, which does not "
                f"broadcast to the boundary face of shape {interior.shape[1:]} (the field's "
                "shape without the padded axis)"
            ) from None
        stacked = jnp.concatenate([datum[None], interior], axis=0)
        ghost = jnp.tensordot(jnp.asarray(weights, u.dtype), stacked, axes=1)
        if not high:
            ghost = ghost[::-1]  # outermost ghost first, as the array runs
        return jnp.moveaxis(ghost, 0, axis)


@functools.cache
def _polynomial_weights(condition: type[_AbstractPolynomialGhosts], width: int) -> np.ndarray:
    m = _interior_points(width)
    # m interior values plus a condition fix a degree-m polynomial; without a condition the
    # m values fix degree m - 1 and the datum gets weight zero.
    row = condition.face_row(np.arange(m + 1))
    degree = m if row is not None else m - 1
    powers = np.arange(degree + 1)
    rows = ([row] if row is not None else []) + [float(j) ** powers for j in range(m)]
    ghosts = np.array([(-1.0 - g) ** powers for g in range(width)])
    weights = ghosts @ np.linalg.inv(np.array(rows))
    if row is None:
        weights = np.concatenate([np.zeros((width, 1)), weights], axis=1)
    return weights


class _AbstractValueCondition(_AbstractPolynomialGhosts):
    # `value` is a number, an array broadcastable to the boundary face (the field's shape
    # without this axis), or a callable `value(t)` returning one: time-dependent data.
    value: eqx.AbstractVar[Any]

    def at(self, t: Any) -> Any:
        """The boundary value at time `t` (calls `value(t)` when it is callable)."""
        if callable(self.value):
            if t is None:
                raise ValueError(
                    f"{self.describe()} has a time-dependent value: pass the time, e.g. "
                    "ds.fd.laplacian(u, grid, t=t)"
                )
            return self.value(t)
        return self.value

    def describe(self) -> str:
        value = "value(t)" if callable(self.value) else _short(self.value)
        return f"{type(self).__name__}({value})"


class Dirichlet(_AbstractValueCondition):
    """Fixed value at the boundary face: `u = value` (units of the field).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(50, bc={"x-": ds.Dirichlet(1.0), "x+": ds.Dirichlet(3.0)})  # on [0, 1]
    u = ds.fd.solve_poisson(jnp.zeros(50), grid)  # ∇²u = 0: the line from 1 to 3
    assert jnp.allclose(u, 1.0 + 2.0 * grid.axis("x"), atol=1e-5)
    ```
    """

    value: Any = 0.0

    @classmethod
    def face_row(cls, powers):
        return (-0.5) ** powers  # p(-1/2)

    def datum(self, t, spacing, dtype):
        return jnp.asarray(self.at(t), dtype)


class Neumann(_AbstractValueCondition):
    """Fixed outward normal derivative at the boundary face: `∂u/∂n = value`.

    `n` points out of the domain, so on the low side `∂u/∂n = -∂u/∂x`. `value = 0` is a
    no-flux (insulated) boundary.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid(100, bc=ds.Neumann(0.0))  # no flux through either end of [0, 1]
    u = jnp.cos(jnp.pi * grid.axis("x"))  # ∂u/∂x = 0 at both ends
    assert jnp.allclose(ds.fd.laplacian(u, grid), -jnp.pi**2 * u, atol=1e-2)
    ```
    """

    value: Any = 0.0

    @classmethod
    def face_row(cls, powers):
        # -p'(-1/2): the outward derivative at the low face, in units of 1/spacing.
        return -np.where(powers > 0, powers * (-0.5) ** np.maximum(powers - 1, 0), 0.0)

    def datum(self, t, spacing, dtype):
        return jnp.asarray(self.at(t), dtype) * spacing


class Extrapolate(_AbstractPolynomialGhosts):
    """No condition: ghost cells continue the polynomial through the nearest interior points.

    Not a physical boundary condition (so not exported): operators use it for coefficient
    fields, e.g. a velocity field whose ghost cells an upwind flux needs.
    """

    def describe(self) -> str:
        return "extrapolated"

    @classmethod
    def face_row(cls, powers):
        return None

    def datum(self, t, spacing, dtype):
        return jnp.zeros((), dtype)


def _short(value: Any) -> str:
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return f"array{tuple(np.shape(value))}"


Side = tuple[BoundaryCondition, BoundaryCondition]

# The names configs and `Grid(bc="...")` may use; the classes do the rest.
NAMED_CONDITIONS: dict[str, type[BoundaryCondition]] = {
    "periodic": Periodic,
    "dirichlet": Dirichlet,
    "neumann": Neumann,
}
# Those that take a value: a config writes them as `{dirichlet = value}`.
VALUED_CONDITIONS: dict[str, type[_AbstractValueCondition]] = {
    name: cls for name, cls in NAMED_CONDITIONS.items() if issubclass(cls, _AbstractValueCondition)
}


def as_condition(bc: Any, where: str) -> BoundaryCondition:
    """`bc` as a [`BoundaryCondition`][]: instances pass, strings name one."""
    if isinstance(bc, BoundaryCondition):
        return bc
    if isinstance(bc, str) and bc.lower() in NAMED_CONDITIONS:
        return NAMED_CONDITIONS[bc.lower()]()
    raise TypeError(
        f"boundary condition for {where} must be ds.Periodic(), ds.Dirichlet(value), "
        f"ds.Neumann(value) or one of {sorted(NAMED_CONDITIONS)}, got {bc!r}"
    )


def pad_axis(
    u: Array,
    axis: int,
    width: int,
    low: BoundaryCondition,
    high: BoundaryCondition,
    spacing: float,
    t: Any = None,
) -> Array:
    """`u` with `width` ghost cells added on both ends of array axis `axis`, each end filled
    by its own condition."""
    lo = low.ghosts(u, axis, width, spacing, t, high=False)
    hi = high.ghosts(u, axis, width, spacing, t, high=True)
    return jnp.concatenate([lo, u, hi], axis=axis)


def _interior_points(width: int) -> int:
    # Linear ghosts for 3-point stencils, quartic for wider ones (see the module docstring).
    return 1 if width == 1 else 4


def _take(u, axis, start, stop):
    index = [slice(None)] * u.ndim
    index[axis] = slice(start, stop)
    return u[tuple(index)]
