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
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np


class BoundaryCondition(eqx.Module):
    """Base class of the condition on one side of one grid axis."""

    @abc.abstractmethod
    def describe(self) -> str:
        """A short human-readable description, e.g. `"Dirichlet(0.0)"`."""


class Periodic(BoundaryCondition):
    """Periodic axis: the field wraps around (must be set on both sides of the axis)."""

    def describe(self) -> str:
        return "periodic"


class _ValueCondition(BoundaryCondition):
    # `value` is a number, an array broadcastable to the boundary face (the field's shape
    # without this axis), or a callable `value(t)` returning one: time-dependent data.
    value: Any = 0.0

    def at(self, t: Any) -> Any:
        """The boundary value at time `t` (calls `value(t)` when it is callable)."""
        if callable(self.value):
            if t is None:
                raise ValueError(
                    f"{self.describe()} has a time-dependent value: pass the time, e.g. "
                    "ds.laplacian(u, grid, t=t)"
                )
            return self.value(t)
        return self.value

    def describe(self) -> str:
        value = "value(t)" if callable(self.value) else _short(self.value)
        return f"{type(self).__name__}({value})"


class Dirichlet(_ValueCondition):
    """Fixed value at the boundary face: `u = value` (units of the field)."""


class Neumann(_ValueCondition):
    """Fixed outward normal derivative at the boundary face: `∂u/∂n = value`.

    `n` points out of the domain, so on the low side `∂u/∂n = -∂u/∂x`. `value = 0` is a
    no-flux (insulated) boundary.
    """


class Extrapolate(BoundaryCondition):
    """No condition: ghost cells continue the polynomial through the nearest interior points.

    Not a physical boundary condition (so not exported): operators use it for coefficient
    fields, e.g. a velocity field whose ghost cells an upwind flux needs.
    """

    def describe(self) -> str:
        return "extrapolated"


def _short(value: Any) -> str:
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return f"array{tuple(np.shape(value))}"


Side = tuple[BoundaryCondition, BoundaryCondition]


def as_condition(bc: Any, where: str) -> BoundaryCondition:
    """`bc` as a [`BoundaryCondition`][]: instances pass, strings name one."""
    if isinstance(bc, BoundaryCondition):
        return bc
    names: dict[str, Callable[[], BoundaryCondition]] = {
        "periodic": Periodic,
        "dirichlet": Dirichlet,
        "neumann": Neumann,
    }
    if isinstance(bc, str) and bc.lower() in names:
        return names[bc.lower()]()
    raise TypeError(
        f"boundary condition for {where} must be ds.Periodic(), ds.Dirichlet(value), "
        f"ds.Neumann(value) or one of {sorted(names)}, got {bc!r}"
    )


@functools.cache
def ghost_weights(kind: str, width: int, side: str) -> np.ndarray:
    """Weights `W` (shape `(width, 1 + m)`) giving ghost values `W @ [b, u_0, …, u_{m-1}]`.

    `b` is the boundary datum (a value, or the outward derivative times the spacing), `u_j`
    the interior values counted from the boundary; ghosts are ordered from the boundary
    outwards. Positions are in units of the spacing with the face at -1/2.
    """
    if kind not in ("dirichlet", "neumann", "extrapolate"):
        raise ValueError(f"unknown ghost-cell kind {kind!r}")
    m = _interior_points(width)
    # m interior values plus the boundary condition fix a degree-m polynomial; without a
    # condition ("extrapolate") the m values fix degree m - 1 and `b` gets weight zero.
    degree = m - 1 if kind == "extrapolate" else m
    powers = np.arange(degree + 1)
    rows = []
    if kind == "dirichlet":
        rows.append((-0.5) ** powers)
    elif kind == "neumann":  # outward derivative at the low face is -p'(-1/2)
        rows.append(-np.where(powers > 0, powers * (-0.5) ** np.maximum(powers - 1, 0), 0.0))
    for j in range(m):
        rows.append(float(j) ** powers)
    system = np.array(rows)
    ghosts = np.array([(-1.0 - g) ** powers for g in range(width)])
    weights = ghosts @ np.linalg.inv(system)
    if kind == "extrapolate":
        weights = np.concatenate([np.zeros((width, 1)), weights], axis=1)
    del side  # the high side is the mirror image: same weights on the reversed field
    return weights


def pad_axis(
    u: Any,
    axis: int,
    width: int,
    low: BoundaryCondition,
    high: BoundaryCondition,
    spacing: float,
    t: Any = None,
) -> Any:
    """`u` with `width` ghost cells added on both ends of array axis `axis`."""
    if isinstance(low, Periodic):
        return jnp.concatenate(
            [_take(u, axis, -width, None), u, _take(u, axis, 0, width)], axis=axis
        )
    n = u.shape[axis]
    m = _interior_points(width)
    if n < m:
        raise ValueError(
            f"a grid axis with {n} points is too short for a {width}-cell boundary stencil "
            f"(needs at least {m})"
        )
    lo = _ghosts(u, axis, width, low, spacing, t, reverse=False)
    hi = _ghosts(u, axis, width, high, spacing, t, reverse=True)
    return jnp.concatenate([lo, u, hi], axis=axis)


def _interior_points(width: int) -> int:
    # Linear ghosts for 3-point stencils, quartic for wider ones (see the module docstring).
    return 1 if width == 1 else 4


def _take(u, axis, start, stop):
    index = [slice(None)] * u.ndim
    index[axis] = slice(start, stop)
    return u[tuple(index)]


def _ghosts(u, axis, width, bc, spacing, t, reverse):
    kinds = {Dirichlet: "dirichlet", Neumann: "neumann", Extrapolate: "extrapolate"}
    kind = next((name for cls, name in kinds.items() if isinstance(bc, cls)), None)
    if kind is None:
        raise TypeError(f"unsupported boundary condition {bc!r}")
    weights = ghost_weights(kind, width, "low")
    m = weights.shape[1] - 1
    interior = _take(u, axis, -m, None) if reverse else _take(u, axis, 0, m)
    interior = jnp.moveaxis(interior, axis, 0)
    if reverse:
        interior = interior[::-1]
    datum = jnp.asarray(0.0 if kind == "extrapolate" else bc.at(t), u.dtype)
    if kind == "neumann":
        datum = datum * spacing
    try:
        datum = jnp.broadcast_to(datum, interior.shape[1:])
    except ValueError:
        raise ValueError(
            f"boundary value of {bc.describe()} has shape {datum.shape}, which does not "
            f"broadcast to the boundary face of shape {interior.shape[1:]} (the field's "
            "shape without the padded axis)"
        ) from None
    stacked = jnp.concatenate([datum[None], interior], axis=0)
    ghost = jnp.tensordot(jnp.asarray(weights, u.dtype), stacked, axes=1)
    if not reverse:
        ghost = ghost[::-1]  # outermost ghost first, as the array runs
    return jnp.moveaxis(ghost, 0, axis)
