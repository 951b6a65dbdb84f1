"""Where a statistics sweep keeps its progress: the accumulators of every point after each
chunk, in `<output>.mcstate.npz` (written atomically), so a killed run resumes from the last
finished chunk; and the checks of its output path (ownership, lock, a finished result).

The state file records the sweep's hash and a marker: a rerun with the same settings
resumes from it, one with other settings is refused unless `overwrite`, and a file that is
not a difsim state file is never touched.
"""

import contextlib
import os
import zipfile
from pathlib import Path

import numpy as np
import xarray as xr

from difsim._io import (
    OutputError,
    atomic_write,
    atomic_write_stream,
    check_target,
    output_lock,
    remove_leftovers,
)
from difsim._sweep._layout import counts_from_file
from difsim._sweep._owner import different_result, file_info
from difsim._sweep._statistics import BINS, Accumulator
from difsim._sweep._store import SweepOutputError

_MARKER = "difsim_monte_carlo_state"
_FORMAT = 1


def state_path(output: str | os.PathLike) -> Path:
    """The state file of `output`: `<output>.mcstate.npz`."""
    output = Path(output)
    return output.with_name(output.name + ".mcstate.npz")


class MCState:
    """The running statistics of a sweep: one [`Accumulator`][] per point, the histogram
    ranges (`lo`, `hi`: `{var: (points, time)}`, `None` before the pilot), the next chunk
    to run and the count of each path status."""

    def __init__(self, points: list[Accumulator], next_chunk: int, lo, hi, statuses):
        self.points, self.next_chunk = points, next_chunk
        self.lo, self.hi, self.statuses = lo, hi, statuses

    @staticmethod
    def fresh(n_points: int, setup, n_chunks: int) -> "MCState":
        shape = (setup.times.n_saved, BINS + 2)
        points = [Accumulator() for _ in range(n_points)]
        for acc in points:
            acc.hist = {v: np.zeros(shape, np.int64) for v in setup.plan.quantiles}
        return MCState(points, 0, None, None, {})

    def ranges(self):
        """`{var: (lo, hi)}` of the histograms (`(points, time)` each), or `None`."""
        if self.lo is None:
            return None
        return {v: (self.lo[v], self.hi[v]) for v in self.lo}

    def set_ranges(self, lo, hi) -> None:
        self.lo, self.hi = lo, hi
        for p, acc in enumerate(self.points):
            acc.lo = {v: lo[v][p] for v in lo}
            acc.hi = {v: hi[v][p] for v in hi}

    def paths_done(self) -> int:
        """Paths run so far (succeeded or not)."""
        return sum(self.statuses.values())

    def count_statuses(self, codes: np.ndarray) -> None:
        values, counts = np.unique(np.asarray(codes), return_counts=True)
        for code, n in zip(values.tolist(), counts.tolist()):
            self.statuses[int(code)] = self.statuses.get(int(code), 0) + int(n)

    def status_counts(self) -> dict[int, int]:
        return dict(self.statuses)

    # ------------------------------------------------------------ on disk
    def arrays(self, sweep_hash: str, variables) -> dict[str, np.ndarray]:
        out = {_MARKER: np.asarray(_FORMAT), "hash": np.asarray(sweep_hash)}
        out["next_chunk"] = np.asarray(self.next_chunk)
        out["n"] = np.asarray([acc.n for acc in self.points], np.int64)
        codes = sorted(self.statuses)
        out["status_codes"] = np.asarray(codes, np.int64)
        out["status_counts"] = np.asarray([self.statuses[c] for c in codes], np.int64)
        for v in variables:
            for k in ("mean", "m2", "min", "max"):
                rows = [getattr(acc, k).get(v) for acc in self.points]
                like = next((r for r in rows if r is not None), None)
                if like is not None:
                    out[f"{v}/{k}"] = np.stack([np.full_like(like, np.nan) if r is None else r
                                                for r in rows])  # fmt: skip
        for v in self.points[0].hist if self.points else ():
            out[f"{v}/hist"] = np.stack([acc.hist[v] for acc in self.points])
        if self.lo is not None:
            for v in self.lo:
                out[f"{v}/lo"], out[f"{v}/hi"] = self.lo[v], self.hi[v]
        return out

    @staticmethod
    def from_arrays(data, setup, n_points: int) -> "MCState":
        state = MCState.fresh(n_points, setup, 0)
        state.next_chunk = int(data["next_chunk"])
        for p, acc in enumerate(state.points):
            acc.n = int(data["n"][p])
            if acc.n == 0:
                continue
            for v in setup.plan.variables:
                for k in ("mean", "m2", "min", "max"):
                    getattr(acc, k)[v] = np.asarray(data[f"{v}/{k}"][p])
        for v in setup.plan.quantiles:
            for p, acc in enumerate(state.points):
                acc.hist[v] = np.asarray(data[f"{v}/hist"][p])
        if setup.plan.quantiles and f"{setup.plan.quantiles[0]}/lo" in data:
            lo = {v: np.asarray(data[f"{v}/lo"]) for v in setup.plan.quantiles}
            hi = {v: np.asarray(data[f"{v}/hi"]) for v in setup.plan.quantiles}
            state.set_ranges(lo, hi)
        codes, counts = data["status_codes"].tolist(), data["status_counts"].tolist()
        state.statuses = dict(zip(codes, counts))
        return state


class HeldOutput:
    """The checked, locked output path of a statistics sweep."""

    def __init__(self, output: Path, setup):
        self.output, self.setup, self.state_file = output, setup, state_path(output)

    def open(self) -> xr.Dataset:
        return xr.open_dataset(self.output, engine="h5netcdf")

    def counts(self) -> dict[int, int]:
        return counts_from_file(self.output)

    def save(self, state: MCState) -> None:
        arrays = state.arrays(self.setup.sweep_hash, self.setup.plan.variables)
        atomic_write_stream(self.state_file, lambda f: np.savez(f, **arrays))

    def write(self, dataset: xr.Dataset) -> xr.Dataset:
        """Write the finished Dataset (atomically), drop the state file, reopen it."""
        atomic_write(self.output, lambda tmp: dataset.to_netcdf(tmp, engine="h5netcdf"))
        self.state_file.unlink(missing_ok=True)
        return self.open()


@contextlib.contextmanager
def open_output(output: Path | None, setup, options):
    """Check and lock `output` (yield a [`HeldOutput`][], or `None` without an output).

    **Raises:** [`SweepOutputError`][] if `output` holds another sweep's result (unless
    `options.overwrite`) or cannot be written.
    """
    if output is None:
        yield None
        return
    try:
        check_target(output, "sweep")
    except OutputError as e:
        raise SweepOutputError(str(e)) from e
    with output_lock(output):
        remove_leftovers(state_path(output))  # a killed save's, as the lock's of `output`
        found, before = file_info(output) if output.exists() else (None, None)
        if output.exists() and found != setup.sweep_hash and not options.overwrite:
            raise SweepOutputError(different_result(output, setup.settings, before))
        yield HeldOutput(output, setup)


def _file_hash(path: Path) -> str | None:
    """The `sweep_hash` attribute of a netCDF file (`None` if absent or unreadable)."""
    import h5netcdf  # lazily, as the sweep store: h5py costs ~0.2 s to import

    try:
        with h5netcdf.File(path, "r") as f:
            found = f.attrs.get("sweep_hash")
    except Exception:  # not an HDF5/netCDF file at all
        return None
    return found if isinstance(found, str) else None


def finished_output(output: Path, sweep_hash: str) -> bool:
    """Whether `output` already holds this sweep's complete result."""
    return output.exists() and _file_hash(output) == sweep_hash


def load_state(output: Path, setup, n_points: int, options) -> MCState | None:
    """The saved state of this sweep, to resume from (`None` to start afresh: none saved,
    or `options.resume` is off, or another sweep's with `options.overwrite`).

    **Raises:** [`SweepOutputError`][] for another sweep's state without `overwrite`, or a
    file at the state's path that difsim did not write.
    """
    path = state_path(output)
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            data = {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        data = None
    if data is None or _MARKER not in data:
        raise SweepOutputError(
            f"{path} (where the progress of {output} is kept) exists and is not a difsim "
            "state file; difsim never replaces it: move it away or choose another output path"
        )
    same = str(data["hash"]) == setup.sweep_hash
    if not same and not options.overwrite:
        raise SweepOutputError(
            f"{path} holds the unfinished statistics of a different sweep, so they cannot be "
            f"resumed into {output}. Choose a new output path, or pass overwrite=True "
            "(difsim run --overwrite) to discard them"
        )
    if not same or not options.resume:
        path.unlink()
        return None
    return MCState.from_arrays(data, setup, n_points)
