"""The one atomic writer (src/difsim/_io/_atomic.py): whole file or old file, never a torn one."""

import os

import numpy as np
import pytest

from difsim._io import atomic_write, atomic_write_stream, atomic_write_text
from difsim._io._atomic import temporary_path


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "sub" / "a.nc"
    atomic_write(target, lambda p: p.write_text("old"))
    assert target.read_text() == "old"

    def broken(p):
        p.write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, broken)
    assert target.read_text() == "old" and os.listdir(target.parent) == ["a.nc"]


def test_the_temporary_file_keeps_the_suffix_and_folder(tmp_path):
    # matplotlib and xarray choose the format from the suffix; rename needs one filesystem.
    tmp = temporary_path(tmp_path / "figure.png")
    assert tmp.parent == tmp_path and tmp.suffix == ".png" and tmp.name.startswith(".figure.")
    assert temporary_path(tmp_path / "figure.png") != tmp


def test_stream_and_text_writers_round_trip(tmp_path):
    values = np.arange(7.0) ** 2
    path = atomic_write_stream(tmp_path / "chunk.npz", lambda f: np.savez(f, x=values))
    with np.load(path) as data:
        np.testing.assert_array_equal(data["x"], values)
    text = atomic_write_text(tmp_path / "m.json", '{"a": 1}')
    assert text.read_text() == '{"a": 1}' and sorted(os.listdir(tmp_path)) == [
        "chunk.npz",
        "m.json",
    ]


def test_data_reaches_the_disk_before_the_rename(tmp_path, monkeypatch):
    order = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (order.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "replace", lambda a, b: (order.append("replace"), real_replace(a, b))[1]
    )
    atomic_write_text(tmp_path / "x.txt", "data")
    # the file's fsync comes before the rename; the folder's after it
    assert order[:2] == ["fsync", "replace"] and order.count("fsync") >= 1


def test_only_a_killed_writes_temporary_files_are_leftovers(tmp_path):
    from difsim._io import output_lock
    from difsim._io._atomic import leftover_temporaries

    target = tmp_path / "x.nc"
    ours = [temporary_path(target) for _ in range(2)]  # as a killed `atomic_write` leaves
    for tmp in ours:
        tmp.write_bytes(b"\x89HDF half-written")
    others = [
        tmp_path / ".x.1234abcd.tmp.png",  # another target's (x.png)
        tmp_path / ".xx.1234abcd.tmp.nc",  # xx.nc's
        tmp_path / ".x.1234ABCD.tmp.nc",  # not a name difsim makes
        tmp_path / ".x.12345.tmp.nc",
        tmp_path / "x.1234abcd.tmp.nc",
    ]
    for path in others:
        path.write_text("not ours")
    (tmp_path / ".x.0000beef.tmp.nc").symlink_to(others[0])  # a link: never followed
    (tmp_path / ".x.0000cafe.tmp.nc").mkdir()  # a folder: not a file difsim wrote
    assert leftover_temporaries(target) == sorted(ours)
    with output_lock(target):  # taking the lock removes them
        assert leftover_temporaries(target) == []
    assert all(p.exists() for p in others) and not any(p.exists() for p in ours)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [p.name for p in others] + [".x.0000beef.tmp.nc", ".x.0000cafe.tmp.nc"]
    )
