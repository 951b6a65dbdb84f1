"""A sweep's netCDF file, streamed chunk by chunk from the store (bounded memory).

The file is laid out from the sweep's [`OutputLayout`][] alone, then filled with the chunks
in order, written to a temporary file in the same folder and renamed into place. Only this
module decides how the file's bytes come out: a sweep assembled from a resumed store and
one that ran straight through give the same file, byte for byte.
"""

import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from difsim._io import atomic_write
from difsim._sweep._layout import OutputLayout


def write_netcdf(
    path: str | os.PathLike,
    layout: OutputLayout,
    chunks: Iterator[tuple[int, int, dict[str, np.ndarray]]],
    attrs: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Write the Dataset of `layout` to `path`, filling it from `chunks`.

    `chunks` yields `(start, stop, {name: flat values})` covering `0 … size` in order; only
    one chunk is in memory at a time. `attrs()` is called after the last chunk for extra
    global attributes (e.g. status counts). The file is written to a temporary name in the
    same folder and renamed into place.
    """
    import h5netcdf  # lazily: h5py costs ~0.2 s to import, and only outputs need it

    def write(tmp: Path) -> None:
        with h5netcdf.File(tmp, "w") as f:
            dims: dict[str, int] = dict(zip(layout.dims, layout.shape))
            for name, (cdims, values, _) in layout.coords.items():
                dims.update(zip(cdims, np.shape(values)))
            for tdims, tail, _, _ in layout.variables.values():
                dims.update(zip(tdims, tail))
            for fdims, values, _ in layout.fixed.values():
                dims.update(zip(fdims, np.shape(values)))
            f.dimensions = dims
            # Non-dimension coordinates (parameters along `sample`) are tied to every data
            # variable through the CF `coordinates` attribute, as xarray writes them.
            aux = " ".join(k for k, (d, _, _) in layout.coords.items() if d != (k,))
            for name, (cdims, values, cattrs) in layout.coords.items():
                var = f.create_variable(name, cdims, np.asarray(values).dtype, data=values)
                var.attrs.update(_netcdf_attrs(cattrs))
            for name, (fdims, values, fattrs) in layout.fixed.items():
                var = f.create_variable(name, fdims, np.asarray(values).dtype, data=values)
                var.attrs.update(_netcdf_attrs(fattrs))
            variables = {}
            for name, (tdims, tail, dtype, vattrs) in layout.variables.items():
                var = f.create_variable(name, (*layout.dims, *tdims), dtype)
                var.attrs.update(_netcdf_attrs(vattrs))
                if aux:
                    var.attrs["coordinates"] = aux
                variables[name] = var
            for start, stop, arrays in chunks:
                for index, a, b in _slabs(start, stop, layout.shape):
                    box = tuple(s.stop - s.start for s in index if isinstance(s, slice))
                    for name, var in variables.items():
                        tail = layout.variables[name][1]
                        values = arrays[name][a - start : b - start]
                        var[index] = values.reshape(*box, *tail)
            extra = dict(layout.attrs, **(attrs() if attrs else {}))
            f.attrs.update(_netcdf_attrs(extra))

    atomic_write(path, write)


def _netcdf_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in attrs.items():
        if isinstance(value, list | tuple):
            value = np.asarray(value)
        out[key] = value
    return out


def _slabs(start: int, stop: int, shape: tuple[int, ...]):
    """Split the flat (C-order) index range `[start, stop)` of an array of `shape` into
    boxes: yields `(index, a, b)`, where `index` (ints and slices) selects a box whose
    C-order values are flat `[a, b)`."""
    if not shape:
        if start < stop:
            yield (), start, stop
        return
    inner = math.prod(shape[1:])
    full = tuple(slice(0, n) for n in shape[1:])
    while start < stop:
        row, offset = divmod(start, inner)
        if offset == 0 and stop - start >= inner:
            rows = (stop - start) // inner
            yield (slice(row, row + rows), *full), start, start + rows * inner
            start += rows * inner
            continue
        end = min(stop, (row + 1) * inner)
        for index, a, b in _slabs(offset, end - row * inner, shape[1:]):
            yield (slice(row, row + 1), *index), a + row * inner, b + row * inner
        start = end
