"""Memory planning: how many trajectories one compiled call runs (docs/sweeps.md, chunking).

A sweep runs its points in chunks of one fixed size (one compilation), rounded up to a
multiple of the devices; the last chunk is padded. The size comes from the caller, or from a
memory budget and an estimate of one trajectory's memory ([`bytes_per_trajectory`][]).
"""

import dataclasses
import math

import jax
import numpy as np

from difsim._core import Model
from difsim._sweep._location import StoreLocation
from difsim._sweep._observables import Output
from difsim._sweep._store import ChunkStore

MIN_CHUNK = 1024  # trajectories: below this, per-call overhead starts to show
# The ensemble engine works through a chunk in cache-sized blocks itself: its chunks are
# large, balanced and few (each chunk costs host work: placing its points, fetching and
# storing its results), yet, when they are stored or shown as progress, small enough for a
# resume to lose little and for the bar to move. A sweep held in memory without a bar has
# neither need: its chunks are as large as the memory budget allows.
ENSEMBLE_CHUNK = 65536
TARGET_CHUNKS = 32  # aim for this many chunks: progress and resume granularity
_STAGES = 16  # generous bound on a solver's stages (Dopri8 has 13 — 16 covers any named one)


@dataclasses.dataclass(frozen=True)
class Chunking:
    """`n_points` in chunks of `size`: chunk `i` holds points `i·size … i·size + length(i)`."""

    n_points: int
    size: int
    # A field, not a property: read several times by every sweep, each property read a
    # Python call.
    n_chunks: int = dataclasses.field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "n_chunks", math.ceil(self.n_points / self.size))

    def length(self, i: int) -> int:
        """Points in chunk `i` (fewer than `size` in the last one)."""
        return chunk_length(i, self.size, self.n_points)

    def start(self, i: int) -> int:
        return i * self.size


def chunk_length(i: int, size: int, n: int) -> int:
    """Points in chunk `i` of `n` points in chunks of `size`."""
    return min(size, n - i * size)


def bytes_per_trajectory(model: Model, outputs: list[Output], n_saved: int, dtype) -> int:
    """Estimated device memory of one trajectory in a chunk, in bytes.

    `itemsize × state size × (16 stages + 8 working copies + 2 × saved times)` for the
    solve (stages, error estimate, controller state; the saved series inside the solver
    and once more for observables), plus 3 × the kept outputs (device, transfer and host
    copies), plus 512 bytes of per-trajectory scalars.
    """
    item = np.dtype(dtype).itemsize
    n_state = sum(max(1, math.prod(np.shape(v))) for v in model.initial_state().values.values())
    kept = sum(math.prod(o.shape) for o in outputs) * item + 16
    return item * n_state * (_STAGES + 8 + 2 * n_saved) + 3 * kept + 512


def choose_chunk_size(
    n: int,
    n_devices: int,
    per_traj: int,
    budget: int,
    chunk_size: int | None = None,
    *,
    cpu: bool = False,
    ensemble: bool = False,
    in_memory: bool = False,
) -> int:
    """Trajectories per chunk: `chunk_size` if given, else `min(budget / per_traj,
    max(1024, n / 32), n)`; always a multiple of `n_devices` (rounded up).

    `chunk_size` is a positive int or `None`, as [`SweepOptions`][] checks it; `budget` is
    in bytes. On CPU (`cpu=True`) at most 1024 per device: a vmapped solve's working set
    then stays in cache, 2–5x faster per trajectory than large chunks (docs/sweeps.md,
    scaling). With the ensemble engine (`ensemble=True`), as few balanced chunks of at
    most `ENSEMBLE_CHUNK` per device as the budget allows; with nothing stored or shown
    per chunk (`in_memory=True`), as few balanced chunks as the budget allows."""
    if chunk_size is not None:
        return _round_up(int(chunk_size), n_devices)
    cap = max(n_devices, budget // per_traj // n_devices * n_devices)
    if ensemble:
        most = cap if in_memory else min(cap, ENSEMBLE_CHUNK * n_devices)
        count = math.ceil(n / most)
        return _round_up(math.ceil(n / count), n_devices)
    target = _round_up(max(MIN_CHUNK, math.ceil(n / TARGET_CHUNKS)), n_devices)
    if cpu:
        target = min(target, MIN_CHUNK * n_devices)
    return min(cap, target, _round_up(n, n_devices))


def plan_chunking(
    n_points: int,
    per_traj: int,
    chunk_size: int | None,
    budget: int,
    devices: tuple[jax.Device, ...] | None,
    n_devices: int,
    store: StoreLocation | None,
    ensemble: bool = False,
    in_memory: bool = False,
) -> Chunking:
    """The chunking of a sweep of `n_points` on `n_devices` (of `devices`, or all):
    [`choose_chunk_size`][]; but when `chunk_size` is `None` and `store` holds the
    unfinished chunks of a run with another size that still divides over the devices,
    that size, so the stored chunks can be resumed on another device count."""
    cpu = all(d.platform == "cpu" for d in (devices or jax.devices()))
    size = choose_chunk_size(
        n_points, n_devices, per_traj, budget, chunk_size, cpu=cpu, ensemble=ensemble,
        in_memory=in_memory,
    )  # fmt: skip
    old = ChunkStore.peek_chunk_size(store)
    if chunk_size is None and old is not None and old != size and old % n_devices == 0:
        size = old
    return Chunking(n_points, size)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m
