"""Where a sweep with an output path keeps its results while it runs: a zarr store, then
netCDF.

With an output path `runs/x.nc`, the sweep's results go, chunk by chunk as they finish, into
a zarr store (`runs/x.nc.zarr`, or any fsspec URL given as `store=`), laid out as
`_zarr_layout` describes: `xr.open_zarr` reads the finished chunks while the sweep runs.
After a chunk's data, its SHA-256 checksum (covering the sweep's hash, the chunk's index and
every value) is written to its own row of `difsim_store/chunk_sha256`: a chunk counts as done
only when that row matches what is stored, so a chunk killed half-written, altered, or copied
over another (of this sweep or another one) is computed again. The store's attributes hold a
hash of everything that determines the results; a rerun with the same hash resumes, a
different one is refused (or, with `overwrite`, replaces it). When every chunk is done, the
netCDF file is assembled chunk by chunk (bounded memory) into a temporary file, renamed into
place, and the store is removed.

**Many processes.** Process 0 creates the store (metadata, coordinates) before any chunk
runs; then every process that can reach it writes the chunks `i ≡ its index (mod processes)`:
whole zarr chunks and their checksum rows, disjoint objects, and no metadata write after the
store's creation. If some process cannot reach the store (a local path on one host), process
0 writes every chunk. Process 0 then checks and assembles them.
"""

import hashlib
import logging
import math
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils

from difsim._io import OutputError, check_folder, check_target, lock_path
from difsim._sweep import _distributed as dist, _zarr_layout as zl
from difsim._sweep._events import cut_arrays, cut_layout, most_events
from difsim._sweep._layout import OutputLayout, count_attrs, settings_hash, status_counts
from difsim._sweep._location import StoreLocation
from difsim._sweep._netcdf import write_netcdf
from difsim._sweep._owner import different_result, file_info, legacy_warning, mismatch

logger = logging.getLogger("difsim")


class SweepOutputError(OutputError):
    """The output path (or its store) holds results of a different sweep, or another file."""


class ChunkStore:
    """Finished chunks of one sweep, in a zarr store, before they become its netCDF file.

    **Arguments:** `output` (the netCDF path), `location` (the store: a
    [`StoreLocation`][], a path or URL, or `None` for `<output>.zarr`), `layout` (the
    Dataset's [`OutputLayout`][]), `settings` (`{name: text}` of everything that determines
    the results, chunk size included; its hash identifies the chunks), `chunk_size`
    (points per chunk), `result_hash` (the hash the finished file carries).
    """

    def __init__(
        self,
        output: str | os.PathLike,
        location: "StoreLocation | str | os.PathLike | None",
        layout: OutputLayout,
        settings: dict[str, str],
        chunk_size: int,
        result_hash: str,
    ):
        self.output = Path(output)
        self.location = StoreLocation.of(self.output, location)
        self.layout = layout
        self.settings = dict(settings)
        self.hash = settings_hash(self.settings)
        self.result_hash = result_hash
        self.n_points, self.chunk_size = layout.size, chunk_size
        self.n_chunks = math.ceil(self.n_points / self.chunk_size)
        # Status last: a reader who sees a point's status >= 0 sees its other values too.
        self._order = sorted(layout.variables, key=lambda name: name == "status")
        self._arrays: dict[str, Any] | None = None
        self._sums: Any = None
        self._share = (0, 1)  # (this process's turn, turns): who writes which chunks
        self.history: str | None = None  # CF's, as the store holds it (its first run's)

    @staticmethod
    def peek_chunk_size(location: StoreLocation | None) -> int | None:
        """The chunk size of the unfinished sweep stored at `location`, if any."""
        if location is None:
            return None
        try:
            if not location.exists():
                return None
            found = zl.identity(zl.open_group(location, read_only=True))
            return None if found is None else int(found["chunk_size"])
        except Exception:  # not a store, unreadable, no chunk size: nothing to keep
            return None

    def finished_output(self) -> bool:
        """Whether `output` already holds this sweep's complete result."""
        if not self.output.exists():
            return False
        return file_info(self.output)[0] == self.result_hash

    def check(self) -> None:
        """Check the output path before any work: a `.nc` path, in a writable folder, not a
        directory, and if it exists, a difsim sweep output (see `difsim._io`); and a local
        store beside it, in a folder that can be written."""
        try:
            check_target(self.output, "sweep")
            local = self.location.local
            if local is not None:
                if local.absolute() in (self.output.absolute(), lock_path(self.output).absolute()):
                    raise OutputError(
                        f"store {local}: the sweep's store must not be its output file or lock"
                    )
                check_folder(local.parent, name=f"store {local}")
        except OutputError as e:
            raise SweepOutputError(str(e)) from e

    def prepare(self, *, resume: bool, overwrite: bool) -> set[int]:
        """Create (or reopen) the store; return the chunks marked done (not yet verified).

        **Raises:** [`SweepOutputError`][] if the output file or the store belongs to a
        different sweep and `overwrite` is false, or if the store's location holds anything
        that is not a difsim sweep store (never replaced).
        """
        if self.output.exists() and not overwrite:
            found, before = file_info(self.output)
            if found != self.result_hash:
                raise SweepOutputError(different_result(self.output, self.settings, before))
        legacy_warning(self.output)
        if not self._keep_existing(resume=resume, overwrite=overwrite):
            identity = dict(
                format=zl.FORMAT, hash=self.hash, chunk_size=self.chunk_size,
                points=self.n_points, settings=zl.settings_text(self.settings),
            )  # fmt: skip
            attrs = zl.store_attrs(self.layout, identity)
            zl.create(self.location, self.layout, self.chunk_size, attrs)
            self._open(zl.open_group(self.location))
            return set()  # a new store: nothing is done
        return self.marked()

    def _keep_existing(self, *, resume: bool, overwrite: bool) -> bool:
        """Whether the store already at the location is this sweep's, kept for resuming;
        one that is not kept is removed, if it is a difsim sweep store (else refused)."""
        where = self.location
        if not where.exists():
            return False
        if not where.is_folder():
            raise SweepOutputError(
                f"{where} (where the store of {self.output} goes) exists and is not a folder; "
                "difsim never replaces it: move it away or choose another output path or store"
            )
        try:
            group = zl.open_group(where)
            found = zl.identity(group)
        except Exception:  # not a zarr group at all
            group = found = None
        if found is None:
            if where.only_partial_files():  # killed before its first metadata was written
                where.remove()
                return False
            raise SweepOutputError(
                f"{where} (where the store of {self.output} goes) exists and is not a difsim "
                "sweep store; difsim never deletes it, not even with overwrite=True: move it "
                "away or choose another output path or store"
            )
        if found.get("hash") != self.hash and not overwrite:
            raise SweepOutputError(mismatch(where, self.output, self.settings, found))
        if found.get("hash") == self.hash and found.get("format") == zl.FORMAT and resume:
            if zl.is_complete(group, self.layout, self.chunk_size):
                if not zl.is_consolidated(group):  # killed in the last step of its creation
                    zl.consolidate(where)
                    group = zl.open_group(where)
                self._open(group)
                return True
        where.remove()
        return False

    def _open(self, group: Any) -> None:
        self._sums = group[zl.SUMS]
        # A resumed sweep's file says when the sweep began, as an uninterrupted run's does.
        self.history = dict(group.attrs).get("history")
        # Every value is written, NaN included: zarr would otherwise skip a chunk equal to
        # the fill value, and read back its canonical NaN instead of the NaN computed.
        self._arrays = {
            name: group[name].with_config({"write_empty_chunks": True}) for name in self._order
        }

    def marked(self) -> set[int]:
        """The chunks whose checksum row is written (done, if the checksum matches)."""
        sums = np.asarray(self._sums[...])
        return set(np.flatnonzero(sums.any(axis=1)).tolist())

    def join(self) -> None:
        """In a multi-process run, after process 0 prepared the store: every process opens
        it, and if all can, each writes its share of the chunks (else process 0 all)."""
        reached = True
        if not dist.is_writer():
            try:
                group = zl.open_group(self.location)
                found = zl.identity(group)
                reached = found is not None and found.get("hash") == self.hash
                if reached:
                    self._open(group)
            except Exception:  # a local path of another host, no credentials, ...
                reached = False
        everyone = np.asarray(multihost_utils.process_allgather(np.asarray([reached])))
        if everyone.all():
            self._share = (jax.process_index(), jax.process_count())
        else:
            logger.info("%s is not reachable from every process: process 0 writes every "
                        "chunk", self.location)  # fmt: skip
            self._share = (0, 1) if dist.is_writer() else (-1, 1)

    def writes(self, index: int) -> bool:
        """Whether this process writes chunk `index`."""
        turn, turns = self._share
        return index % turns == turn

    def span(self, index: int) -> tuple[int, int]:
        start = index * self.chunk_size
        return start, min(self.n_points, start + self.chunk_size)

    def write(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        """Store chunk `index` (if this process writes it): every variable's region, status
        last, then the checksum of the sweep's hash, the index and every array."""
        if not self.writes(index):
            return
        assert self._arrays is not None, "prepare() or join() opens the store"
        start, stop = self.span(index)
        digest = self._checksum(index, arrays)
        put = lambda a, where, v: a.async_array.setitem(where, v)  # noqa: E731
        region, data = slice(start, stop), [n for n in self._order if n != "status"]
        zl.in_order(
            [put(self._arrays[n], region, arrays[n]) for n in data],
            [put(self._arrays["status"], region, arrays["status"])],
            [put(self._sums, index, np.frombuffer(digest, np.uint8))],
        )

    def read(self, index: int) -> dict[str, np.ndarray] | None:
        """Chunk `index`, or `None` if it is not done, does not read back, or is not chunk
        `index` of this sweep (e.g. another chunk's objects copied over it)."""
        assert self._arrays is not None, "prepare() or join() opens the store"
        start, stop = self.span(index)
        try:
            names = list(self._arrays)
            row, *values = zl.in_order(
                [self._sums.async_array.getitem(index)]
                + [self._arrays[n].async_array.getitem(slice(start, stop)) for n in names]
            )
            stored = np.asarray(row).tobytes()
            if not any(stored):
                return None
            arrays = {name: np.asarray(v) for name, v in zip(names, values)}
        except Exception:  # a torn or foreign object: zarr's and the codecs' errors vary
            logger.warning("chunk %d of %s does not read back: computing it again",
                           index, self.location)  # fmt: skip
            return None
        for name, (_, tail, dtype, _) in self.layout.variables.items():
            a = arrays[name]
            if a.shape != (stop - start, *tail) or a.dtype != np.dtype(dtype):
                return None
        if stored != self._checksum(index, arrays):
            logger.warning("chunk %d of %s is not chunk %d of this sweep: computing it again",
                           index, self.location, index)  # fmt: skip
            return None
        return arrays

    def _checksum(self, index: int, arrays: dict[str, np.ndarray]) -> bytes:
        digest = hashlib.sha256(f"{self.hash} {index}".encode())
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            digest.update(f"{name} {a.dtype.str} {a.shape}".encode())
            digest.update(a.tobytes())
        return digest.digest()

    def discard(self, index: int) -> None:
        """Mark chunk `index` not done (checksum row first, then its status)."""
        assert self._arrays is not None
        self._sums[index] = 0
        start, stop = self.span(index)
        self._arrays["status"][start:stop] = zl.NOT_COMPUTED

    def remove(self) -> None:
        """Delete the store (after the netCDF file is in place)."""
        try:
            self.location.remove()
        except OSError as e:  # the result is safe in the netCDF file: say so, go on
            logger.warning("could not remove the sweep store %s (%s); delete it by hand",
                           self.location, e)  # fmt: skip

    def remove_leftover(self) -> None:
        """Delete this sweep's store if it is still there: left over if the last run died
        between the netCDF file's rename and the store's removal. Any other store is kept."""
        try:
            found = self.location.exists() and zl.identity(zl.open_group(self.location))
        except Exception:  # not a store: not ours to delete
            return
        if found and found.get("hash") == self.hash:
            self.remove()

    def _event_counts(self) -> Iterator[np.ndarray]:
        """The trajectories' `event_count`, a chunk at a time (bounded memory)."""
        assert self._arrays is not None
        return (self._arrays["event_count"][slice(*self.span(i))] for i in range(self.n_chunks))

    def assemble(self) -> dict[int, int]:
        """Stream every chunk, checked, into the netCDF file; remove the store; return the
        status counts."""
        counted: dict[int, int] = {}
        # The file's `event` dimension is as long as the most events of any trajectory.
        n_events = most_events(self.layout, self._event_counts)

        def chunks():
            for i in range(self.n_chunks):
                data = self.read(i)
                if data is None:
                    raise RuntimeError(f"chunk {i} of {self.location} vanished or is corrupt")
                for code, count in status_counts(data["status"]).items():
                    counted[code] = counted.get(code, 0) + count
                yield (*self.span(i), cut_arrays(self.layout, data, n_events))

        history = {"history": self.history} if self.history else {}
        layout = cut_layout(self.layout, n_events)
        write_netcdf(self.output, layout, chunks(), lambda: {**history, **count_attrs(counted)})
        self.remove()
        return counted


def finished_chunks(store: ChunkStore | None, resume: bool, overwrite: bool) -> set[int] | None:
    """The indices of `store`'s finished chunks (`None` if the output is already complete);
    chunks that do not read back as this sweep's are marked not done, to compute again."""
    if store is None:
        return set()
    if resume and store.finished_output():
        store.remove_leftover()
        return None
    done = store.prepare(resume=resume, overwrite=overwrite)
    for i in sorted(done):
        if store.read(i) is None:
            store.discard(i)
            done.discard(i)
    return done


def agree(
    prepare: Callable[[], set[int] | None], n_chunks: int, store: ChunkStore | None = None
) -> set[int] | None:
    """Run `prepare` on the writer and share its answer with every process, so all of them
    compute the same chunks (the compiled calls are collective); then every process joins
    `store` (see [`ChunkStore.join`][])."""
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
    if store is not None:
        store.join()
    return set(np.flatnonzero(flags[1:]).tolist())
