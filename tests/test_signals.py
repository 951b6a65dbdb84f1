"""SIGTERM (a batch scheduler's stop) is handled as Ctrl-C by the `difsim` command
(`difsim._app._signals`). Issue 27, point 6: it used to end `difsim run` without a message
and leave the output's lock file behind."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from difsim._app._cli import main
from difsim._app._signals import Terminated, sigterm_as_interrupt

CONFIG = """\
[model]
name = "lorenz"
[time]
t0 = 0.0
t1 = 1.0
save = "final"
[solver]
rtol = 1e-8
atol = 1e-8
dtype = "float64"
[sweep]
rho = { linspace = [0.0, 28.0, 96] }
chunk_size = 8
[output]
path = "x.nc"
plot = false
"""
# `difsim run` as the console script runs it, each stored chunk slowed down so that the
# signal lands mid-sweep.
WORKER = """\
import sys, time
from difsim._sweep import _store
write = _store.ChunkStore.write
def slow(self, *args):
    write(self, *args)
    time.sleep(0.3)
_store.ChunkStore.write = slow
from difsim._app import console_main
sys.argv = ["difsim", "run", "sweep.toml", "--no-progress"]
console_main()
"""


def _done(store: Path) -> int:
    try:
        sums = zarr.open_array(store, path="difsim_store/chunk_sha256", mode="r")[...]
    except Exception:  # not created yet
        return 0
    return int(np.count_nonzero(sums.any(axis=1)))


def _values(path: Path) -> dict[str, np.ndarray]:
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return {k: f[k].values.copy() for k in f.data_vars} | {"hash": f.attrs["sweep_hash"]}


def test_sigterm_stops_difsim_run_like_ctrl_c_and_the_rerun_resumes(tmp_path, monkeypatch):
    ref, run = tmp_path / "reference", tmp_path / "run"
    for folder in (ref, run):
        folder.mkdir()
        (folder / "sweep.toml").write_text(CONFIG)
    (run / "worker.py").write_text(WORKER)
    proc = subprocess.Popen([sys.executable, "worker.py"], cwd=run, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while _done(run / "x.nc.zarr") < 2:
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "the sweep subprocess made no progress"
            time.sleep(0.05)
        assert (run / "x.nc.lock").exists()  # held while it runs
        os.kill(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 143  # 128 + SIGTERM, as the shell reports it
    stored = _done(run / "x.nc.zarr")
    assert 2 <= stored < 12
    assert err.strip().splitlines()[-1] == (
        f"difsim: interrupted (SIGTERM): {stored} of 12 chunks stored; run the same command "
        "to resume"
    )
    assert "Traceback" not in err
    assert not (run / "x.nc.lock").exists() and not (run / "x.nc").exists()
    # The same command resumes; the result is an uninterrupted run's.
    monkeypatch.chdir(run)
    assert main(["run", "sweep.toml", "--no-progress"]) == 0
    assert sorted(p.name for p in run.iterdir()) == ["sweep.toml", "worker.py", "x.nc"]
    monkeypatch.chdir(ref)
    assert main(["run", "sweep.toml", "--no-progress"]) == 0
    resumed, straight = _values(run / "x.nc"), _values(ref / "x.nc")
    assert resumed.keys() == straight.keys()
    for name in resumed:
        np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)


def test_only_the_command_installs_the_handler_and_puts_back_the_previous_one(capsys):
    # `import difsim` leaves SIGTERM alone (a library is a guest in its user's process).
    code = "import signal, difsim; print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.stdout.strip() == "True", done.stderr

    def mine(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        with sigterm_as_interrupt():
            with pytest.raises(Terminated):  # a KeyboardInterrupt, so Ctrl-C's cleanup runs
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)
            os.kill(os.getpid(), signal.SIGTERM)  # a second one, during the cleanup: ignored
            time.sleep(0.1)
        assert signal.getsignal(signal.SIGTERM) is mine
        assert main(["models"]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert issubclass(Terminated, KeyboardInterrupt)
    capsys.readouterr()
