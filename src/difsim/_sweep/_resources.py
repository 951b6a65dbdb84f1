"""A sweep's memory and disk, estimated before a single point is drawn or computed.

A sweep of 1e12 points used to start drawing or allocating and die with an out-of-memory
traceback, or fill the disk chunk by chunk. [`check_sweep_resources`][] multiplies counts by
sizes (nothing is allocated) and refuses with a `ResourceError` naming what to change:

- the points themselves: a random or Latin-hypercube sweep draws every point up front
  (float64, plus a coordinate copy in the run's dtype);
- the results: without an output they are held in memory (one array per kept quantity,
  plus `status` and `num_steps`); with one, the chunk store and the netCDF file both exist
  on disk at the end, so twice the results (less the chunks already stored);
- an explicit `chunk_size`: its trajectories at the planner's per-trajectory estimate
  ([`bytes_per_trajectory`][]), against the devices' memory.
"""

import math
import os
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from difsim._core import Model
from difsim._resources import MEMORY_ENV, ResourceError, check_disk, check_memory, format_bytes
from difsim._sweep._chunking import bytes_per_trajectory
from difsim._sweep._observables import Output
from difsim._sweep._options import SweepOptions
from difsim._sweep._spec import AbstractSweep, RandomSweep

# Bytes of the per-trajectory `status` (int32) and `num_steps` (at most int64).
_BOOKKEEPING = 12


def result_bytes(outputs: Sequence[Output], dtype=None) -> int:
    """Bytes one trajectory adds to a sweep's result: its kept quantities, `status` and
    `num_steps` (`dtype`, where given, replaces the outputs' own)."""
    kept = 0
    for o in outputs:
        item = np.dtype(o.dtype if dtype is None else dtype).itemsize
        kept += math.prod(o.shape) * item
    return kept + _BOOKKEEPING


def check_sweep_resources(
    model: Model,
    spec: AbstractSweep,
    outputs: Sequence[Output],
    n_saved: int,
    dtype,
    options: SweepOptions,
    per_point: int,
) -> None:
    """Refuse a sweep whose points, results or chunks cannot fit (see the module docstring).
    `per_point`: [`result_bytes`][] of `outputs` (computed once per model part).

    **Raises:** `ResourceError` (a `ValueError`) naming `samples`, `spec`, `output` or
    `chunk_size`, with the estimate and the limit.
    """
    n, item = spec.size, np.dtype(dtype).itemsize
    if isinstance(spec, RandomSweep):
        check_memory(
            n * len(spec.keys) * (8 + item),
            f"drawing {n:,} points of {len(spec.keys)} key(s)",
            "samples",
            "draw fewer samples",
        )

    def what() -> str:  # formatted only for a refusal
        return f"the results of {n:,} trajectories ({per_point:,} bytes each)"

    if options.output is None:
        check_memory(
            n * per_point,
            lambda: what() + ", held in memory without an output",
            "spec",
            "sweep fewer points, keep less (keep=[...]), or give output= to write the "
            "results to disk chunk by chunk",
        )
    else:
        stored = _folder_bytes(Path(f"{options.output}.chunks"))
        check_disk(
            max(0, 2 * n * per_point - stored),
            options.output,
            what() + " in the chunk store and the netCDF file",
            "output",
            "sweep fewer points, keep less (keep=[...]), or write the output elsewhere",
        )
    if options.chunk_size is not None:
        per_traj = bytes_per_trajectory(model, list(outputs), n_saved, dtype)
        _check_chunk(options.chunk_size * per_traj, options.chunk_size, options.devices)


def _check_chunk(needed: int, chunk_size: int, devices) -> None:
    """An explicit chunk's working memory against the devices it runs on: the host's on
    CPUs (or `DIFSIM_MEMORY_LIMIT`), the accelerators' own otherwise."""
    devices = list(devices) if devices else jax.local_devices()
    what = f"a chunk of {chunk_size:,} trajectories"
    if os.environ.get(MEMORY_ENV) or all(d.platform == "cpu" for d in devices):
        check_memory(needed, what, "chunk_size", "choose a smaller chunk_size")
        return
    limits = [(d.memory_stats() or {}).get("bytes_limit") for d in devices]
    if any(limit is None for limit in limits):
        return  # the device does not say: the allocator will
    if needed > sum(limits):
        raise ResourceError(
            f"chunk_size: {what} would need about {format_bytes(needed)} of device memory, more "
            f"than {format_bytes(sum(limits))} (the memory of {len(devices)} "
            f"{devices[0].platform} device(s)); choose a smaller chunk_size",
            "chunk_size",
            needed,
            sum(limits),
        )


def _folder_bytes(folder: Path) -> int:
    """Bytes of the files directly in `folder` (0 if it does not exist)."""
    try:
        return sum(entry.stat().st_size for entry in os.scandir(folder) if entry.is_file())
    except OSError:
        return 0
