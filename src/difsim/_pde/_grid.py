"""`Grid`: a uniform Cartesian grid in 1, 2 or 3 dimensions with per-side boundaries."""

from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from difsim._pde._boundary import (
    VALUED_CONDITIONS,
    BoundaryCondition,
    Dirichlet,
    Neumann,
    Periodic,
    Side,
    as_condition,
    pad_axis,
)
from difsim._resources import check_grid_size

DIMS = ("x", "y", "z")


def _normalise_bc(bc: Any, ndim: int, dims: tuple[str, ...]) -> tuple[Side, ...]:
    """Per-axis `(low, high)` pairs from the forms `Grid` accepts (see its docstring)."""
    if isinstance(bc, Mapping):
        sides: dict[str, BoundaryCondition] = {}
        for key, value in bc.items():
            if key in dims:
                sides[f"{key}-"] = sides[f"{key}+"] = as_condition(value, key)
            elif key[:-1] in dims and key[-1] in "-+":
                sides[key] = as_condition(value, key)
            else:
                raise ValueError(
                    f"unknown boundary key {key!r}: use an axis ({', '.join(dims)}) or a side "
                    f"such as {dims[0]!r}- / {dims[0]!r}+"
                )
        missing = [f"{d}{s}" for d in dims for s in "-+" if f"{d}{s}" not in sides]
        if missing:
            raise ValueError(f"no boundary condition given for side(s) {', '.join(missing)}")
        pairs = tuple((sides[f"{d}-"], sides[f"{d}+"]) for d in dims)
    elif isinstance(bc, (BoundaryCondition, str)):
        one = as_condition(bc, "every side")
        pairs = tuple((one, one) for _ in dims)
    elif isinstance(bc, Sequence) and len(bc) == ndim:
        pairs = []
        for dim, item in zip(dims, bc):
            if isinstance(item, Sequence) and not isinstance(item, str):
                if len(item) != 2:
                    raise ValueError(
                        f"boundary for axis {dim!r} must be one condition or (low, high)"
                    )
                pairs.append((as_condition(item[0], f"{dim}-"), as_condition(item[1], f"{dim}+")))
            else:
                one = as_condition(item, dim)
                pairs.append((one, one))
        pairs = tuple(pairs)
    else:
        raise ValueError(
            f"bc must be one condition, a sequence of {ndim} (one per axis), or a mapping "
            f"like {{'x': ds.Periodic(), 'y-': ds.Dirichlet(1.0), ...}}, got {bc!r}"
        )
    for dim, (low, high) in zip(dims, pairs):
        if isinstance(low, Periodic) != isinstance(high, Periodic):
            raise ValueError(f"axis {dim!r} is periodic on one side only: set both sides periodic")
    return pairs


class Grid(eqx.Module):
    """A uniform Cartesian grid in 1, 2 or 3 dimensions, with a boundary condition per side.

    Fields on the grid are arrays of shape `grid.shape` (indexing `"ij"`: axis 0 is `x`),
    possibly with leading batch axes; operators act on the trailing `grid.ndim` axes.

    Points: on a periodic axis `x_i = origin + i·dx` with `dx = extent / n` (the point at
    `origin + extent` is the first one again); on a non-periodic axis the points are cell
    centres `x_i = origin + (i + 1/2)·dx` and the boundary lies on the cell faces at
    `origin` and `origin + extent`.

    **Arguments:**

    - `shape`: points per axis, e.g. `(128, 128)`.
    - `extent`: domain length per axis (units of length), a number for every axis or a tuple.
    - `bc`: the boundary conditions: one condition for every side (default
      [`Periodic`][]), a sequence with one entry per axis (a condition, or a `(low, high)`
      pair), or a mapping keyed by axis (`"x"`) or side (`"x-"`, `"x+"`).
    - `origin`: coordinate of the low corner (default 0).
    - `dims`: axis names (default `("x", "y", "z")[:ndim]`); they label outputs.
    - `units`: the units of the coordinates, extent and origin, a UDUNITS string written
      on the output's coordinates (default `"1"`: dimensionless, model units; e.g. `"m"`).

    **Example:**

    ```python
    import difsim as ds

    grid = ds.Grid((64, 32), extent=(2.0, 1.0), bc={"x": ds.Periodic(), "y": ds.Dirichlet(0.0)})
    x, y = grid.mesh()  # each of shape (64, 32)
    assert grid.dx == (2.0 / 64, 1.0 / 32) and x.shape == grid.shape
    ```
    """

    shape: tuple[int, ...] = eqx.field(static=True)
    extent: tuple[float, ...] = eqx.field(static=True)
    origin: tuple[float, ...] = eqx.field(static=True)
    dims: tuple[str, ...] = eqx.field(static=True)
    bc: tuple[Side, ...]
    units: str = eqx.field(static=True)

    def __init__(
        self,
        shape: Sequence[int] | int,
        extent: Sequence[float] | float = 1.0,
        bc: Any = None,
        *,
        origin: Sequence[float] | float = 0.0,
        dims: Sequence[str] | None = None,
        units: str = "1",
    ):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"a grid has 1, 2 or 3 axes, got shape {shape}")
        if not all(isinstance(n, (int, np.integer)) and n >= 2 for n in shape):
            raise ValueError(f"grid shape must be integers >= 2, got {shape}")
        # Before anything is allocated: a field that cannot fit fails every model on it.
        check_grid_size(tuple(int(n) for n in shape))
        ndim = len(shape)
        extent = _per_axis(extent, ndim, "extent")
        if not all(length > 0 for length in extent):
            raise ValueError(f"grid extent must be positive, got {extent}")
        dims = DIMS[:ndim] if dims is None else tuple(dims)
        if len(dims) != ndim or len(set(dims)) != ndim:
            raise ValueError(f"dims must be {ndim} distinct names, got {dims}")
        self.shape = tuple(int(n) for n in shape)
        self.extent = extent
        self.origin = _per_axis(origin, ndim, "origin")
        self.dims = dims
        self.bc = _normalise_bc(Periodic() if bc is None else bc, ndim, dims)
        if not isinstance(units, str) or not units.strip():
            raise ValueError(f"grid units must be a non-empty string such as 'm', got {units!r}")
        self.units = units

    # ------------------------------------------------------------------ constructors
    @classmethod
    def periodic(cls, shape, extent=1.0, **kwargs) -> "Grid":
        """A grid periodic on every axis."""
        return cls(shape, extent, Periodic(), **kwargs)

    @classmethod
    def dirichlet(cls, shape, extent=1.0, value: Any = 0.0, **kwargs) -> "Grid":
        """A grid with `u = value` on every side."""
        return cls(shape, extent, Dirichlet(value), **kwargs)

    @classmethod
    def neumann(cls, shape, extent=1.0, value: Any = 0.0, **kwargs) -> "Grid":
        """A grid with `∂u/∂n = value` on every side (default: no flux)."""
        return cls(shape, extent, Neumann(value), **kwargs)

    def with_bc(self, bc: Any) -> "Grid":
        """The same points with other boundary conditions (same forms as `Grid(bc=...)`)."""
        return Grid(
            self.shape, self.extent, bc, origin=self.origin, dims=self.dims, units=self.units
        )

    def with_shape(self, shape: Sequence[int] | int) -> "Grid":
        """The same domain and boundaries with another resolution (for convergence studies)."""
        new = Grid(
            shape, self.extent, Periodic(), origin=self.origin, dims=self.dims, units=self.units
        )
        if len(new.shape) != self.ndim:
            raise ValueError(f"with_shape keeps {self.ndim} axes, got shape {new.shape}")
        return eqx.tree_at(lambda g: g.bc, new, self.bc)

    # ------------------------------------------------------------------ geometry
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def dx(self) -> tuple[float, ...]:
        """Spacing per axis (units of length)."""
        return tuple(length / n for length, n in zip(self.extent, self.shape))

    @property
    def cell_volume(self) -> float:
        """Product of the spacings: the quadrature weight of one point."""
        return float(np.prod(self.dx))

    @property
    def periodic_axes(self) -> tuple[bool, ...]:
        return tuple(isinstance(low, Periodic) for low, _ in self.bc)

    @property
    def is_periodic(self) -> bool:
        """Whether every axis is periodic (what Fourier spectral operators need)."""
        return all(self.periodic_axes)

    def axis(self, dim: str | int) -> np.ndarray:
        """The 1-D coordinates of axis `dim` (a name or index), shape `(n,)`."""
        i = self._axis_index(dim)
        shift = 0.0 if self.periodic_axes[i] else 0.5
        return self.origin[i] + (np.arange(self.shape[i]) + shift) * self.dx[i]

    @property
    def coords(self) -> dict[str, np.ndarray]:
        """`{dim: 1-D coordinates}` for every axis (used to label xarray outputs)."""
        return {dim: self.axis(i) for i, dim in enumerate(self.dims)}

    def mesh(self, dtype: Any = None) -> tuple[Float[Array, "*shape"], ...]:
        """Coordinate arrays of shape `grid.shape`, one per axis (`indexing="ij"`)."""
        axes = [jnp.asarray(self.axis(i), dtype) for i in range(self.ndim)]
        return tuple(jnp.meshgrid(*axes, indexing="ij"))

    def __getattr__(self, name: str) -> Any:
        # `grid.x`, `grid.y`: the mesh arrays, so `jnp.sin(grid.x)` samples a field.
        if name in ("shape", "extent", "origin", "dims", "bc") or name.startswith("_"):
            raise AttributeError(name)
        dims = object.__getattribute__(self, "dims")
        if name in dims:
            return self.mesh()[dims.index(name)]
        raise AttributeError(f"Grid has no attribute {name!r} (axes are {', '.join(dims)})")

    def require_periodic(self, what: str, hint: str) -> None:
        """Raise `ValueError` naming the first non-periodic axis and its conditions."""
        for dim, (low, high), periodic in zip(self.dims, self.bc, self.periodic_axes):
            if not periodic:
                raise ValueError(
                    f"{what} needs a periodic grid, but axis {dim!r} has {low.describe()} "
                    f"({dim}-) / {high.describe()} ({dim}+): {hint}"
                )

    def _axis_index(self, dim: str | int) -> int:
        if isinstance(dim, (int, np.integer)):
            if not -self.ndim <= dim < self.ndim:
                raise ValueError(f"axis {dim} out of range for a {self.ndim}-D grid")
            return int(dim) % self.ndim
        if dim not in self.dims:
            raise ValueError(f"grid has no axis {dim!r}; axes are {', '.join(self.dims)}")
        return self.dims.index(dim)

    # ------------------------------------------------------------------ fields
    def check(self, u: ArrayLike, name: str = "field") -> None:
        """Raise `ValueError` naming `name` unless `u`'s trailing axes match `grid.shape`."""
        shape = tuple(jnp.shape(u))
        if shape[len(shape) - self.ndim :] != self.shape or len(shape) < self.ndim:
            raise ValueError(
                f"{name} has shape {shape}, but the grid is {self.shape}: a field's last "
                f"{self.ndim} axes must match the grid"
            )

    def integrate(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Integral of `u` over the domain (midpoint rule; spectrally accurate if periodic)."""
        self.check(u)
        axes = tuple(range(jnp.ndim(u) - self.ndim, jnp.ndim(u)))
        return jnp.sum(u, axis=axes) * self.cell_volume

    def pad(
        self,
        u: Float[Array, "..."],
        dim: str | int,
        width: int,
        t: Any = None,
        bc: "Grid | None" = None,
    ) -> Array:
        """`u` with `width` ghost cells on both ends of axis `dim`, filled from the boundary
        conditions (of `bc` if given: another grid with the same shape, for a variable whose
        boundaries differ). `t` is the time, for time-dependent boundary values."""
        self.check(u)
        i = self._axis_index(dim)
        low, high = (bc if bc is not None else self).bc[i]
        axis = jnp.ndim(u) - self.ndim + i
        if self.shape[i] < width and self.periodic_axes[i]:
            raise ValueError(f"axis {self.dims[i]!r} has fewer points than the stencil width")
        return pad_axis(u, axis, width, low, high, self.dx[i], t)

    def describe(self) -> str:
        """One line: shape, extent and boundaries, e.g. for logs and netCDF attributes."""
        sides = []
        for dim, (low, high) in zip(self.dims, self.bc):
            if low.describe() == high.describe():
                sides.append(f"{dim}: {low.describe()}")
            else:
                sides.append(f"{dim}-: {low.describe()}, {dim}+: {high.describe()}")
        shape = "×".join(map(str, self.shape))
        extent = "×".join(f"{e:g}" for e in self.extent)
        extent += "" if self.units == "1" else f" {self.units}"
        return f"Grid {shape} on {extent} ({'; '.join(sides)})"


def _per_axis(value: Any, ndim: int, name: str) -> tuple[float, ...]:
    if isinstance(value, (int, float, np.integer, np.floating)):
        return (float(value),) * ndim
    value = tuple(float(v) for v in value)
    if len(value) != ndim:
        raise ValueError(f"{name} has {len(value)} entries for a {ndim}-D grid")
    return value


_GRID_KEYS = ("shape", "extent", "origin", "bc")


def grid_from_table(base: Grid, table: Mapping[str, Any]) -> Grid:
    """A grid from a config table (`shape`, `extent`, `origin`, `bc`), other keys of `base`.

    `bc` is a name (`"periodic"`, `"dirichlet"`, `"neumann"`) for every side, or a table
    keyed by axis or side whose entries are a name or `{dirichlet = value}` /
    `{neumann = value}`. A new number of axes needs `extent` (or keeps a uniform one).
    """
    unknown = [k for k in table if k not in _GRID_KEYS]
    if unknown:
        raise ValueError(f"unknown grid key {unknown[0]!r}; keys are {', '.join(_GRID_KEYS)}")
    shape = table.get("shape", base.shape)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    same_ndim = len(shape) == base.ndim
    extent = table.get("extent")
    if extent is None:
        if not same_ndim and len(set(base.extent)) > 1:
            raise ValueError(f"shape {list(shape)} changes the number of axes: give extent")
        extent = base.extent if same_ndim else base.extent[0]
    origin = table.get("origin", base.origin if same_ndim else base.origin[0])
    if "bc" in table:
        bc = _bc_from_table(table["bc"])
    elif same_ndim:
        bc = base.bc
    else:
        sides = {low.describe() for low, _ in base.bc} | {high.describe() for _, high in base.bc}
        if len(sides) > 1:
            raise ValueError(f"shape {list(shape)} changes the number of axes: give bc")
        bc = base.bc[0][0]
    return Grid(shape, extent, bc, origin=origin, units=base.units)


def _bc_from_table(bc: Any) -> Any:
    if isinstance(bc, str):
        return as_condition(bc, "grid.bc")
    if not isinstance(bc, Mapping):
        raise ValueError(f"grid bc must be a name or a table keyed by axis/side, got {bc!r}")
    out = {}
    for side, value in bc.items():
        if isinstance(value, Mapping):
            kind = next(iter(value), None)
            if len(value) != 1 or kind not in VALUED_CONDITIONS:
                raise ValueError(
                    f"grid bc {side!r} must be a name or {{dirichlet = value}} / "
                    f"{{neumann = value}}, got {value!r}"
                )
            out[side] = VALUED_CONDITIONS[kind](float(value[kind]))
        else:
            out[side] = as_condition(value, f"grid.bc.{side}")
    return out
