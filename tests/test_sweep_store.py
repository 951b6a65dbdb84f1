"""Sweep outputs on disk: a zarr store while the sweep runs (readable with `xr.open_zarr`,
locally or at an fsspec URL), then streamed netCDF; resume after an interruption (a raised
error or `kill -9`), no recomputation of finished chunks, refusal to mix different sweeps."""

import math
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

import difsim as ds
from difsim._sweep import OutputLayout, SweepOutputError, run_sweep
from difsim._sweep._netcdf import _slabs, write_netcdf
from difsim.models import Lorenz

ROOT = Path(__file__).resolve().parents[1]
SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})  # 38
KW = dict(t0=0.0, t1=1.0, rtol=1e-8, atol=1e-8, chunk_size=8, progress=False)  # 5 chunks


class Stop(Exception):
    pass


def _run(path, **kw):
    return run_sweep(Lorenz(), SPEC, output=path, **{**KW, **kw})


def done_chunks(store) -> list[int]:
    """The chunks a sweep store marks done: those whose checksum row is written (read with
    zarr directly, not through difsim's store)."""
    sums = zarr.open_array(store, path="difsim_store/chunk_sha256", mode="r")[...]
    return np.flatnonzero(sums.any(axis=1)).tolist()


def _done_so_far(store) -> list[int]:
    try:
        return done_chunks(store)
    except Exception:  # not created yet, or half-created: zarr's errors vary
        return []


def _load(path) -> xr.Dataset:
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return f.load()


def _interrupt_after(last: int):
    """An `on_chunk` callback that stops the sweep once chunk `last` is stored."""

    def stop(i):
        if i == last:
            raise Stop

    return stop


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run: its file, and the same sweep in memory."""
    path = tmp_path_factory.mktemp("reference") / "sweep.nc"
    dataset, report = _run(path)
    assert report.computed == (0, 1, 2, 3, 4) and report.reused == 0
    return path, ds.sweep(Lorenz(), SPEC, **KW)


def test_file_equals_the_in_memory_result(reference):
    path, memory = reference
    xr.testing.assert_identical(_load(path), memory)
    assert not Path(f"{path}.zarr").exists()  # cleaned up
    assert [p.name for p in path.parent.iterdir()] == ["sweep.nc"]  # no temporary files


def test_resume_after_an_error_skips_finished_chunks(tmp_path, reference):
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(2))
    store = f"{path}.zarr"
    assert not path.exists() and done_chunks(store) == [0, 1, 2]
    # The store reads as a Dataset meanwhile: the finished points with their final values,
    # the others NaN with status -1 (not computed).
    partial = xr.open_zarr(store).load()
    grid = partial.set_index(point=["rho", "beta"]).unstack("point")
    expected = xr.open_dataset(reference[0], engine="h5netcdf").load()
    finished = np.arange(38).reshape(19, 2) < 24  # chunks 0-2 of 8 points, in C order
    assert (grid.status.values >= 0).tolist() == finished.tolist()
    np.testing.assert_array_equal(grid.x.values[finished], expected.x.values[finished])
    assert np.isnan(grid.x.values[~finished]).all() and (grid.status.values[~finished] == -1).all()
    assert "not_computed" in partial.status.attrs["flag_meanings"]
    assert partial.attrs["difsim_output"] == "sweep store"
    dataset, report = _run(path)
    assert report.reused == 3 and report.computed == (3, 4)  # finished chunks not recomputed
    assert path.read_bytes() == reference[0].read_bytes()  # the same file, byte for byte
    assert not Path(store).exists()
    # Running it again finds the result complete: nothing is computed.
    again, report = _run(path)
    assert report.computed == () and report.status_counts == {0: 38}
    xr.testing.assert_identical(again.load(), _load(reference[0]))


def _kill_worker_when(tmp_path, path, setup: str, run_kw: str, ready, what: str) -> None:
    """Run a Lorenz sweep to `path` in a subprocess (after the Python lines `setup`, with
    `run_sweep`'s extra keyword text `run_kw`) and SIGKILL it once `ready()` holds."""
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(
            """
            import time, jax
            jax.config.update("jax_enable_x64", True)
            import numpy as np, difsim as ds
            from difsim._sweep import _netcdf, run_sweep
            """
        )
        + textwrap.dedent(setup)
        + 'spec = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})\n'
        + f"run_sweep(ds.models.Lorenz(), spec, output={str(path)!r}{run_kw}, **{KW!r})\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while not ready():
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, f"the sweep subprocess {what}"
            time.sleep(0.05)
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def test_resume_after_kill_9(tmp_path, reference):
    path = tmp_path / "sweep.nc"
    store = Path(f"{path}.zarr")
    slow = "slow = lambda i: time.sleep(0.5)  # slow enough to be killed\n"
    _kill_worker_when(tmp_path, path, slow, ", on_chunk=slow",
                      lambda: len(_done_so_far(store)) >= 2, "made no progress")  # fmt: skip
    done = len(done_chunks(store))
    assert 2 <= done < 5 and not path.exists()
    dataset, report = _run(path)
    assert report.reused == done and len(report.computed) == 5 - done
    assert path.read_bytes() == reference[0].read_bytes()


def test_a_kill_during_the_final_assembly_leaves_no_temporary_file(tmp_path, reference):
    # Issue 27: killed while the netCDF file was assembled, a sweep left its hidden
    # temporary file (`.sweep.<hex>.tmp.nc`) beside the output, also after the resume.
    path = tmp_path / "sweep.nc"
    stall = """
        slabs = _netcdf._slabs
        def slow(*args):  # the assembly stops here, its temporary file open
            time.sleep(120)
            yield from slabs(*args)
        _netcdf._slabs = slow
        """
    _kill_worker_when(tmp_path, path, stall, "",
                      lambda: bool(list(tmp_path.glob(".sweep.*.tmp.nc"))),
                      "never assembled its file")  # fmt: skip
    (leftover,) = tmp_path.glob(".sweep.*.tmp.nc")
    assert not path.exists() and done_chunks(f"{path}.zarr") == [0, 1, 2, 3, 4]
    dataset, report = _run(path)
    assert report.reused == 5 and report.computed == ()
    assert not leftover.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep.nc", "worker.py"]
    assert path.read_bytes() == reference[0].read_bytes()


def test_a_changed_sweep_is_refused_then_overwritten(tmp_path):
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(0))
    with pytest.raises(SweepOutputError) as info:
        _run(path, rtol=1e-7)
    message = str(info.value)
    for fragment in [f"{path}.zarr", "different sweep", "solver:", "rtol=1e-08", "rtol=1e-07",
                     "overwrite=True"]:  # fmt: skip
        assert fragment in message, (fragment, message)
    assert "time:" not in message  # only what differs is listed
    _, report = _run(path, rtol=1e-7, overwrite=True)
    assert report.reused == 0 and path.exists()
    # A finished output of another sweep is refused too (and kept intact).
    before = path.read_bytes()
    with pytest.raises(SweepOutputError, match="holds the result of a different sweep") as info:
        _run(path)
    assert "what differs: solver:" in str(info.value) and "chunk_size" not in str(info.value)
    assert path.read_bytes() == before


def test_a_corrupt_chunk_is_computed_again(tmp_path, reference):
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(1))
    chunk = Path(f"{path}.zarr") / "x" / "c" / "1"  # chunk 1 of variable x, as zarr keeps it
    chunk.write_bytes(chunk.read_bytes()[:10])  # as if the machine crashed mid-write
    _, report = _run(path)
    assert report.reused == 1 and report.computed == (1, 2, 3, 4)
    assert path.read_bytes() == reference[0].read_bytes()


def test_a_chunk_written_but_not_marked_done_is_computed_again(tmp_path, reference):
    """Killed between a chunk's data and its checksum row: the data is there, the chunk is
    not done."""
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(2))
    sums = zarr.open_array(f"{path}.zarr", path="difsim_store/chunk_sha256", mode="r+")
    sums[1] = 0
    assert done_chunks(f"{path}.zarr") == [0, 2]
    assert (xr.open_zarr(f"{path}.zarr").status.values[8:16] == 0).all()  # data written
    _, report = _run(path)
    assert report.reused == 2 and report.computed == (1, 3, 4)
    assert path.read_bytes() == reference[0].read_bytes()


def test_other_files_are_not_replaced(tmp_path):
    path = tmp_path / "sweep.nc"
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(SweepOutputError, match="is not a difsim sweep output"):
        _run(path)
    path.write_text("notes")
    with pytest.raises(SweepOutputError, match="overwrite=True"):
        _run(path)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (4, 3, 5), (2, 1, 3, 2)])
def test_slabs_cover_any_flat_range_with_boxes(shape):
    n = math.prod(shape)
    flat = np.arange(n).reshape(shape)
    rng = np.random.default_rng(0)
    for _ in range(40):
        start, stop = sorted(rng.integers(0, n + 1, size=2))
        covered = []
        for index, a, b in _slabs(int(start), int(stop), shape):
            assert all(isinstance(s, slice) for s in index) and len(index) == len(shape)
            np.testing.assert_array_equal(flat[index].ravel(), np.arange(a, b))
            covered.append((a, b))
        assert [a for a, _ in covered] == sorted(a for a, _ in covered)
        assert sum(b - a for a, b in covered) == stop - start
        if covered:
            assert covered[0][0] == start and covered[-1][1] == stop


def test_streamed_netcdf_equals_the_dataset_in_memory(tmp_path):
    rng = np.random.default_rng(1)
    layout = OutputLayout(
        dims=("a", "b"),
        shape=(5, 6),
        coords={
            "a": (("a",), np.linspace(0, 1, 5), {"units": "m"}),
            "b": (("b",), np.arange(6.0), {}),
            "time": (("time",), np.array([0.0, 0.5, 1.0]), {"units": "s"}),
        },
        variables={
            "u": (("time",), (3,), np.dtype(np.float32), {"long_name": "u"}),
            "status": ((), (), np.dtype(np.int32), {"flag_values": [0, 1, 2]}),
        },
        attrs={"model": "M", "n": 3, "x": 1.5},
    )
    arrays = {
        "u": rng.normal(size=(30, 3)).astype(np.float32),
        "status": np.arange(30, dtype=np.int32),
    }
    arrays["u"][4] = np.nan
    bounds = [0, 7, 8, 19, 30]  # chunk edges in the middle of rows
    chunks = ((a, b, {k: v[a:b] for k, v in arrays.items()}) for a, b in zip(bounds, bounds[1:]))
    path = tmp_path / "out.nc"
    write_netcdf(path, layout, chunks, lambda: {"n_success": 30})
    expected = layout.to_dataset(arrays)
    expected.attrs["n_success"] = 30
    xr.testing.assert_identical(_load(path), expected)


def test_a_store_at_an_fsspec_url_resumes_into_the_same_file(tmp_path, reference):
    """Object storage through fsspec, here its in-memory filesystem (`s3://...` works the
    same way): readable with `xr.open_zarr` at the URL while unfinished, then resumed."""
    import fsspec

    path, url = tmp_path / "sweep.nc", f"memory://difsim-test-{os.getpid()}/sweep.zarr"
    with pytest.raises(Stop):
        _run(path, store=url, on_chunk=_interrupt_after(1))
    assert not Path(f"{path}.zarr").exists() and done_chunks(url) == [0, 1]
    partial = xr.open_zarr(url)
    assert (partial.status.values >= 0).sum() == 16 and partial.sizes == {"point": 38}
    _, report = _run(path, store=url)
    assert report.reused == 2 and report.computed == (2, 3, 4)
    assert path.read_bytes() == reference[0].read_bytes()
    assert not fsspec.filesystem("memory").exists(url.removeprefix("memory://"))  # removed
    with pytest.raises(ValueError, match="store needs an output path"):
        ds.sweep(Lorenz(), SPEC, store=url, **KW)


def test_a_one_key_sweep_reads_back_with_its_own_dimension(tmp_path):
    """A sweep of one dimension is stored along it: the complete store is the Dataset of
    the sweep (bar the status counts and the store's own attributes)."""
    path = tmp_path / "rho.nc"
    spec = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 20)})  # chunks 0, 1, 2
    with pytest.raises(Stop):  # stopped after the last chunk is stored, before assembly
        run_sweep(Lorenz(), spec, output=path, on_chunk=_interrupt_after(2), **KW)
    stored = xr.open_zarr(f"{path}.zarr").load()
    memory = ds.sweep(Lorenz(), spec, **KW)
    assert stored.attrs.pop("difsim_output") == "sweep store"
    counts = [k for k in memory.attrs if k.startswith("n_")]
    extra = [k for k in stored.attrs if k.startswith("difsim_store_")]
    assert sorted(extra) == ["difsim_store_chunk_size", "difsim_store_format",
                             "difsim_store_hash", "difsim_store_points",
                             "difsim_store_settings"]  # fmt: skip
    flags = stored.status.attrs.pop("flag_values"), memory.status.attrs["flag_values"]
    assert list(flags[0]) == [-1, *flags[1]]  # the store's status also has -1, not computed
    stored.status.attrs["flag_values"] = flags[1]
    stored.status.attrs["flag_meanings"] = stored.status.flag_meanings.removeprefix("not_computed ")
    stored.attrs = {k: v for k, v in stored.attrs.items() if k not in extra}
    expected = memory.copy()
    expected.attrs = {k: v for k, v in memory.attrs.items() if k not in counts}
    del expected.attrs["difsim_output"]
    xr.testing.assert_identical(stored, expected)
    _, report = run_sweep(Lorenz(), spec, output=path, **KW)
    assert report.computed == () and report.reused == 3 and not Path(f"{path}.zarr").exists()
    xr.testing.assert_identical(_load(path), memory)


def test_a_store_location_difsim_did_not_create_is_never_replaced(tmp_path):
    path = tmp_path / "sweep.nc"
    folder = Path(f"{path}.zarr")
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(SweepOutputError, match="is not a difsim sweep store"):
            _run(path, overwrite=overwrite)
    assert (folder / "notes.txt").read_text() == "mine"
    # Another program's zarr store is not replaced either.
    other = tmp_path / "other.zarr"
    xr.Dataset({"a": ("x", [1.0, 2.0])}).to_zarr(other, zarr_format=3, consolidated=False)
    with pytest.raises(SweepOutputError, match="never deletes it, not even with overwrite"):
        _run(path, store=other, overwrite=True)
    assert xr.open_zarr(other, consolidated=False).a.values.tolist() == [1.0, 2.0]
    # Nor a file, or the output itself.
    with pytest.raises(SweepOutputError, match="is not a folder"):
        _run(path, store=tmp_path / "other.zarr" / "zarr.json")
    with pytest.raises(SweepOutputError, match="must not be its output file"):
        _run(path, store=path)
    # What zarr leaves when killed before the store's first metadata is replaced.
    shutil.rmtree(folder)
    (folder / "x").mkdir(parents=True)
    (folder / "x" / "zarr.json.0123abcd.partial").write_text("{")
    _, report = _run(path)
    assert report.computed == (0, 1, 2, 3, 4) and not folder.exists()


def test_a_config_names_the_store(tmp_path):
    """`[output] store` reaches the sweep: a location holding someone else's folder is
    refused, by name, before any work."""
    store = tmp_path / "elsewhere.zarr"
    store.mkdir()
    (store / "notes.txt").write_text("mine")
    config = {
        "model": {"name": "lorenz"},
        "time": {"t0": 0.0, "t1": 1.0, "save": "final"},
        "sweep": {"rho": [1.0, 2.0]},
        "output": {"path": str(tmp_path / "x.nc"), "store": str(store), "plot": False},
    }
    with pytest.raises(SweepOutputError, match=f"{store} .*is not a difsim sweep store"):
        ds.run_config(config)
    assert (store / "notes.txt").read_text() == "mine" and not (tmp_path / "x.nc").exists()
