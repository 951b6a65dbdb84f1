"""One run per output: a lock file beside each output while a run writes it.

`runs/x.nc` is locked through `runs/x.nc.lock`, which holds the holder's pid, host and
start time (JSON) and an exclusive `flock` on the open file. The kernel drops the `flock`
when its process dies, even by `kill -9`, so a lock file whose `flock` is free is stale
(the run that left it is gone): the next run takes it over, saying whose it was. A lock held
by a live run makes [`output_lock`][] fail at once with [`OutputLockedError`][], naming the
holder. POSIX only (`fcntl`); on a filesystem without `flock` support the lock file still
names its holder, and a holder that is dead on this host counts as stale.
"""

import contextlib
import datetime
import errno
import fcntl
import json
import logging
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

from difsim._io._atomic import remove_leftovers
from difsim._io._ownership import OutputError

logger = logging.getLogger("difsim")

_MARK = "difsim-lock"


class OutputLockedError(OutputError):
    """Another run is writing the same output."""


def lock_path(output: str | os.PathLike) -> Path:
    """`runs/x.nc` → `runs/x.nc.lock`."""
    output = Path(output)
    return output.with_name(output.name + ".lock")


@contextlib.contextmanager
def output_lock(output: str | os.PathLike | None) -> Iterator[Path | None]:
    """Hold the lock of `output` (nothing for `None`) for the `with` block; the lock file is
    removed on leaving it. Once the lock is taken, temporary files of `output` that an
    interrupted write left are removed (`_atomic.remove_leftovers`).

    **Raises:** [`OutputLockedError`][] if a live run holds it, [`OutputError`][] if the lock
    path is taken by something that is not a difsim lock file.
    """
    if output is None:
        yield None
        return
    path = lock_path(output)
    fd = _acquire(path)
    try:
        # Held: no other run writes `output`, so its temporary files are a killed write's.
        remove_leftovers(output)
        yield path
    finally:
        with contextlib.suppress(OSError):
            path.unlink()  # while still holding the flock: see `_acquire`
        os.close(fd)


def _acquire(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(10):
        fd = _open(path)
        try:
            previous = _read(fd)
            if not _flock(fd, previous, path):
                raise OutputLockedError(_held_message(path, previous))
            # The last holder may have removed the file between our open and our flock:
            # then we hold a lock on a name that no longer exists. Try again.
            if not _same_file(fd, path):
                os.close(fd)
                continue
            if previous:
                logger.warning("taking over the stale lock %s (%s)", path, _holder(previous))
            _write(fd)
            return fd
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
    raise OutputLockedError(f"could not take the lock {path}: it keeps changing hands")


def _open(path: Path) -> int:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise OutputError(f"lock file {path}: cannot be opened ({e.strerror or e})") from e
    info = os.fstat(fd)
    text = os.pread(fd, 4096, 0)
    if not stat.S_ISREG(info.st_mode) or (text and _MARK.encode() not in text):
        os.close(fd)
        raise OutputError(
            f"lock file {path} exists and is not a difsim lock; move it away (difsim never "
            "replaces a file it did not write)"
        )
    return fd


def _flock(fd: int, previous: dict, path: Path) -> bool:
    """Take the `flock`; `False` if a live process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as e:  # no flock on this filesystem: judge by the recorded pid
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        return not previous or _dead_here(previous)


def _dead_here(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _read(fd: int) -> dict:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode())
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(fd: int) -> None:
    started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    text = json.dumps(
        {_MARK: 1, "pid": os.getpid(), "host": socket.gethostname(), "started": started}
    )
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode() + b"\n", 0)
    os.fsync(fd)


def _holder(holder: dict) -> str:
    return (
        f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, "
        f"started {holder.get('started', '?')}"
    )


def _held_message(path: Path, holder: dict) -> str:
    output = path.with_name(path.name.removesuffix(".lock"))
    return (
        f"{output} is being written by another run ({_holder(holder)}; lock {path}); wait "
        "for it to finish or choose another output path"
    )
