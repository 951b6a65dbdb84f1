"""How a sweep's Dataset is laid out in its zarr store (zarr format 3), readable with
`xr.open_zarr` while the sweep runs.

**Points along one axis.** The sweep's points are stored in their flat order (C order over
the grid, as the chunks run), along the sweep's own dimension when it has one (`rho`, or
`sample` for random and zip sweeps) and along `point` for a grid of several keys, with each
key's value at every point as a coordinate on `point`
(`store.set_index(point=[...]).unstack("point")` gives the grid back). So sweep chunk `i` is
exactly zarr chunk `i` of every variable: a chunk is written whole, by one writer, never
read-modify-written, and any two chunks touch disjoint objects.

**Before a chunk is done** its points read as NaN (floating variables), `status = -1`
("not_computed", listed in the store's flag attributes), `num_steps = -1`, and -1, 0 or
False for other integer or boolean variables: a point's results are final once its status
is `>= 0`.

**Bookkeeping** lives in the subgroup `difsim_store` (which `xr.open_zarr` does not show):
`chunk_sha256`, one row of 32 bytes per chunk, each row its own zarr chunk, written after
the chunk's data. The root attributes carry the Dataset's attributes, `difsim_output =
"sweep store"` (what the store is, for the ownership rules) and the store's identity
(`difsim_store_*`: format, hash of the settings, the settings, chunk size, points).
"""

import json
import math
import warnings
from typing import Any

import numpy as np

from difsim._compat import zarr_sync
from difsim._sweep._layout import OutputLayout
from difsim._sweep._location import StoreLocation

FORMAT = 3  # of the sweep store: 3 is the zarr store (1 and 2 were folders of .npz files)
MARK = "sweep store"  # its `difsim_output` attribute
NOT_COMPUTED = -1  # the status of a point whose chunk is not done
BOOK = "difsim_store"  # the bookkeeping subgroup
SUMS = f"{BOOK}/chunk_sha256"  # (n_chunks, 32) uint8: a chunk's SHA-256, zero until done
DIGEST = 32
# Uncompressed: a solver's values compress little (their low bits are noise), the store is
# removed once the netCDF file is written, and zstd cost a third of a chunk's write time.
CODECS = None


def flat_dim(layout: OutputLayout) -> str:
    """The dimension the points are stored along: the sweep's own for a 1-D sweep, else
    `point` (or `sweep_point` if a variable or dimension already has that name)."""
    if len(layout.dims) == 1:
        return layout.dims[0]
    taken = set(layout.coords) | set(layout.variables) | set(layout.fixed)
    taken |= {d for dims, *_ in layout.variables.values() for d in dims}
    taken |= {d for dims, *_ in layout.fixed.values() for d in dims}
    return next(name for name in ("point", "sweep_point", "sweep_point_") if name not in taken)


def fill_value(dtype: np.dtype) -> Any:
    """What a variable of `dtype` reads as before its chunk is done."""
    kind = np.dtype(dtype).kind
    if kind in "fc":
        return np.nan
    if kind == "i":
        return NOT_COMPUTED
    return False if kind == "b" else 0


def json_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """`attrs` as JSON values (zarr stores attributes as JSON): arrays and tuples as lists,
    NumPy scalars as Python numbers."""

    def convert(value):
        if isinstance(value, np.ndarray | list | tuple):
            return [
                convert(v) for v in (value.tolist() if isinstance(value, np.ndarray) else value)
            ]
        return value.item() if isinstance(value, np.generic) else value

    return {key: convert(value) for key, value in attrs.items()}


def store_attrs(layout: OutputLayout, identity: dict[str, Any]) -> dict[str, Any]:
    """The root attributes: the Dataset's, marked as a sweep store, plus `identity`."""
    attrs = json_attrs(dict(layout.attrs))
    attrs["difsim_output"] = MARK
    attrs.update({f"difsim_store_{k}": v for k, v in identity.items()})
    return attrs


def _variable_attrs(name: str, attrs: dict[str, Any], aux: list[str]) -> dict[str, Any]:
    out = json_attrs(dict(attrs))
    if name == "status" and "flag_values" in out:
        out["flag_values"] = [NOT_COMPUTED, *out["flag_values"]]
        out["flag_meanings"] = f"not_computed {out.get('flag_meanings', '')}".strip()
    if aux:
        # Non-dimension coordinates, tied to the variable as xarray writes them (CF).
        out["coordinates"] = " ".join(aux)
    return out


def create(location: StoreLocation, layout: OutputLayout, size: int, attrs: dict) -> None:
    """Create the store of `layout` in chunks of `size` points at `location` (which must not
    exist): the arrays, every coordinate, then the bookkeeping, then the consolidated
    metadata. The bookkeeping array is created after the coordinates are written, so its
    presence says the store was created completely ([`is_complete`][])."""
    # One coroutine on zarr's event loop: the arrays are created, and the coordinates
    # written, concurrently rather than one round trip each.
    zarr_sync(_create(location, layout, size, attrs))
    consolidate(location)


async def _create(location: StoreLocation, layout: OutputLayout, size: int, attrs: dict):
    import asyncio

    import zarr.api.asynchronous as za

    group = await za.open_group(
        store=location.zarr_store(), mode="w-", zarr_format=3, attributes=attrs
    )
    dim, n = flat_dim(layout), layout.size
    coords = _flat_coords(layout, dim)
    aux = [k for k, (dims, _) in coords.items() if dims != (k,)]
    specs = {}
    for name, (tdims, tail, dtype, vattrs) in layout.variables.items():
        specs[name] = dict(
            shape=(n, *tail), chunks=(size, *(max(1, t) for t in tail)), dtype=dtype,
            fill_value=fill_value(dtype), dimension_names=(dim, *tdims),
            attributes=_variable_attrs(name, vattrs, aux),
        )  # fmt: skip
    for name, (cdims, values) in coords.items():
        shape = (n,) if callable(values) else np.shape(values)
        dtype = values(0, 0).dtype if callable(values) else np.asarray(values).dtype
        # Along the points (a grid's or a random sweep's keys) in the data's chunks.
        chunks = tuple(max(1, min(size, s) if cdims[:1] == (dim,) else s) for s in shape)
        specs[name] = dict(shape=shape, chunks=chunks, dtype=dtype, dimension_names=cdims,
                           attributes=json_attrs(dict(layout.coords[name][2])))  # fmt: skip
    for name, (fdims, values, fattrs) in layout.fixed.items():  # array parameters, whole
        shape = np.shape(values)
        specs[name] = dict(shape=shape, chunks=tuple(max(1, s) for s in shape),
                           dtype=np.asarray(values).dtype, dimension_names=fdims,
                           attributes=json_attrs(dict(fattrs)))  # fmt: skip
    made = await asyncio.gather(
        *(group.create_array(name, compressors=CODECS, **kw) for name, kw in specs.items())
    )
    arrays = dict(zip(specs, made))
    whole = [arrays[k].setitem(slice(None), np.asarray(v)) for k, (_, v) in coords.items()
             if not callable(v)]  # fmt: skip
    whole += [arrays[k].setitem(slice(None), np.asarray(v))
              for k, (_, v, _) in layout.fixed.items()]  # fmt: skip
    await asyncio.gather(*whole)
    along = {k: v for k, (_, v) in coords.items() if callable(v)}
    for a in range(0, n, size):  # a grid key's value at every point, a chunk at a time
        b = min(n, a + size)
        await asyncio.gather(*(arrays[k].setitem(slice(a, b), v(a, b)) for k, v in along.items()))
    book = await group.create_group(BOOK)
    await book.create_array(SUMS.rsplit("/", 1)[1], shape=(math.ceil(n / size), DIGEST),
                            chunks=(1, DIGEST), dtype=np.uint8, fill_value=0,
                            compressors=CODECS)  # fmt: skip


def _flat_coords(layout: OutputLayout, dim: str) -> dict[str, tuple[tuple[str, ...], Any]]:
    """`{name: (dims, values)}` of the store's coordinates: a grid of several keys becomes
    one coordinate per key along `dim` (values given as `values(start, stop)`, computed a
    chunk at a time); the others are kept as they are."""
    if len(layout.dims) == 1:
        return {k: (d, v) for k, (d, v, _) in layout.coords.items()}
    out: dict[str, tuple[tuple[str, ...], Any]] = {}
    for name, (cdims, values, _) in layout.coords.items():
        if cdims == (name,) and name in layout.dims:
            axis, values = layout.dims.index(name), np.asarray(values)

            def along(start, stop, axis=axis, values=values):
                index = np.unravel_index(np.arange(start, stop), layout.shape)[axis]
                return values[index]

            out[name] = ((dim,), along)
        else:
            out[name] = (cdims, values)
    return out


def consolidate(location: StoreLocation) -> None:
    """Write the consolidated metadata (what `xr.open_zarr` reads in one request)."""
    import zarr

    with warnings.catch_warnings():
        # zarr notes that consolidated metadata is not (yet) part of the v3 spec; xarray
        # reads and writes it all the same.
        warnings.filterwarnings("ignore", message="Consolidated metadata", category=UserWarning)
        zarr.consolidate_metadata(location.zarr_store())


def open_group(location: StoreLocation, *, read_only: bool = False) -> Any:
    """The store's root group, with the metadata of every array in one read when the
    consolidated copy is there (it never changes after the store's creation)."""
    import zarr

    return zarr.open_group(
        location.zarr_store(read_only=read_only), mode="r" if read_only else "r+",
        zarr_format=3,
    )  # fmt: skip


def is_consolidated(group: Any) -> bool:
    return group.metadata.consolidated_metadata is not None


def identity(group: Any) -> dict[str, Any] | None:
    """The `difsim_store_*` attributes of a sweep store's root `group` (without the
    prefix), or `None` if the group is not a difsim sweep store."""
    attrs = dict(group.attrs)
    if attrs.get("difsim_output") != MARK:
        return None
    prefix = "difsim_store_"
    return {k.removeprefix(prefix): v for k, v in attrs.items() if k.startswith(prefix)}


def is_complete(group: Any, layout: OutputLayout, size: int) -> bool:
    """Whether `group` was created completely, for `layout` in chunks of `size`: every
    variable with the expected shape, chunks and dtype, and the bookkeeping array."""
    try:
        sums = group[SUMS]
        arrays = {name: group[name] for name in layout.variables}
    except KeyError:
        return False
    if sums.shape != (math.ceil(layout.size / size), DIGEST):
        return False
    for name, (_, tail, dtype, _) in layout.variables.items():
        a = arrays[name]
        if a.shape != (layout.size, *tail) or a.dtype != np.dtype(dtype) or a.chunks[0] != size:
            return False
    return True


def settings_text(settings: dict[str, str]) -> str:
    return json.dumps(settings, sort_keys=True)


def in_order(*stages: list) -> list:
    """Run stages of zarr's asynchronous calls on zarr's own event loop, in one round trip
    from this thread (not one per array: about half the CPU time of a chunk's writes): the
    calls of a stage at once, the stages one after the other. Returns the last stage's
    results."""
    import asyncio

    async def run():
        results: list = []
        for stage in stages:
            results = await asyncio.gather(*stage)
        return results

    return zarr_sync(run())
