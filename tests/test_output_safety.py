"""Outputs never replace a file difsim does not own, and output problems surface before any
work (src/difsim/_io/_ownership.py, src/difsim/_app/_run.py): issue 14, points 1-2, and seeds."""

import os
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from matplotlib.figure import Figure

import difsim as ds
from difsim._app import _run
from difsim._app._cli import main
from difsim._config import ConfigError, load_config
from difsim._io import OutputError, check_output, output_lock, png_metadata, recorded

ROOT = Path(__file__).resolve().parents[1]
DECAY = """
[model]
name = "exponential_decay"
[model.parameters]
k = {k}
[time]
t1 = 1.0
save = 3
[solver]
rtol = 1e-10
atol = 1e-10
dtype = "float64"
[output]
path = "{path}"
plot = false
"""
FIT = """
[model]
name = "sir"
[model.state]
S = 762.0
I = 1.0
R = 0.0
[fit]
data = "{data}"
t0 = 0.0
[fit.free]
beta = "positive"
[fit.observe]
confined_to_bed = "I"
[output]
path = "{path}"
"""


def _difsim_file(path: Path, kind: str, run: str = "run-a") -> None:
    attrs = {"difsim_output": kind, "difsim_run": run}
    xr.Dataset({"a": ("x", [1.0])}, attrs=attrs).to_netcdf(path, engine="h5netcdf")


# ---------------------------------------------------------------- the ownership check


def test_foreign_files_are_never_replaced_even_with_overwrite(tmp_path):
    text, foreign = tmp_path / "notes.nc", tmp_path / "data.nc"
    text.write_text("my notes")
    xr.Dataset({"a": ("x", [1.0])}).to_netcdf(foreign, engine="h5netcdf")
    other_kind = tmp_path / "sweep.nc"
    _difsim_file(other_kind, "sweep")
    os.mkfifo(fifo := tmp_path / "pipe.nc")
    (link := tmp_path / "link.nc").symlink_to(other_kind)
    (folder := tmp_path / "folder.nc").mkdir()
    cases = [(text, "a file difsim did not write"), (foreign, "a file difsim did not write"),
             (other_kind, "a difsim sweep output"), (fifo, "not a regular file"),
             (link, "not a regular file"), (folder, "is a directory")]  # fmt: skip
    for path, reason in cases:
        with pytest.raises(OutputError, match=reason):
            check_output(path, "simulation", overwrite=True)
    assert text.read_text() == "my notes" and stat.S_ISFIFO(fifo.lstat().st_mode)
    # A file the run reads is refused whatever it is (here a difsim output of the kind).
    _difsim_file(own := tmp_path / "own.nc", "simulation")
    with pytest.raises(OutputError, match="is a file this run reads"):
        check_output(
            own, "simulation", overwrite=True, reads=[tmp_path / ".." / own.parent.name / "own.nc"]
        )


def test_an_earlier_output_of_the_kind_needs_overwrite_unless_the_same_run_wrote_it(tmp_path):
    path = tmp_path / "out.nc"
    assert check_output(path, "fit") == path  # nothing there: fine
    _difsim_file(path, "fit", run="run-a")
    assert recorded(path) == ("fit", "run-a")
    with pytest.raises(OutputError, match="earlier difsim fit output.*overwrite=True"):
        check_output(path, "fit", run="run-b")
    check_output(path, "fit", run="run-a")  # the same run: its own output
    check_output(path, "fit", run="run-b", overwrite=True)


def test_suffixes_folders_and_png_marks(tmp_path, monkeypatch):
    for name in ["out.csv", "out", "out.nc.txt"]:
        with pytest.raises(OutputError, match="must end in .nc or .nc4"):
            check_output(tmp_path / name, "simulation")
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="is not a directory"):
        check_output(tmp_path / "file" / "sub" / "out.nc", "simulation")
    check_output(tmp_path / "new" / "deeper" / "out.nc", "simulation")  # created when written
    assert not (tmp_path / "new").exists()

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m:  # as an unwritable folder answers (root is never refused)
        m.setattr(tempfile, "TemporaryFile", refuse)
        with pytest.raises(OutputError, match=f"its folder {tmp_path} is not writable"):
            check_output(tmp_path / "out.nc", "simulation")
    fig = Figure()
    fig.subplots().plot([0, 1])
    fig.savefig(marked := tmp_path / "a.png", metadata=png_metadata("run-a"))
    fig.savefig(plain := tmp_path / "b.png")
    assert recorded(marked) == ("plot", "run-a") and recorded(plain) == (None, None)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_refused(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(OutputError, match="is not writable"):
            check_output(folder / "out.nc", "simulation")
    finally:
        folder.chmod(0o755)


# ---------------------------------------------------------------- the command line


@pytest.fixture
def no_solve(monkeypatch):
    """Fail the test if a solve or a fit starts: the checks must come first."""

    def forbidden(*args, **kwargs):
        raise AssertionError("a solve started before the outputs were checked")

    monkeypatch.setattr(_run, "simulate", forbidden)
    monkeypatch.setattr(_run, "fit", forbidden)


def _config(tmp_path, path, k=1.0) -> str:
    (config := tmp_path / "decay.toml").write_text(DECAY.format(k=k, path=path))
    return str(config)


def test_bad_output_paths_exit_2_before_any_solve(tmp_path, monkeypatch, capsys, no_solve):
    monkeypatch.chdir(tmp_path)
    (notes := tmp_path / "notes.nc").write_text("my notes")
    (tmp_path / "folder.nc").mkdir()
    (tmp_path / "file").write_text("")
    cases = [(["-o", "notes.nc"], "not a difsim simulation output"),
             (["-o", "notes.nc", "--overwrite"], "never replaces it"),
             (["-o", "out.csv"], "output out.csv: a simulation output must end in .nc"),
             (["-o", "folder.nc"], "folder.nc is a directory"),
             (["-o", "file/out.nc"], "file is not a directory")]  # fmt: skip
    for args, fragment in cases:
        assert main(["run", _config(tmp_path, "x.nc"), *args]) == 2
        err = capsys.readouterr().err
        assert fragment in err and err.count("\n") == 1, (args, err)
    assert notes.read_text() == "my notes" and sorted(os.listdir(tmp_path)) == [
        "decay.toml", "file", "folder.nc", "notes.nc"]  # fmt: skip
    with pytest.raises(ConfigError, match=r"\[output\] path: must end in .nc"):
        load_config(_config(tmp_path, "x.csv"))
    with output_lock(tmp_path / "x.nc"):
        assert main(["run", _config(tmp_path, "x.nc")]) == 2
        assert f"another run (pid {os.getpid()}" in capsys.readouterr().err


def test_a_fit_never_writes_over_its_data(tmp_path, monkeypatch, capsys, no_solve):
    monkeypatch.chdir(tmp_path)
    shutil.copyfile(ROOT / "data" / "influenza.nc", data := tmp_path / "flu.nc")
    before = data.read_bytes()
    Path("fit.toml").write_text(FIT.format(data=data, path="flu.nc"))
    for extra in [[], ["--overwrite"]]:
        assert main(["run", "fit.toml", *extra]) == 2
        assert "flu.nc is a file this run reads" in capsys.readouterr().err
    assert data.read_bytes() == before


def test_reruns_replace_their_own_output_others_need_overwrite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "x.nc"
    assert main(["run", _config(tmp_path, "x.nc")]) == 0
    assert main(["run", _config(tmp_path, "x.nc")]) == 0  # the same config: its own output
    with xr.open_dataset(out) as f:
        np.testing.assert_allclose(f.y.values, np.exp(-np.array([0.0, 0.5, 1.0])), rtol=1e-8)
    before = out.read_bytes()
    capsys.readouterr()
    assert main(["run", _config(tmp_path, "x.nc", k=2.0)]) == 2
    assert "earlier difsim simulation output" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["run", _config(tmp_path, "x.nc", k=2.0), "--overwrite"]) == 0
    with xr.open_dataset(out) as f:
        np.testing.assert_allclose(f.y.values, np.exp(-2 * np.array([0.0, 0.5, 1.0])), rtol=1e-8)
        assert f.attrs["difsim_output"] == "simulation"
    assert not Path("x.nc.lock").exists()


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [2**63, 2**64 + 5, -1])
def test_seeds_outside_64_bits_are_config_errors(seed):
    sweep = {"model": {"name": "lorenz"}, "time": {"t1": 1.0},
             "sweep": {"kind": "random", "samples": 4, "seed": seed,
                       "rho": {"uniform": [0.0, 1.0]}}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"\[sweep\] seed: expected an integer from 0 to 2\*\*63"):
        load_config(sweep)
    with pytest.raises(ValueError, match="RandomSweep: seed must be"):
        ds.RandomSweep({"rho": ds.Uniform(0.0, 1.0)}, samples=4, seed=seed)
    sweep["sweep"]["seed"] = 2**63 - 1
    assert load_config(sweep).sweep.seed == 2**63 - 1
