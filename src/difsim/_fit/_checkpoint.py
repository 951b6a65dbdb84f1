"""Fit checkpoints: the loop state saved after every block of steps, so a fit can resume.

A checkpoint is one file: a magic line, a JSON header naming the fit it belongs to, the
history of every step so far (a `.npy` array) and the loop state (equinox's leaf
serialisation). It is written atomically, so an interrupted write leaves the last one.
A checkpoint path is checked before any work ([`check_checkpoint`][]): only a difsim
checkpoint is ever read or replaced there, never another file.
"""

import json
import os
import stat
from pathlib import Path

import equinox as eqx
import numpy as np
from jaxtyping import PyTree

from difsim._io import OutputError, atomic_write_stream, check_folder

# Version 2: the loop state holds a `Status` code (version 1 held loop-private codes).
_MAGIC = b"DIFSIM-FIT-CHECKPOINT 2\n"
_OLD_MAGIC = b"DIFSIM-FIT-CHECKPOINT 1\n"


def check_checkpoint(path: str | os.PathLike, reads=()) -> Path:
    """Check a checkpoint path before any work: its folder is writable (or can be made), and
    if it exists it is a regular file holding a difsim fit checkpoint, not one of `reads`
    (files the run reads).

    **Raises:** `OutputError` (a `ValueError`) naming the path and the problem.
    """
    path = Path(path)
    check_folder(path.parent, name=f"checkpoint {path}")
    try:
        info = path.lstat()
    except FileNotFoundError:
        return path
    except OSError as e:
        raise OutputError(f"checkpoint {path}: cannot be used ({e.strerror})") from e
    if not stat.S_ISREG(info.st_mode):
        raise OutputError(
            f"checkpoint {path} is not a regular file (a directory, link, device, ...); "
            "choose another path"
        )
    if any(_same(path, other) for other in reads):
        raise OutputError(f"checkpoint {path} is a file this run reads; choose another path")
    with open(path, "rb") as f:
        magic = f.readline(64)
    if magic not in (_MAGIC, _OLD_MAGIC):
        raise OutputError(
            f"checkpoint {path} exists and is not a difsim fit checkpoint; difsim never "
            "replaces it: choose another path"
        )
    return path


def _same(path: Path, other) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def save_checkpoint(path: Path, header: dict, history: np.ndarray, carry: PyTree) -> None:
    """Write `header` (JSON-ready), `history` and the loop state `carry` to `path`
    atomically (temp file, fsync, rename)."""

    def write(f) -> None:
        f.write(_MAGIC)
        f.write(json.dumps(header).encode() + b"\n")
        np.lib.format.write_array(f, np.ascontiguousarray(history), allow_pickle=False)
        eqx.tree_serialise_leaves(f, carry)

    atomic_write_stream(path, write)


def load_checkpoint(path: Path, header: dict, like: PyTree) -> tuple[np.ndarray, PyTree]:
    """History and loop state (shaped like `like`) from `path`; raises if it belongs to a
    different fit (another `header`) or is not a current checkpoint."""
    check_checkpoint(path)
    with open(path, "rb") as f:
        magic = f.readline()
        if magic == _OLD_MAGIC:
            raise ValueError(
                f"checkpoint {str(path)!r} was written by an older difsim; delete it (the fit "
                "then starts afresh) or use another path"
            )
        if magic != _MAGIC:
            raise ValueError(f"checkpoint {str(path)!r} is not a difsim fit checkpoint")
        saved = json.loads(f.readline())
        for key, value in header.items():
            if saved.get(key) != value:
                raise ValueError(
                    f"checkpoint {str(path)!r} belongs to a different fit ({key}: "
                    f"{saved.get(key)!r} there, {value!r} now); delete it or use another path"
                )
        history = np.lib.format.read_array(f, allow_pickle=False)
        carry = eqx.tree_deserialise_leaves(f, like)
    return history, carry
