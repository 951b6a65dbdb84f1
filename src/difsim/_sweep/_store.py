"""Where a sweep with an output path keeps its results: a resumable chunk store, then netCDF.

With an output path `runs/x.nc`, every finished chunk is written to `runs/x.nc.chunks/`
(one `.npz` per chunk, written to a temporary file and renamed, so a chunk file is either
complete or absent, even after `kill -9`). `manifest.json` there records a hash of
everything that determines the results; a rerun with the same hash reuses the chunks on
disk, a different one is refused. Each chunk file carries the sweep's hash and its own index
under a checksum of its content, so a chunk file that is torn, altered, or copied over
another (of this sweep or another one) is detected and computed again. When every chunk is
done, the netCDF file is assembled chunk by chunk (bounded memory) into a temporary file,
renamed into place, and the chunk folder is removed.
"""

import hashlib
import json
import logging
import math
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from difsim._io import (
    OutputError,
    atomic_write,
    atomic_write_stream,
    atomic_write_text,
    check_target,
)
from difsim._sweep import _distributed as dist
from difsim._sweep._layout import OutputLayout

logger = logging.getLogger("difsim")

FORMAT = 2  # version of the chunk-store layout (2: chunks carry sweep, index and checksum)
_SWEEP, _INDEX, _CHECKSUM = "__sweep__", "__chunk__", "__checksum__"  # a chunk's identity


class SweepOutputError(OutputError):
    """The output path holds results of a different sweep (or another file)."""


# ---------------------------------------------------------------- the chunk store


class ChunkStore:
    """Finished chunks of one sweep, on disk next to its output file.

    **Arguments:** `output` (the netCDF path), `settings` (`{name: text}` of everything
    that determines the results, chunk size included; its hash identifies the chunks),
    `sizes` (number of points, chunk size), `expected` (`{name: (tail_shape, dtype)}`, to
    validate chunk files on reading), `result_hash` (the finished file's), `history` (CF's).
    """

    def __init__(
        self,
        output: str | os.PathLike,
        settings: dict[str, str],
        sizes: tuple[int, int],
        expected: dict[str, tuple[tuple[int, ...], Any]],
        result_hash: str,
        history: str | None = None,
    ):
        self.output, self.history = Path(output), history
        self.directory = chunk_directory(output)
        self.settings = dict(settings)
        self.hash = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
        self.result_hash = result_hash
        self.n_points, self.chunk_size = sizes
        self.n_chunks = math.ceil(self.n_points / self.chunk_size)
        self.expected = expected

    @staticmethod
    def peek_chunk_size(output: str | os.PathLike) -> int | None:
        """The chunk size of an unfinished sweep stored for `output`, if any."""
        manifest = _read_manifest(chunk_directory(output) / "manifest.json") or {}
        try:
            return int(manifest["settings"]["chunk_size"])
        except (KeyError, TypeError, ValueError):
            return None

    def _chunk_path(self, index: int) -> Path:
        return self.directory / f"chunk_{index:07d}.npz"

    def finished_output(self) -> bool:
        """Whether `output` already holds this sweep's complete result."""
        if not self.output.exists():
            return False
        return _file_hash(self.output) == self.result_hash

    def check(self) -> None:
        """Check the output path before any work: a `.nc` path, in a writable folder, not a
        directory, and if it exists, a difsim sweep output (see `difsim._io`)."""
        try:
            check_target(self.output, "sweep")
        except OutputError as e:
            raise SweepOutputError(str(e)) from e

    def prepare(self, *, resume: bool, overwrite: bool) -> set[int]:
        """Create (or reopen) the chunk folder; return the indices of finished chunks.

        **Raises:** [`SweepOutputError`][] if the output file or the chunk folder belongs to
        a different sweep and `overwrite` is false.
        """
        if self.output.exists() and not overwrite:
            found, before = _file_info(self.output)
            if found != self.result_hash:
                what = "holds the result of a different sweep" + (
                    f" (what differs: {self._differences(before)})" if before else ""
                )
                raise SweepOutputError(
                    f"{self.output} exists and {what}; refusing to replace it. Choose a new "
                    "output path, or pass overwrite=True (difsim run --overwrite) to replace it"
                )
        if self.directory.exists() or self.directory.is_symlink():
            self._clear_directory(resume=resume, overwrite=overwrite)
        if not self.directory.exists():
            self.directory.mkdir(parents=True)
            manifest = dict(format=FORMAT, hash=self.hash, n_chunks=self.n_chunks)
            manifest.update(settings=self.settings, history=self.history)
            atomic_write_text(self.directory / "manifest.json", json.dumps(manifest, indent=1))
        done = set()
        for path in self.directory.glob("chunk_*.npz"):
            index = int(path.stem.removeprefix("chunk_"))
            if index < self.n_chunks:
                done.add(index)
        return done

    def _clear_directory(self, *, resume: bool, overwrite: bool) -> None:
        """Keep the chunk folder (same sweep, resuming) or remove it (a different sweep with
        `overwrite`, or not resuming); a folder that is not a difsim chunk folder is never
        removed."""
        if self.directory.is_symlink() or not self.directory.is_dir():
            raise SweepOutputError(
                f"{self.directory} (where the chunks of {self.output} go) exists and is not a "
                "folder; difsim never replaces it: move it away or choose another output path"
            )
        old = _read_manifest(self.directory / "manifest.json")
        if old is None and not all(_chunk_store_file(p.name) for p in self.directory.iterdir()):
            raise SweepOutputError(
                f"{self.directory} (where the chunks of {self.output} go) exists and is not a "
                "difsim chunk folder (no manifest); difsim never deletes it, not even with "
                "overwrite=True: move it away or choose another output path"
            )
        if old is not None and old.get("hash") != self.hash and not overwrite:
            raise SweepOutputError(self._mismatch(old))
        if old is None or old.get("hash") != self.hash or not resume:
            shutil.rmtree(self.directory)
        else:  # resuming: the output says when the sweep began, as an uninterrupted run's
            self.history = old.get("history", self.history)

    def _mismatch(self, old: dict | None) -> str:
        head = (
            f"{self.directory} holds the unfinished chunks of a different sweep, so they "
            f"cannot be resumed into {self.output}"
        )
        tail = (
            "Choose a new output path, or pass overwrite=True (difsim run --overwrite) to "
            "discard those chunks"
        )
        if old is None or not isinstance(old.get("settings"), dict):
            return f"{head} (its manifest is missing or unreadable). {tail}"
        return f"{head}; what differs: {self._differences(old['settings'])}. {tail}"

    def _differences(self, before: dict[str, Any]) -> str:
        def _short(text: Any, n: int = 120) -> str:
            return str(text) if len(str(text)) <= n else str(text)[: n - 3] + "..."

        now = self.settings
        if "chunk_size" not in before:  # a finished file: chunking is not part of the result
            now = {k: v for k, v in now.items() if k != "chunk_size"}
        return "; ".join(
            f"{k}: {_short(before.get(k, '(absent)'))} -> {_short(now.get(k, '(absent)'))}"
            for k in sorted(set(before) | set(now))
            if before.get(k) != now.get(k)
        )

    def write(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        """Store chunk `index` atomically (temporary file, then rename), with its identity:
        this sweep's hash, the index, and a checksum of both and of every array."""
        identity = {
            _SWEEP: np.asarray(self.hash),
            _INDEX: np.asarray(index, np.int64),
            _CHECKSUM: np.asarray(self._checksum(index, arrays)),
        }
        atomic_write_stream(self._chunk_path(index), lambda f: np.savez(f, **arrays, **identity))

    def read(self, index: int, length: int) -> dict[str, np.ndarray] | None:
        """Chunk `index` (of `length` points), or `None` if its file is missing, not a valid
        chunk, or not chunk `index` of this sweep (e.g. another chunk's file copied over it)."""
        path = self._chunk_path(index)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in self.expected}
                identity = (str(data[_SWEEP]), int(data[_INDEX]), str(data[_CHECKSUM]))
        except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, EOFError):
            return None
        for name, (tail, dtype) in self.expected.items():
            a = arrays[name]
            if a.shape != (length, *tail) or a.dtype != np.dtype(dtype):
                return None
        if identity != (self.hash, index, self._checksum(index, arrays)):
            logger.warning("%s is not chunk %d of this sweep: computing it again", path, index)
            return None
        return arrays

    def _checksum(self, index: int, arrays: dict[str, np.ndarray]) -> str:
        digest = hashlib.sha256(f"{self.hash} {index}".encode())
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            digest.update(f"{name} {a.dtype.str} {a.shape}".encode())
            digest.update(a.tobytes())
        return digest.hexdigest()

    def discard(self, index: int) -> None:
        self._chunk_path(index).unlink(missing_ok=True)

    def remove(self) -> None:
        """Delete the chunk folder (after the netCDF file is in place)."""
        shutil.rmtree(self.directory, ignore_errors=True)


def finished_chunks(store: ChunkStore | None, resume: bool, overwrite: bool) -> set[int] | None:
    """The indices of `store`'s finished chunks (`None` if the output is already complete);
    chunk files that do not read back are deleted and left to compute again."""
    if store is None:
        return set()
    if resume and store.finished_output():
        store.remove()  # left over if the last run died between rename and cleanup
        return None
    done = store.prepare(resume=resume, overwrite=overwrite)
    for i in sorted(done):
        # Truncated by a crash of the machine: compute it again.
        if store.read(i, min(store.chunk_size, store.n_points - i * store.chunk_size)) is None:
            store.discard(i)
            done.discard(i)
    return done


def agree(prepare: Callable[[], set[int] | None], n_chunks: int) -> set[int] | None:
    """Run `prepare` on the writer and share its answer with every process, so all of them
    compute the same chunks (the compiled calls are collective)."""
    if jax.process_count() == 1:
        return prepare()
    # flags[0]: 0 = go on, 1 = already complete, 2 = the writer failed; then done marks.
    flags = np.zeros(n_chunks + 1, np.int32)
    error = None
    if dist.is_writer():
        try:
            done = prepare()
            if done is None:
                flags[0] = 1
            else:
                flags[1 + np.asarray(sorted(done), dtype=np.int64)] = 1
        except Exception as e:  # re-raised below, after the others are told
            flags[0], error = 2, e
    flags = np.asarray(multihost_utils.broadcast_one_to_all(flags))
    if error is not None:
        raise error
    if flags[0] == 2:
        raise RuntimeError("the writer process (0) could not prepare the output: see its error")
    if flags[0] == 1:
        return None
    return set(np.flatnonzero(flags[1:]).tolist())


def chunk_directory(output: str | os.PathLike) -> Path:
    """`runs/x.nc` → `runs/x.nc.chunks`: where the unfinished chunks of `output` live."""
    output = Path(output)
    return output.with_name(output.name + ".chunks")


def _chunk_store_file(name: str) -> bool:
    """Whether `name` is one a chunk folder holds: its manifest, chunks, temporary files."""
    return (
        name == "manifest.json"
        or re.fullmatch(r"chunk_\d{7}\.npz", name) is not None
        or (name.startswith(".") and ".tmp" in name)
    )


def _read_manifest(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _file_hash(path: Path) -> str | None:
    return _file_info(path)[0]


def _file_info(path: Path) -> tuple[str | None, dict[str, Any] | None]:
    """`(sweep_hash, settings)` stored in a sweep's netCDF file (`None` if absent)."""
    try:
        import h5netcdf  # lazily: h5py costs ~0.2 s to import, and only outputs need it

        with h5netcdf.File(path, "r") as f:
            found, text = f.attrs.get("sweep_hash"), f.attrs.get("sweep_settings")
    except Exception:  # not an HDF5/netCDF file at all
        return None, None
    try:
        settings = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        settings = None
    return (found if isinstance(found, str) else None), (
        settings if isinstance(settings, dict) else None
    )


# ---------------------------------------------------------------- streaming netCDF


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
            f.dimensions = dims
            # Non-dimension coordinates (parameters along `sample`) are tied to every data
            # variable through the CF `coordinates` attribute, as xarray writes them.
            aux = " ".join(k for k, (d, _, _) in layout.coords.items() if d != (k,))
            for name, (cdims, values, cattrs) in layout.coords.items():
                var = f.create_variable(name, cdims, np.asarray(values).dtype, data=values)
                var.attrs.update(_netcdf_attrs(cattrs))
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
