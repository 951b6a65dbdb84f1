"""One run per output (src/difsim/_io/_lock.py): a second run fails at once naming the holder;
a lock left by a killed run is taken over."""

import errno
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys

import pytest

from difsim._io import OutputError, OutputLockedError, _lock as lock_module, lock_path, output_lock


def test_the_lock_file_names_its_holder_and_goes_away(tmp_path):
    output = tmp_path / "runs" / "x.nc"
    with output_lock(output) as path:
        assert path == tmp_path / "runs" / "x.nc.lock" == lock_path(output)
        holder = json.loads(path.read_text())
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        assert holder["started"][:2] == "20"  # an ISO date
        # A second holder (another open file, as another process would have) is refused.
        with pytest.raises(OutputLockedError) as info:
            with output_lock(output):
                pass
        message = str(info.value)
        assert f"pid {os.getpid()} on {socket.gethostname()}" in message
        assert str(output) in message and str(path) in message and "\n" not in message
    assert not path.exists()
    with output_lock(output):  # free again
        pass
    with output_lock(None) as nothing:
        assert nothing is None


def test_a_live_holder_in_another_process_then_its_stale_lock(tmp_path, caplog):
    output = tmp_path / "x.nc"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from difsim._io import output_lock\n"
            f"with output_lock({str(output)!r}):\n"
            "    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputLockedError, match=f"pid {holder.pid} on "):
            with output_lock(output):
                pass
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    finally:
        holder.kill()
        holder.wait()
    # The killed run's lock file is still there, naming it; its flock died with it.
    assert json.loads(lock_path(output).read_text())["pid"] == holder.pid
    with caplog.at_level(logging.WARNING, logger="difsim"):
        with output_lock(output) as path:
            assert json.loads(path.read_text())["pid"] == os.getpid()
    assert f"stale lock {lock_path(output)} (pid {holder.pid} on" in caplog.text


def test_a_file_that_is_not_a_lock_is_left_alone(tmp_path):
    output = tmp_path / "x.nc"
    lock_path(output).write_text("my notes")
    with pytest.raises(OutputError, match="is not a difsim lock"):
        with output_lock(output):
            pass
    assert lock_path(output).read_text() == "my notes"


def test_without_flock_a_dead_pid_on_this_host_is_stale(tmp_path, monkeypatch):
    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "no locks")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    output = tmp_path / "x.nc"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()  # fmt: skip
    for pid, host, free in [(int(dead), socket.gethostname(), True),
                            (os.getpid(), socket.gethostname(), False),
                            (int(dead), "another-host", False)]:  # fmt: skip
        record = {lock_module._MARK: 1, "pid": pid, "host": host, "started": "2026"}
        lock_path(output).write_text(json.dumps(record))
        if free:
            with output_lock(output) as path:
                assert json.loads(path.read_text())["pid"] == os.getpid()
        else:
            with pytest.raises(OutputLockedError, match=f"pid {pid} on {host}"):
                with output_lock(output):
                    pass
