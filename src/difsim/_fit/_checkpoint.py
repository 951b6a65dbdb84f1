"""Fit checkpoints: the loop state saved after every block of steps, so a fit can resume.

A checkpoint is one file: a magic line with the format's version, a line with the SHA-256
checksum of everything after it, a JSON header naming the fit it belongs to (and its
history's shape), then the history of every step so far and the loop state, both written by
equinox's `tree_serialise_leaves` (read back against templates of the same shapes and
dtypes, so a mismatch is an error, never a silent cast). It is written atomically, so an
interrupted write leaves the last one; a file damaged afterwards (a flipped byte, a cut
copy) fails its checksum and is refused, naming it, never resumed from. A checkpoint path is
checked before any work ([`check_checkpoint`][]): only a difsim checkpoint is ever read or
replaced there, never another file.
"""

import hashlib
import io
import json
import os
import re
import stat
from pathlib import Path

import equinox as eqx
import numpy as np
from jaxtyping import PyTree

from difsim._io import OutputError, atomic_write_stream, check_folder

_PREFIX = b"DIFSIM-FIT-CHECKPOINT "
# Version 4: a SHA-256 checksum line after the magic line. Version 3 had none (history
# and loop state in one equinox leaf serialisation, the history's shape in the header);
# version 2 wrote the history as a separate `.npy` block; version 1 held loop-private
# outcome codes rather than a `Status`.
_VERSION = 4
_MAGIC = _PREFIX + b"%d\n" % _VERSION
_CHECKSUM = b"sha256 "
_VERSION_LINE = re.compile(re.escape(_PREFIX) + rb"(\d{1,9})\n")


def _version(magic: bytes) -> int | None:
    """The format version a magic line names (`None`: not a difsim checkpoint's)."""
    match = _VERSION_LINE.fullmatch(magic)
    return int(match[1]) if match else None


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
        version = _version(f.readline(64))
    if version is None:
        raise OutputError(
            f"checkpoint {path} exists and is not a difsim fit checkpoint; difsim never "
            "replaces it: choose another path"
        )
    if version > _VERSION:
        raise OutputError(
            f"checkpoint {path} was written by a newer difsim (format {version}, this one "
            f"reads {_VERSION}); upgrade difsim or delete {path}"
        )
    return path


def _same(path: Path, other) -> bool:
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def save_checkpoint(
    path: Path, header: dict, history: np.ndarray, carry: PyTree, state: dict | None = None
) -> None:
    """Write `header` (JSON-ready: the fit's identity), `history` (`(steps, ..., 3)`) and
    the loop state `carry` to `path` atomically (temp file, fsync, rename), with the
    SHA-256 checksum of the header and payload. `state`: JSON-ready host-side state
    (a monitor's record), kept beside the header but not part of the fit's identity."""
    history = np.ascontiguousarray(history)
    body = io.BytesIO()
    layout = {"history_shape": list(history.shape), "history_dtype": history.dtype.str}
    if state is not None:
        layout["state"] = state
    body.write(json.dumps({**header, **layout}).encode() + b"\n")
    eqx.tree_serialise_leaves(body, (history, carry))
    payload = body.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()

    def write(f) -> None:
        f.write(_MAGIC + _CHECKSUM + digest + b"\n" + payload)

    atomic_write_stream(path, write)


def load_checkpoint(path: Path, header: dict, like: PyTree, *, with_state: bool = False):
    """History and loop state (shaped like `like`) from `path`; with `with_state`, also
    the host-side `state` saved with them (`None` if none was).

    **Raises:** `ValueError` naming `path` if it is damaged (its checksum does not match),
    belongs to a different fit (another `header`), was written by another difsim (another
    format version), or is not a difsim checkpoint.
    """
    check_checkpoint(path)
    with open(path, "rb") as f:
        magic, checksum, payload = f.readline(), f.readline(), f.read()
    version = _version(magic)
    if version != _VERSION:
        raise ValueError(
            f"checkpoint {str(path)!r} was written by an older difsim (format version "
            f"{version}, this difsim reads {_VERSION}); delete it (the fit then starts "
            "afresh) or use another path"
        )
    digest = hashlib.sha256(payload).hexdigest().encode()
    if checksum != _CHECKSUM + digest + b"\n":
        raise ValueError(
            f"checkpoint {str(path)!r} is corrupt: its SHA-256 checksum does not match its "
            "contents (a damaged or truncated file); delete it (the fit then starts afresh) "
            "or use another path"
        )
    f = io.BytesIO(payload)
    try:
        saved = json.loads(f.readline())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(
            f"checkpoint {str(path)!r} has a broken header ({e}); delete it or use another path"
        ) from None
    _check_header(path, saved, header)
    # Templates of what was written: equinox checks each leaf's shape and dtype.
    template = np.zeros(saved["history_shape"], np.dtype(saved["history_dtype"]))
    try:
        history, carry = eqx.tree_deserialise_leaves(f, (template, like))
    except (RuntimeError, ValueError, EOFError, OSError) as e:
        # equinox's "changed shape/dtype": not this fit's state.
        raise ValueError(
            f"checkpoint {str(path)!r} does not hold this fit's loop state ({e}); delete "
            "it or use another path"
        ) from None
    return (history, carry, saved.get("state")) if with_state else (history, carry)


def _check_header(path: Path, saved, header: dict) -> None:
    """The saved header names this fit (and says how its history was written)."""
    if not isinstance(saved, dict) or not {"history_shape", "history_dtype"} <= set(saved):
        raise ValueError(
            f"checkpoint {str(path)!r} has a broken header (not a fit checkpoint's); delete "
            "it or use another path"
        )
    for key, value in header.items():
        if key == "problem" and saved.get(key) != value:
            raise ValueError(
                f"checkpoint {str(path)!r} belongs to a different fit: the data, the model's "
                "parameters or initial state, or the model's code changed since it was "
                "written; delete it (the fit then starts afresh) or use another path"
            )
        if saved.get(key) != value:
            raise ValueError(
                f"checkpoint {str(path)!r} belongs to a different fit ({key}: "
                f"{saved.get(key)!r} there, {value!r} now); delete it or use another path"
            )
