"""Bounded resources: what a run will need, estimated before any work, against what the
machine has.

A run whose saved values, sweep result or grid cannot fit used to start and then die with
an out-of-memory traceback (or hang while the system swapped). The estimates here are
cheap (counts times sizes, nothing allocated) and the checks refuse with a
[`ResourceError`][] naming the setting, the estimate and the limit.

Limits:

- **memory**: what this machine (or container) has available now: `MemAvailable` of
  `/proc/meminfo`, capped by a cgroup memory limit, or the physical memory where neither
  is readable. `DIFSIM_MEMORY_LIMIT` (e.g. `"64GiB"`) replaces it: a lower figure to keep
  a run inside a share of a node, a higher one where the detection is wrong.
- **disk**: the free space of the filesystem an output goes to (`shutil.disk_usage`).
  `DIFSIM_DISK_LIMIT` replaces it, e.g. to respect a quota that the filesystem does not
  report.

Nothing here imports JAX: a [`Grid`][] checks its size when a model class is defined.
"""

import math
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

MEMORY_ENV = "DIFSIM_MEMORY_LIMIT"
DISK_ENV = "DIFSIM_DISK_LIMIT"

_BYTE_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


class ResourceError(ValueError):
    """A run that would need more memory or disk than the machine has, refused before any
    work. `str(error)` names the setting, the estimate and the limit.

    **Attributes:** `key` (the setting to change: `"save"`, `"grid.shape"`,
    `"sweep.samples"`, ...), `needed` and `limit` (bytes; for the Monte Carlo paths of a
    sweep, key `"samples"`, counts of paths).

    **Example:**

    ```python
    import difsim as ds

    try:
        ds.simulate(ds.models.Lorenz(), t0=0.0, t1=1.0, save=10**12)  # 10¹² save times
    except ds.ResourceError as error:
        assert error.key == "save" and error.needed > error.limit
    else:
        raise AssertionError("a run larger than the machine must be refused")
    ```
    """

    def __init__(self, message: str, key: str | None = None, needed: int = 0, limit: int = 0):
        self.key, self.needed, self.limit = key, needed, limit
        super().__init__(message)


def parse_bytes(value: int | str, what: str = "memory_budget") -> int:
    """`"512MiB"` → 536870912; `"2GB"` → 2e9; an int is a number of bytes.

    **Raises:** `ValueError` starting with `what` unless `value` is a positive int or a
    positive, finite size with one of the units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return int(value)
    if hasattr(value, "dtype") and getattr(value, "ndim", 1) == 0 and value.dtype.kind in "iu":
        if int(value) > 0:  # a NumPy integer
            return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS:
            number = float(m.group(1))
            if 0 < number < math.inf:  # "1e400GB" is inf, not a size
                return max(1, int(number * _BYTE_UNITS[m.group(2).lower()]))
    raise ValueError(
        f"{what}: expected a positive number of bytes or a size like '512MiB', '2GB', "
        f"'1GiB' (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got {value!r}"
    )


def format_bytes(n: float) -> str:
    """`1536` → `"1.5 KiB"`, `2.4e11` → `"224 GiB"`: three significant digits."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n / 2**10:.3g} KiB" if n >= 2**10 else f"{int(n)} bytes"


# ---------------------------------------------------------------- limits
def memory_limit() -> tuple[int | None, str]:
    """`(bytes, where the figure comes from)` of the memory a run may use: the
    `DIFSIM_MEMORY_LIMIT` override, else the available memory (`None` if unknown)."""
    override = _override(MEMORY_ENV)
    if override is not None:
        return override, f"the limit set by {MEMORY_ENV}"
    available = _available_now()
    if available is not None:
        return available, "the memory available on this machine"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, "unknown"
    return total, "the physical memory of this machine"


def disk_limit(path: str | os.PathLike) -> tuple[int | None, str]:
    """`(bytes, where the figure comes from)` that may be written under `path` (a file or
    folder, existing or not): the `DIFSIM_DISK_LIMIT` override, else the free space of the
    filesystem of its nearest existing folder (`None` if unknown)."""
    override = _override(DISK_ENV)
    if override is not None:
        return override, f"the limit set by {DISK_ENV}"
    folder = Path(os.path.abspath(path))
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free, f"the free space on {folder}"
    except OSError:
        return None, "unknown"


def _override(name: str) -> int | None:
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        return parse_bytes(text, name)
    except ValueError as e:
        raise ResourceError(str(e), name) from None


# (monotonic time, bytes) of the last reading: a repeated sweep checks its memory on every
# call, and reading /proc and the cgroup files costs ~0.3 ms, a visible share of a small
# sweep; what is available does not move much within a second.
_last_reading: tuple[float, int | None] = (-math.inf, None)
READING_TTL_S = 1.0


def _available_now() -> int | None:
    """The memory available now (the smaller of /proc/meminfo's and the cgroup's), read at
    most once per `READING_TTL_S`."""
    global _last_reading
    now = time.monotonic()
    if now - _last_reading[0] > READING_TTL_S:
        figures = [n for n in (_meminfo_available(), _cgroup_available()) if n is not None]
        _last_reading = (now, min(figures) if figures else None)
    return _last_reading[1]


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_available() -> int | None:
    """What a cgroup memory limit (v2, then v1) leaves: the limit minus what is in use."""
    for limit, usage in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        (
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.usage_in_bytes",
        ),
    ):
        try:
            cap = Path(limit).read_text().strip()
            used = int(Path(usage).read_text().strip())
        except (OSError, ValueError):
            continue
        if cap.isdigit() and int(cap) < 2**60:  # v1 writes a huge number for "no limit"
            return max(0, int(cap) - used)
    return None


# ---------------------------------------------------------------- checks
def check_memory(needed: float, what: str | Callable[[], str], key: str, advice: str = "") -> None:
    """Raise [`ResourceError`][] when `needed` bytes (for `what`, set by `key`) exceed the
    memory limit. The message reads `key: what needs about N, more than L (source); advice`.
    `what` may be a function giving the text, called only for the message (a check on
    every repeat of a small sweep need not format it)."""
    _check(needed, memory_limit(), "memory", MEMORY_ENV, what, key, advice)


def check_disk(
    needed: float, path: str | os.PathLike, what: str, key: str, advice: str = ""
) -> None:
    """Raise [`ResourceError`][] when `needed` bytes written under `path` exceed the disk
    limit there."""
    _check(needed, disk_limit(path), "disk", DISK_ENV, what, key, advice)


def _check(needed, found, resource: str, env: str, what, key: str, advice: str) -> None:
    limit, source = found
    if limit is not None and needed > limit:
        what = what() if callable(what) else what
        raise ResourceError(
            f"{key}: {what} would need about {format_bytes(needed)} of {resource}, more than "
            f"{format_bytes(limit)} ({source})"
            + (f"; {advice}" if advice else "")
            + f" (set {env} to change the limit)",
            key,
            int(min(needed, 2**63)),
            limit,
        )


def check_grid_size(shape: tuple[int, ...]) -> None:
    """A grid whose one field (4 bytes a point: float32, the smallest a field takes)
    cannot fit in memory is refused: every model on it would fail."""
    cells = math.prod(shape)
    check_memory(
        4 * cells,
        f"one field on a grid of shape {shape} ({cells:,} points, float32)",
        "grid.shape",
        "use fewer points",
    )
