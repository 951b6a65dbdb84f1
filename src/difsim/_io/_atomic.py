"""One atomic writer for every file difsim writes: netCDF, PNG, GIF/MP4, JSON, fit
checkpoints and sweep chunks.

A reader, or a run killed part-way (even by `kill -9` or a power cut), sees either the old
file or the whole new one, never a torn one:

1. the content goes to a temporary file **in the target's folder** (a rename is atomic only
   within one filesystem), named `.<stem>.<random>.tmp<suffix>` so writers that pick the
   format from the suffix (matplotlib, xarray) still see it;
2. the temporary file is flushed to disk (`fsync`), so the rename cannot land before the data;
3. it is renamed over the target (`os.replace`), and the folder is fsynced so the rename
   itself survives a crash;
4. on any failure the temporary file is removed and the target is left as it was.

A run killed between 1 and 3 (`kill -9`, a power cut) cannot remove its temporary file.
The next run that locks the same output removes it ([`remove_leftovers`][], called by
`output_lock`): while the lock is held no other run writes that output, and only files
named as this module names the target's temporary files, regular files of this user, are
touched.
"""

import logging
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

logger = logging.getLogger("difsim")


def temporary_path(path: Path) -> Path:
    """A fresh temporary name next to `path`, keeping its suffix."""
    return path.with_name(f".{path.stem}.{uuid.uuid4().hex[:8]}.tmp{path.suffix}")


def leftover_temporaries(path: str | os.PathLike) -> list[Path]:
    """The temporary files of `path` that [`atomic_write`][] left (killed mid-write): named
    `.<stem>.<8 hex digits>.tmp<suffix>` beside it (as [`temporary_path`][] names them),
    regular files (not links) owned by this user."""
    path = Path(path)
    name = re.compile(rf"\.{re.escape(path.stem)}\.[0-9a-f]{{8}}\.tmp{re.escape(path.suffix)}")
    uid = os.getuid() if hasattr(os, "getuid") else None
    found = []
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if not name.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                    continue
                if uid is None or entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(Path(entry.path))
    except OSError:  # no folder yet, or not readable: nothing of ours there
        return []
    return sorted(found)


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Remove [`leftover_temporaries`][] of `path`, logging each; returns them. Call only
    while holding `path`'s lock (`output_lock`), so that no other run is writing them."""
    removed = []
    for tmp in leftover_temporaries(path):
        try:
            tmp.unlink()
        except OSError as e:
            logger.warning("could not remove %s, left by an interrupted write of %s (%s)",
                           tmp, path, e.strerror or e)  # fmt: skip
            continue
        logger.info("removed %s, the temporary file of an interrupted write of %s", tmp, path)
        removed.append(tmp)
    return removed


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], Any]) -> Path:
    """Call `write(tmp)` to fill a temporary file next to `path`, then put it in place.

    **Arguments:**

    - `path`: the file to create or replace; its folder is created if missing.
    - `write`: writes the whole content to the path it is given (e.g.
      `lambda p: dataset.to_netcdf(p)` or `lambda p: fig.savefig(p)`).

    **Returns:** `path` as a `Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_path(path)
    try:
        write(tmp)
        _fsync_file(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_folder(path.parent)
    return path


def atomic_write_stream(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Path:
    """[`atomic_write`][] for writers of an open binary file: `write(f)` fills `f`."""

    def to_file(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)

    return atomic_write(path, to_file)


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """[`atomic_write`][] of a UTF-8 text file (JSON, TOML, plain text)."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
