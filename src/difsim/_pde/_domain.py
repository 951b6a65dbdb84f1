"""Domain decomposition: a grid's fields split across a device mesh (`NamedSharding`).

XLA's SPMD partitioner does the rest: stencils become halo exchanges, reductions and FFTs
become collectives. `simulate(model, ..., sharding=ds.domain_sharding(model.grid))` pins the
state to the mesh; every operator is unchanged.
"""

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from difsim._pde._grid import Grid


def domain_sharding(
    grid: Grid,
    devices: Sequence[jax.Device] | None = None,
    *,
    mesh_shape: Sequence[int] | None = None,
) -> NamedSharding:
    """A `NamedSharding` that splits fields of `grid` across `devices` (default: all).

    The mesh axes are named after the grid's dims (`"x"`, `"y"`, …). By default the devices
    go to the leading grid axes, as many to each as divide its number of points (8 devices
    on a 128×128 grid: 8×1); `mesh_shape` chooses the split, e.g. `(4, 2)`.

    **Returns:** the sharding of one field of shape `grid.shape`; `simulate(..., sharding=)`
    applies it to every state variable on the grid.

    **Example:**

    ```python
    import jax
    import jax.numpy as jnp
    import difsim as ds

    grid = ds.Grid((64, 64))
    u = jax.device_put(jnp.zeros(grid.shape), ds.domain_sharding(grid))  # all devices
    assert u.sharding.mesh.axis_names == ("x", "y")
    ```
    """
    devices = list(jax.devices() if devices is None else devices)
    if mesh_shape is None:
        mesh_shape, left = [], len(devices)
        for n in grid.shape:
            split = int(np.gcd(n, left))
            mesh_shape.append(split)
            left //= split
        if left != 1:
            raise ValueError(
                f"cannot split grid {grid.shape} evenly over {len(devices)} devices; "
                "give mesh_shape"
            )
    mesh_shape = tuple(int(m) for m in mesh_shape)
    if len(mesh_shape) != grid.ndim:
        raise ValueError(f"mesh_shape {mesh_shape} must have one entry per grid axis")
    if int(np.prod(mesh_shape)) != len(devices):
        raise ValueError(f"mesh_shape {mesh_shape} does not use the {len(devices)} devices")
    for dim, n, m in zip(grid.dims, grid.shape, mesh_shape):
        if n % m:
            raise ValueError(f"grid axis {dim!r} ({n} points) does not split into {m} parts")
    mesh = Mesh(np.asarray(devices).reshape(mesh_shape), grid.dims)
    return NamedSharding(mesh, PartitionSpec(*grid.dims))


def field_sharding(sharding: NamedSharding, ndim: int) -> NamedSharding:
    """`sharding` (of one field) for an array with `ndim` axes whose trailing axes are the
    field's: leading axes (variables, time) are replicated."""
    spec = tuple(sharding.spec)
    if ndim < len(spec):
        raise ValueError(f"an array with {ndim} axes cannot take sharding {sharding.spec}")
    return NamedSharding(sharding.mesh, PartitionSpec(*((None,) * (ndim - len(spec)) + spec)))


def constrain(tree, sharding: NamedSharding | None, field_ndim: int):
    """Pin every array leaf of `tree` with ≥ `field_ndim` axes to `sharding` (inside jit)."""
    if sharding is None:
        return tree

    def pin(x):
        if getattr(x, "ndim", 0) < field_ndim:
            return x
        return jax.lax.with_sharding_constraint(x, field_sharding(sharding, x.ndim))

    return jax.tree.map(pin, tree)
