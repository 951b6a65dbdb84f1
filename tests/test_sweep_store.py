"""Sweep outputs on disk: streamed netCDF, resume after an interruption (a raised error or
`kill -9`), no recomputation of finished chunks, refusal to mix different sweeps."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._sweep import OutputLayout, SweepOutputError, run_sweep
from difsim._sweep._store import _slabs, write_netcdf
from difsim.models import Lorenz

ROOT = Path(__file__).resolve().parents[1]
SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})  # 38
KW = dict(t0=0.0, t1=1.0, rtol=1e-8, atol=1e-8, chunk_size=8, progress=False)  # 5 chunks


class Stop(Exception):
    pass


def _run(path, **kw):
    return run_sweep(Lorenz(), SPEC, output=path, **{**KW, **kw})


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
    assert not Path(f"{path}.chunks").exists()  # cleaned up
    assert [p.name for p in path.parent.iterdir()] == ["sweep.nc"]  # no temporary files


def test_resume_after_an_error_skips_finished_chunks(tmp_path, reference):
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(2))
    chunks = Path(f"{path}.chunks")
    assert not path.exists() and sorted(p.name for p in chunks.glob("chunk_*.npz")) == [
        f"chunk_{i:07d}.npz" for i in range(3)
    ]
    dataset, report = _run(path)
    assert report.reused == 3 and report.computed == (3, 4)  # finished chunks not recomputed
    assert path.read_bytes() == reference[0].read_bytes()  # the same file, byte for byte
    assert not chunks.exists()
    # Running it again finds the result complete: nothing is computed.
    again, report = _run(path)
    assert report.computed == () and report.status_counts == {0: 38}
    xr.testing.assert_identical(again.load(), _load(reference[0]))


def test_resume_after_kill_9(tmp_path, reference):
    path = tmp_path / "sweep.nc"
    script = tmp_path / "worker.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import time, jax
            jax.config.update("jax_enable_x64", True)
            import numpy as np, difsim as ds
            from difsim._sweep import run_sweep
            slow = lambda i: time.sleep(0.5)  # slow enough to be killed
            spec = ds.GridSweep({{"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]}})
            run_sweep(ds.models.Lorenz(), spec, output={str(path)!r}, on_chunk=slow, **{KW!r})
            """
        )
    )
    proc = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stderr=subprocess.PIPE)
    chunks = Path(f"{path}.chunks")
    deadline = time.monotonic() + 120
    try:
        while len(list(chunks.glob("chunk_*.npz"))) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the sweep subprocess made no progress"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = len(list(chunks.glob("chunk_*.npz")))
    assert 2 <= done < 5 and not path.exists()
    dataset, report = _run(path)
    assert report.reused == done and len(report.computed) == 5 - done
    assert path.read_bytes() == reference[0].read_bytes()


def test_a_changed_sweep_is_refused_then_overwritten(tmp_path):
    path = tmp_path / "sweep.nc"
    with pytest.raises(Stop):
        _run(path, on_chunk=_interrupt_after(0))
    with pytest.raises(SweepOutputError) as info:
        _run(path, rtol=1e-7)
    message = str(info.value)
    for fragment in [f"{path}.chunks", "different sweep", "solver:", "rtol=1e-08", "rtol=1e-07",
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
    chunk = Path(f"{path}.chunks") / "chunk_0000001.npz"
    chunk.write_bytes(chunk.read_bytes()[:100])  # as if the machine crashed mid-write
    _, report = _run(path)
    assert report.reused == 1 and report.computed == (1, 2, 3, 4)
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
