"""Each stored sweep chunk carries its sweep's identity and its index under a checksum
(src/difsim/_sweep/_store.py): a chunk file copied over another, taken from another sweep, or
altered is computed again; a sweep's output is locked while it runs."""

import shutil
from pathlib import Path

import numpy as np
import pytest

import difsim as ds
from difsim._io import OutputLockedError, output_lock
from difsim._sweep import run_sweep
from difsim._sweep._store import ChunkStore
from difsim.models import Lorenz

SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})  # 38
KW = dict(t0=0.0, t1=1.0, rtol=1e-8, atol=1e-8, chunk_size=8, progress=False)  # 5 chunks
EXPECTED = {"x": ((), np.float64), "status": ((), np.int32)}


class Stop(Exception):
    pass


def _store(output, settings="a") -> ChunkStore:
    return ChunkStore(output, {"sweep": settings, "chunk_size": "3"}, (6, 3), EXPECTED, "h")


def _chunk(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=3), "status": np.zeros(3, np.int32)}


def test_a_chunk_is_read_back_only_where_and_for_whom_it_was_written(tmp_path):
    store = _store(tmp_path / "s.nc")
    assert store.prepare(resume=True, overwrite=False) == set()
    store.write(0, _chunk(0))
    store.write(1, _chunk(1))
    np.testing.assert_array_equal(store.read(1, 3)["x"], _chunk(1)["x"])
    chunk0, chunk1 = store._chunk_path(0), store._chunk_path(1)
    # Chunk 0's file in chunk 1's place: same sweep, same shapes, wrong index.
    shutil.copyfile(chunk0, chunk1)
    assert store.read(1, 3) is None and store.read(0, 3) is not None
    # Another sweep (other settings, so another hash) does not accept this sweep's chunk.
    assert _store(tmp_path / "s.nc", settings="b").read(0, 3) is None
    # Values changed but the identity kept: the checksum no longer matches.
    with np.load(chunk0) as data:
        tampered = {k: data[k] for k in data.files}
    tampered["x"] = tampered["x"] + 1.0
    np.savez(chunk0, **tampered)
    assert store.read(0, 3) is None


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "sweep.nc"
    run_sweep(Lorenz(), SPEC, output=path, **KW)
    return path


def test_a_chunk_copied_over_another_is_recomputed(tmp_path, reference):
    path = tmp_path / "sweep.nc"

    def stop(i):
        if i == 1:
            raise Stop

    with pytest.raises(Stop):
        run_sweep(Lorenz(), SPEC, output=path, on_chunk=stop, **KW)
    chunks = Path(f"{path}.chunks")
    shutil.copyfile(chunks / "chunk_0000000.npz", chunks / "chunk_0000001.npz")
    _, report = run_sweep(Lorenz(), SPEC, output=path, **KW)
    assert report.reused == 1 and report.computed == (1, 2, 3, 4)
    assert path.read_bytes() == reference.read_bytes()  # as if never interrupted


def test_a_sweep_whose_output_is_locked_fails_before_any_work(tmp_path):
    path = tmp_path / "sweep.nc"
    computed = []
    with output_lock(path):
        with pytest.raises(OutputLockedError, match="being written by another run"):
            run_sweep(Lorenz(), SPEC, output=path, on_chunk=computed.append, **KW)
    assert computed == [] and not path.exists() and not Path(f"{path}.chunks").exists()
