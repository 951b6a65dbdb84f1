"""Each stored sweep chunk carries its sweep's identity and its index under a checksum
(src/difsim/_sweep/_store.py): a chunk's zarr objects copied over another chunk's, taken
from another sweep's store, or altered are computed again; a sweep's output is locked while
it runs."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

import difsim as ds
from difsim._io import OutputLockedError, output_lock
from difsim._sweep import OutputLayout, run_sweep
from difsim._sweep._store import ChunkStore
from difsim.models import Lorenz

SPEC = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})  # 38
KW = dict(t0=0.0, t1=1.0, rtol=1e-8, atol=1e-8, chunk_size=8, progress=False)  # 5 chunks
LAYOUT = OutputLayout(
    dims=("p",),
    shape=(6,),
    coords={"p": (("p",), np.arange(6.0), {})},
    variables={"x": ((), (), np.dtype(np.float64), {}), "status": ((), (), np.dtype(np.int32), {})},
    attrs={},
)
SUMS = Path("difsim_store", "chunk_sha256", "c")  # a chunk's checksum row: SUMS / str(i) / "0"


class Stop(Exception):
    pass


def _store(output, settings="a") -> ChunkStore:
    return ChunkStore(output, None, LAYOUT, {"sweep": settings, "chunk_size": "3"}, 3, "h")


def _chunk(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=3), "status": np.zeros(3, np.int32)}


def copy_chunk(source: Path, i: int, target: Path, j: int, names, checksum: bool) -> None:
    """Copy chunk `i`'s zarr objects of the variables `names` (and its checksum row) from
    the store `source` over chunk `j`'s in `target`, as a misplaced file copy would."""
    for name in names:
        shutil.copyfile(source / name / "c" / str(i), target / name / "c" / str(j))
    if checksum:
        (target / SUMS / str(j)).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / SUMS / str(i) / "0", target / SUMS / str(j) / "0")


def test_a_chunk_is_read_back_only_where_and_for_whom_it_was_written(tmp_path):
    store = _store(tmp_path / "s.nc")
    assert store.prepare(resume=True, overwrite=False) == set()
    store.write(0, _chunk(0))
    store.write(1, _chunk(1))
    assert store.marked() == {0, 1}
    np.testing.assert_array_equal(store.read(1)["x"], _chunk(1)["x"])
    root = tmp_path / "s.nc.zarr"
    # Chunk 0's data in chunk 1's place (same sweep, same shapes, wrong index): chunk 1's
    # checksum no longer matches; nor does chunk 0's own row, copied along with it.
    copy_chunk(root, 0, root, 1, ["x", "status"], checksum=False)
    assert store.read(1) is None and store.read(0) is not None
    copy_chunk(root, 0, root, 1, [], checksum=True)
    assert store.read(1) is None and store.read(0) is not None
    # Another sweep's chunk 0 (other settings, so another hash), same values: not accepted.
    other = _store(tmp_path / "b.nc", settings="b")
    other.prepare(resume=True, overwrite=False)
    other.write(0, _chunk(0))
    copy_chunk(tmp_path / "b.nc.zarr", 0, root, 0, ["x", "status"], checksum=True)
    assert other.read(0) is not None and store.read(0) is None
    # Values changed but the identity kept: the checksum no longer matches.
    store.write(0, _chunk(0))
    assert store.read(0) is not None
    zarr.open_array(root, path="x", mode="r+")[1] = _chunk(0)["x"][1] + 1.0
    assert store.read(0) is None
    # What does not read back as this sweep's is marked not done (status -1) to compute.
    store.discard(0)
    assert store.marked() == {1} and (zarr.open_array(root, path="status")[:3] == -1).all()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "sweep.nc"
    run_sweep(Lorenz(), SPEC, output=path, **KW)
    return path


@pytest.mark.parametrize("checksum", [True, False], ids=["with-checksum", "data-only"])
def test_a_chunk_copied_over_another_is_recomputed(tmp_path, reference, checksum):
    path = tmp_path / "sweep.nc"

    def stop(i):
        if i == 1:
            raise Stop

    with pytest.raises(Stop):
        run_sweep(Lorenz(), SPEC, output=path, on_chunk=stop, **KW)
    root = Path(f"{path}.zarr")
    copy_chunk(root, 0, root, 1, ["x", "y", "z", "status", "num_steps"], checksum)
    _, report = run_sweep(Lorenz(), SPEC, output=path, **KW)
    assert report.reused == 1 and report.computed == (1, 2, 3, 4)
    assert path.read_bytes() == reference.read_bytes()  # as if never interrupted


def test_a_sweep_whose_output_is_locked_fails_before_any_work(tmp_path):
    path = tmp_path / "sweep.nc"
    computed = []
    with output_lock(path):
        with pytest.raises(OutputLockedError, match="being written by another run"):
            run_sweep(Lorenz(), SPEC, output=path, on_chunk=computed.append, **KW)
    assert computed == [] and not path.exists() and not Path(f"{path}.zarr").exists()
