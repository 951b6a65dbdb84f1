"""`sweep`: many trajectories of one model, vmapped, chunked, sharded and resumable.

[`sweep`][] checks its keywords once, into a [`SweepOptions`][], and hands that object on:
[`run_sweep`][] prepares the sweep against the model (`_setup`), plans its chunks
(`_chunking`), opens the chunk store of its output (`_store`), runs the chunks (`_runner`)
and assembles the Dataset.
"""

import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import diffrax as dfx
import jax
import numpy as np
import xarray as xr
from jax.sharding import Mesh

from difsim._core import Model
from difsim._io import output_lock, progress, receiving
from difsim._sweep import _distributed as dist
from difsim._sweep._chunking import Chunking, chunk_length, plan_chunking
from difsim._sweep._events import cut_dataset
from difsim._sweep._layout import count_attrs, counts_from_file, status_counts
from difsim._sweep._location import StoreLocation
from difsim._sweep._monte_carlo import monte_carlo_spec, run_statistics
from difsim._sweep._options import SweepOptions, sweep_options
from difsim._sweep._runner import run_chunks, run_one_chunk
from difsim._sweep._setup import SweepSetup, prepare
from difsim._sweep._spec import AbstractSweep
from difsim._sweep._store import ChunkStore, agree, finished_chunks

logger = logging.getLogger("difsim")


@dataclasses.dataclass(frozen=True)
class SweepReport:
    """How a sweep ran: sizes, chunks reused from disk and computed, wall time, statuses."""

    n_points: int
    n_chunks: int
    chunk_size: int
    n_devices: int
    bytes_per_trajectory: int
    reused: int
    computed: tuple[int, ...]
    wall_time: float
    status_counts: dict[int, int]
    output: Path | None
    # Set where chunks do not hold `chunk_size` points each (a Monte Carlo sweep's chunks
    # hold paths, each point's padded to whole blocks).
    points_computed: int | None = None

    @property
    def computed_points(self) -> int:
        """Trajectories computed in this run (not reused from disk)."""
        if self.points_computed is not None:
            return self.points_computed
        return sum(chunk_length(i, self.chunk_size, self.n_points) for i in self.computed)


def sweep(
    model: Model,
    spec: AbstractSweep | None = None,
    *,
    t0: float,
    t1: float,
    save: Any = "final",
    keep: str | Sequence[str] | None = None,
    solver: str | dfx.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    dt0: float | None = None,
    controller: str | dfx.AbstractStepSizeController | None = None,
    max_steps: int | None = None,
    root_tol: float | None = None,
    max_events: int | None = None,
    chunk_size: int | None = None,
    memory_budget: int | str | None = None,
    devices: Sequence[jax.Device] | None = None,
    output: str | os.PathLike | None = None,
    store: str | os.PathLike | None = None,
    resume: bool = True,
    overwrite: bool = False,
    progress: bool | None = None,
    attrs: Mapping[str, Any] | None = None,
    engine: str = "auto",
    samples: int | None = None,
    seed: int = 0,
    brownian: str | None = None,
) -> xr.Dataset | None:
    """Simulate `model` at every point of `spec` and return one labelled Dataset.

    ```python
    import numpy as np
    import difsim as ds

    out = ds.sweep(ds.models.Lorenz(), ds.GridSweep({"rho": np.linspace(0.5, 28.0, 32)}),
                   t0=0.0, t1=1.0)  # final state at every rho
    assert out.x.dims == ("rho",) and out.x.shape == (32,) and int(out.attrs["n_success"]) == 32
    ```

    Trajectories run in chunks of a fixed size (one compilation), with the batch axis
    sharded over `devices`, each chunk integrated as one batch by the ensemble engine (or
    by `jax.vmap` of [`simulate`][]: see `engine`). Each trajectory is solved as
    `simulate(model.replace(**point), ..., throw=False)` would: a failure gives that
    trajectory its [`Status`][] and NaN values, and every other trajectory is kept.

    **Arguments:**

    - `model`: the base [`Model`][]; swept keys replace its values.
    - `spec`: a [`GridSweep`][], [`ZipSweep`][] or [`RandomSweep`][]; keys are parameter
      names or `"state.<var>"` (initial values). May be left out in a Monte Carlo sweep.
    - `samples`, `seed`: for a stochastic model (see `docs/stochastic.md`), the number of
      Monte Carlo paths per point of `spec`, and the seed of their keys: path `s` of point
      `p` has key `fold_in(key(seed), p * samples + s)`, whatever the chunking. `keep` then
      takes statistics over the paths, `"x_mean"`, `"x_var"`, `"x_std"`, `"x_min"`,
      `"x_max"`, `"x_median"`, quantiles `"x_q05"`, `"x_q95"`, … (dims: the spec's, then
      `time`), or `"final"`/`"trajectory"` per path (dims: the spec's, then `path`).
      `brownian`: their Brownian path, as for [`simulate`][].
    - `t0`, `t1`, `save`, `solver`, `rtol`, `atol`, `dt0`, `controller`, `max_steps`,
      `root_tol`: as for [`simulate`][] (`save` defaults to `"final"`).
    - `max_events`: for a model with events, most events in one trajectory (default: the
      model's `max_events`, 100), as for [`simulate`][]: the room of each trajectory's
      event record; one more event ends that trajectory with `Status.EVENT_LIMIT`.
    - `keep`: `"final"` (default: the state at the last saved time), `"trajectory"` (the
      saved series; needs `save` = n or times), or a list of observables: `"x_max"`,
      `"x_min"`, `"x_mean"` (trapezoid time average), `"x_rate"` (`(x_last - x_first) /
      (t_last - t_first)`), `"x_final"`, or the name of a model method decorated with
      [`observable`][].
    - `chunk_size`: trajectories per compiled call, rounded up to a multiple of the number
      of devices. Default: from `memory_budget` (see `docs/sweeps.md`).
    - `memory_budget`: bytes one chunk may use, an int or a string like `"512MiB"`
      (default 1 GiB).
    - `devices`: devices to shard over (default: all, of every process).
    - `output`: a netCDF path. Chunks are stored, as they finish, in a zarr store beside
      it (`<output>.zarr`, readable with `xr.open_zarr` while the sweep runs) and
      assembled into `output` at the end; a rerun resumes.
    - `store`: where that zarr store goes instead: a path, or an fsspec URL such as
      `"s3://bucket/runs/x.zarr"` (object storage; see `docs/sweeps.md`).
    - `resume`: reuse finished chunks of the same sweep (default); `False` starts over.
    - `overwrite`: replace an `output` (or chunks) that belongs to a different sweep, instead
      of refusing.
    - `progress`: `None` (default) or `True` show progress: a bar on a terminal, log lines
      every 10 s elsewhere (trajectories done, rate, time left; docs: "Progress and
      logging"); for PDE models also within a chunk (model time of its slowest lane).
      `False`: none.
    - `attrs`: extra global attributes for the Dataset (e.g. the config text).
    - `engine`: `"auto"` (default) integrates with difsim's ensemble engine (all the lanes
      of a chunk as one batch, several times faster; see `docs/sweeps.md`) whenever the
      solver and controller allow it, else with diffrax; `"ensemble"` insists (an error
      says why it cannot), `"diffrax"` always takes `jax.vmap` of [`simulate`][]. The
      engine used, and why `"auto"` fell back, are in the Dataset's attributes.

    **Returns:** the `xarray.Dataset`: dims are the grid keys (each with its coordinate) or
    `sample` (with a coordinate per key); one variable per kept quantity, plus `status` and
    `num_steps` (and, for a model with events, each trajectory's event record as
    [`to_xarray`][] labels it, see `docs/events.md`); attributes as [`to_xarray`][] plus
    the sweep settings and `n_<status>` counts. A model's array-valued parameters (an
    array field, an equinox network's weights), the same at every point, are data
    variables of their own named by their path (`net.layers[0].weight`, see
    [`to_xarray`][]); they cannot be swept, as only scalar parameters and initial values
    can. With `output`, the Dataset is opened from the file (lazily); in a multi-process
    run, processes other than the writer return `None` when `output` is set.
    """
    options = sweep_options(
        t0=t0, t1=t1, save=save, keep=keep, solver=solver, rtol=rtol, atol=atol, dt0=dt0,
        controller=controller, max_steps=max_steps, root_tol=root_tol, max_events=max_events,
        chunk_size=chunk_size,
        memory_budget=memory_budget, devices=devices, output=output, store=store, resume=resume,
        overwrite=overwrite, progress=progress, attrs=attrs, engine=engine, samples=samples,
        seed=seed, brownian=brownian,
    )  # fmt: skip
    return _run(model, spec, options, report=False)[0]


def run_sweep(
    model: Model,
    spec: AbstractSweep | None,
    options: SweepOptions | None = None,
    /,
    **keywords: Any,
) -> tuple[xr.Dataset | None, SweepReport]:
    """[`sweep`][] plus a [`SweepReport`][]: what `difsim run` prints.

    **Arguments:** `model` and `spec` as for [`sweep`][]; then either `options`, a
    [`SweepOptions`][], or the keywords of [`sweep`][] (and `on_chunk`), from which one is
    built.

    **Returns:** `(dataset, report)`, `dataset` as [`sweep`][] returns it.
    """
    if options is None:
        options = SweepOptions(**keywords)
    elif keywords:
        raise TypeError(
            f"run_sweep takes SweepOptions or keywords, not both; got {sorted(keywords)}"
        )
    return _run(model, spec, options, report=True)


def _run(
    model: Model, spec: AbstractSweep | None, options: SweepOptions, report: bool
) -> tuple[xr.Dataset | None, SweepReport | None]:
    """[`run_sweep`][]; `report=False` ([`sweep`][], which returns the Dataset only): an
    in-memory run builds no [`SweepReport`][] (a visible share of a repeated small sweep)
    and returns `None` in its place."""
    spec, statistics = monte_carlo_spec(model, spec, options)
    if statistics:
        if options.max_events is not None:  # their solves keep the model's cap
            raise ValueError("max_events: statistics over Monte Carlo paths keep no event record")
        dataset, report = run_statistics(model, spec, options)
        return dataset, SweepReport(**report)
    start = time.perf_counter()
    setup = prepare(model, spec, options)
    mesh = _mesh(tuple(jax.devices()) if options.devices is None else options.devices)
    # Processes given different configs would run different programs in lockstep and hang
    # or mix results: refuse on every process instead.
    dist.check_same_everywhere(setup.sweep_hash, "the sweep's settings")
    if options.output is None:
        return _run_in_memory(model, spec, options, setup, mesh, start, report)
    writer, output = dist.is_writer(), options.output
    location = StoreLocation.of(output, options.store)
    chunking = plan_chunking(
        spec.size, setup.per_traj, options.chunk_size, options.memory_budget,
        options.devices, mesh.devices.size, location if writer else None,
        ensemble=setup.engine == "ensemble",
    )  # fmt: skip
    # Only the writer read the stored chunk size (a resume on another device count keeps
    # it): every process must run the same chunks.
    size = int(dist.broadcast_from_writer(np.asarray(chunking.size, np.int64)))
    chunking = dataclasses.replace(chunking, size=size)
    # Every process has the store: each writes its share of the chunks (`ChunkStore.join`).
    store = _chunk_store(output, location, setup, chunking)
    with contextlib.ExitStack() as held:

        def prepare_store() -> set[int] | None:
            # On the writer, inside `agree`, so a refusal reaches every process at once.
            store.check()  # only the writer prepares
            held.enter_context(output_lock(output))
            return finished_chunks(store, options.resume, options.overwrite)

        done = agree(prepare_store, chunking.n_chunks, store)
        return _run_prepared(model, spec, options, setup, mesh, chunking, done, store, start)


def _run_in_memory(model, spec, options, setup, mesh, start, report):
    """[`run_sweep`][] without an output: no store to open, lock, resume from or agree on
    (a sweep repeated in a loop runs through here: what it skips is a visible share of a
    small sweep), every process computing every chunk."""
    # Nothing stored: the chunking follows from these and the number of points (the
    # setup's own) alone, made once per setup.
    in_memory = _in_memory(options)
    plan = (options.chunk_size, options.memory_budget, options.devices, mesh.devices.size,
            in_memory)  # fmt: skip
    chunking = setup.memo.get(("chunking", plan))
    if chunking is None:
        chunking = setup.memo["chunking", plan] = plan_chunking(
            spec.size, setup.per_traj, options.chunk_size, options.memory_budget,
            options.devices, mesh.devices.size, None, ensemble=setup.engine == "ensemble",
            in_memory=in_memory,
        )  # fmt: skip
    if in_memory and chunking.n_chunks == 1 and options.on_chunk is None:
        # One chunk, nothing stored or shown: its results are copied once, from the device
        # buffers into the Dataset's own (writable) arrays.
        todo, arrays = (0,), run_one_chunk(model, spec, setup, mesh, chunking)
    else:
        arrays = setup.layout.empty()
        todo = _compute(model, spec, setup, options, mesh, chunking, set(), None, arrays)
    counts = status_counts(arrays["status"])
    dataset = setup.dataset(arrays, count_attrs(counts))
    if "event_count" in arrays:  # `event` as long as the most events
        dataset = cut_dataset(dataset)
    if not report:
        return dataset, None
    return dataset, _report(spec, setup, mesh, chunking, 0, todo, counts, None, start)


def _report(spec, setup, mesh, chunking, reused, computed, counts, output, start) -> SweepReport:
    """The [`SweepReport`][] of a run that started at `start` (`time.perf_counter`)."""
    return SweepReport(spec.size, chunking.n_chunks, chunking.size, mesh.devices.size,
                       setup.per_traj, reused, computed, time.perf_counter() - start, counts,
                       output)  # fmt: skip


def _run_prepared(model, spec, options, setup, mesh, chunking, done, store, start):
    """[`run_sweep`][] with an output, once its store is prepared (and the output locked)."""
    output, writer = options.output, dist.is_writer()

    def report(reused: int, computed: tuple[int, ...], counts: dict[int, int]) -> SweepReport:
        return _report(spec, setup, mesh, chunking, reused, computed, counts, output, start)

    if done is None:  # the output already holds this sweep's result
        logger.info("%s already holds this sweep's result: nothing to compute", output)
        if not writer:
            return None, report(chunking.n_chunks, (), {})
        return _open(output), report(chunking.n_chunks, (), counts_from_file(output))
    if done:
        logger.info("resuming: %d of %d chunks already stored", len(done), chunking.n_chunks)
    todo = _compute(model, spec, setup, options, mesh, chunking, done, store)
    dist.barrier("difsim-sweep-stored")  # every chunk is in the store, whoever wrote it
    if not writer:
        return None, report(len(done), todo, {})
    counts = store.assemble()
    return _open(output), report(len(done), todo, counts)


@functools.lru_cache(maxsize=8)
def _mesh(devices: tuple[jax.Device, ...]) -> Mesh:
    """The batch mesh over `devices` (checked by `batch_mesh`), built once per device set."""
    return dist.batch_mesh(devices)


def _chunk_store(
    output: Path, location: StoreLocation, setup: SweepSetup, chunking: Chunking
) -> ChunkStore:
    """The chunk store of `output`: keyed by the settings and the chunk size."""
    chunked = {**setup.settings, "chunk_size": str(chunking.size)}
    return ChunkStore(output, location, setup.layout, chunked, chunking.size, setup.sweep_hash)


def _compute(
    model: Model,
    spec: AbstractSweep,
    setup: SweepSetup,
    options: SweepOptions,
    mesh: Mesh,
    chunking: Chunking,
    done: set[int],
    store: ChunkStore | None,
    arrays: dict[str, np.ndarray] | None = None,
) -> tuple[int, ...]:
    """Run the chunks not `done`, storing each in `store` as it finishes or, without one,
    in the flat `arrays` (`{name: (size, *tail)}`); return the chunks run.
    `options.on_chunk` is called after each chunk is stored."""
    todo = tuple([i for i in range(chunking.n_chunks) if i not in done])
    if options.progress is False or not dist.is_writer():  # nothing shown: no task at all
        finished = _storer(options, chunking, store, arrays)
        run_chunks(model, spec, setup, mesh, chunking, todo, finished)
        return todo
    initial = sum(chunking.length(i) for i in done)
    task = progress(spec.size, what="sweep", one="trajectory", many="trajectories",
                    initial=initial)  # fmt: skip
    inside = setup.model_time  # long solves: progress within a chunk
    # Only solves that report progress send fractions for `task` to receive.
    with task, receiving(task) if inside else contextlib.nullcontext():
        task.running(chunking.size)  # a chunk's solves may report fractions of it
        finished = _storer(options, chunking, store, arrays, task)
        run_chunks(model, spec, setup, mesh, chunking, todo, finished, progress=inside)
        task.finish()
    return todo


def _storer(options, chunking, store, arrays, task=None):
    """`finished(i, host)` for [`run_chunks`][]: chunk `i`'s results into `store` or into
    the flat `arrays`, then `task` moved on and `options.on_chunk` called."""

    def finished(i: int, host: dict[str, np.ndarray]) -> None:
        if store is not None:
            store.write(i, host)
        elif arrays is not None:
            start = chunking.start(i)
            for k, v in host.items():
                arrays[k][start : start + len(v)] = v
        if task is not None:
            task.advance(chunking.length(i))
            task.running(chunking.size)
        if options.on_chunk is not None:
            options.on_chunk(i)

    return finished


def _in_memory(options: SweepOptions) -> bool:
    """Whether nothing is stored or reported chunk by chunk: no output, no progress (a long
    sweep's progress moves chunk by chunk), one process (processes must agree on the
    chunking)."""
    return options.output is None and options.progress is False and jax.process_count() == 1


def _open(path: Path) -> xr.Dataset:
    return xr.open_dataset(path, engine="h5netcdf")
