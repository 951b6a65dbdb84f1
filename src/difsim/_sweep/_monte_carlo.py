"""A Monte Carlo sweep that keeps statistics over its paths: `samples` paths per point of the
parameter spec, reduced chunk by chunk into means, variances and quantiles per save time.

The paths of all points are laid out point after point, each point's padded to a multiple
of the block size (blocks of partial statistics never straddle points, and a chunk holds
whole blocks, so the merged statistics do not depend on the chunking). Each chunk is one
compiled call: `simulate` vmapped over its paths (each with the key of its global index,
`_samples`), then per-block moments and per-point histogram counts (`_statistics`). The
host merges them into one [`Accumulator`][] per point, in path order. With an output path
the accumulators are saved after every chunk (`_mc_state`), so a killed run resumes where
it stopped and ends with the same numbers.
"""

import dataclasses
import functools
import logging
import math
import time
from functools import lru_cache
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from difsim._core import Model, simulate
from difsim._ensemble import run_ensemble, with_point
from difsim._io import progress
from difsim._sweep import _distributed as dist
from difsim._sweep._chunking import choose_chunk_size
from difsim._sweep._mc_setup import statistics_dataset, statistics_setup
from difsim._sweep._mc_state import MCState, finished_output, load_state, open_output
from difsim._sweep._options import SweepOptions
from difsim._sweep._samples import PathSweep, as_key, path_keys_at
from difsim._sweep._spec import AbstractSweep
from difsim._sweep._statistics import (
    BINS,
    PILOT,
    Accumulator,
    block_partials,
    histogram,
    is_statistics,
    pilot_range,
)

logger = logging.getLogger("difsim")


@dataclasses.dataclass(frozen=True)
class _Static:
    """What the compiled chunk specialises on (hashable)."""

    model: tuple[Any, tuple[Any, ...]]
    solver: Any
    variables: tuple[str, ...]
    quantiles: tuple[str, ...]
    block: int
    segments: int
    engine: str = "diffrax"


@dataclasses.dataclass(frozen=True)
class Lanes:
    """The paths of one chunk: point `p` and path `s` of each lane, and whether it is a
    path at all (padding is not)."""

    point: np.ndarray
    path: np.ndarray
    valid: np.ndarray


def _chunk(model_dyn, save, lanes, ranges, static: _Static, mesh: Mesh | None = None):
    model = eqx.combine(model_dyn, jax.tree.unflatten(static.model[0], static.model[1]))
    if static.engine == "ensemble":
        ys, ok, status = _ensemble_paths(model, save, lanes, static, mesh)
    else:

        def one(point, key):
            sol = simulate(with_point(model, point), save, solver=static.solver,
                           key=as_key(key), throw=False)  # fmt: skip
            return {v: sol.ys[v] for v in static.variables}, sol.ok, sol.status

        ys, ok, status = jax.vmap(one)(lanes["points"], lanes["key"])
    valid = lanes["valid"] & ok
    out = block_partials(ys, valid, static.block)
    for var in static.quantiles:
        lo, hi = ranges[var]
        out[f"{var}/hist"] = histogram(ys[var], valid, lanes["segment"], lo, hi, static.segments)
    out["status"] = status
    return out


def _ensemble_paths(model, save, lanes, static: _Static, mesh: Mesh):
    """`(ys, ok, status)` of a chunk's paths, integrated by the ensemble engine: each
    device its own lanes, in blocks (as a sweep that keeps the paths does)."""

    def solve(points, keys):
        sol = run_ensemble(model, points, save, static.solver, keys=keys)
        return {v: sol.ys[v] for v in static.variables}, sol.ok, sol.status

    batch = PartitionSpec(dist.BATCH_AXIS)
    local = jax.shard_map(solve, mesh=mesh, in_specs=(batch, batch), out_specs=batch,
                          check_vma=False)  # fmt: skip
    return local(lanes["points"], lanes["key"])


@lru_cache(maxsize=8)
def _compiled(mesh: Mesh):
    rep, batch = NamedSharding(mesh, PartitionSpec()), dist.batch_sharding(mesh)
    chunk = functools.partial(_chunk, mesh=mesh)
    return jax.jit(chunk, static_argnums=4, in_shardings=(rep, rep, batch, rep))


class _Runner:
    """Runs chunks of lanes through the compiled function (one per chunk shape)."""

    def __init__(self, model: Model, spec: PathSweep, setup, mesh: Mesh, size: int):
        self.spec, self.setup, self.mesh, self.size = spec, setup, mesh, size
        self.rep = NamedSharding(mesh, PartitionSpec())
        self.batch = dist.batch_sharding(mesh)
        dyn, static = eqx.partition(model, eqx.is_array)
        self.model_dyn = jax.tree.map(lambda x: jax.device_put(x, self.rep), dyn)
        leaves, treedef = jax.tree.flatten(static)
        self.tree = (treedef, tuple(leaves))
        dtype = setup.dtype
        self.save = jax.tree.map(lambda v: jax.device_put(np.asarray(v, dtype), self.rep),
                                 setup.save)  # fmt: skip

    def run(self, lanes: Lanes, block: int, ranges, quantiles: tuple[str, ...]):
        """The chunk's block partials, histograms (segment `j`: point `first + j`, the
        chunk's first point being `first`) and per-lane statuses, on the host."""
        spec, dtype, size = self.spec, self.setup.dtype, self.size
        first = int(lanes.point[0])
        segments = size // self.setup.padded + 2 if quantiles else 1
        index = lanes.point * spec.samples + np.minimum(lanes.path, spec.samples - 1)
        host = {
            "points": spec.base_points(lanes.point, dtype),
            "key": path_keys_at(spec.seed, index),
            "valid": lanes.valid,
            "segment": (lanes.point - first).astype(np.int32),
        }
        device = jax.tree.map(lambda x: jax.device_put(x, self.batch), host)
        rows = np.minimum(np.arange(first, first + segments), self.spec.n_points - 1)
        put = lambda x: jax.device_put(np.asarray(x[rows], dtype), self.rep)  # noqa: E731
        ranges = {v: (put(ranges[v][0]), put(ranges[v][1])) for v in quantiles}
        static = _Static(self.tree, self.setup.solver.settings, self.setup.plan.variables,
                         quantiles, block, segments, self.setup.engine)  # fmt: skip
        out = _compiled(self.mesh)(self.model_dyn, self.save, device, ranges, static)
        return jax.tree.map(np.asarray, out), first


def _lanes(start: int, stop: int, padded: int, samples: int) -> Lanes:
    flat = np.arange(start, stop)
    point, path = flat // padded, flat % padded
    return Lanes(point, path, path < samples)


def monte_carlo_spec(
    model: Model, spec: AbstractSweep | None, options: SweepOptions
) -> tuple[AbstractSweep, bool]:
    """The spec a sweep runs: `spec` itself, or for `samples` a [`PathSweep`][] of it; and
    whether the sweep keeps statistics over the paths.

    **Raises:** `TypeError`/`ValueError` when `samples` and the model do not go together
    (a stochastic model needs them, a deterministic one takes none).
    """
    # Asked of the class: an attribute read on an equinox module instance (`isinstance`
    # reads `__class__`) runs Python code, a visible cost on every repeated small sweep.
    cls, samples = type(model), options.samples
    if not issubclass(cls, Model):
        raise TypeError(f"sweep expects a difsim.Model instance, got {cls.__name__}")
    name, stochastic = cls.__name__, cls.is_stochastic()
    if samples is None:
        if stochastic:
            raise ValueError(
                f"{name} is stochastic (it defines diffusion): give samples=<paths per "
                "point> (and seed=...) for a Monte Carlo sweep, config key [sweep] samples"
            )
        if spec is None:
            raise ValueError("sweep needs a spec (ds.GridSweep, ds.ZipSweep, ds.RandomSweep)")
        return spec, False
    if not stochastic:
        raise ValueError(
            f"samples gives Monte Carlo paths of a stochastic model, but {name} has no noise "
            "(no diffusion method); for random parameter points use ds.RandomSweep"
        )
    if spec is not None and not isinstance(spec, AbstractSweep):
        raise TypeError(
            f"sweep expects a spec (ds.GridSweep, ds.ZipSweep or ds.RandomSweep) or None, "
            f"got {type(spec).__name__}"
        )
    return PathSweep(spec, samples, options.seed), is_statistics(options.keep)


def run_statistics(model: Model, spec: PathSweep, options: SweepOptions):
    """`(dataset, report)` of a Monte Carlo sweep that keeps statistics (see the module
    docstring): `dataset` is opened from the output file when there is one; `report` holds
    the fields of a `SweepReport` (paths, chunks, ...)."""
    start = time.perf_counter()
    if jax.process_count() > 1:
        raise ValueError(
            "a Monte Carlo sweep keeping statistics runs in one process (on all its "
            "devices); keep 'final' or 'trajectory' to spread paths over processes"
        )
    setup = statistics_setup(model, spec, options)
    mesh = dist.batch_mesh(options.devices)
    n_dev = mesh.devices.size
    size = _chunk_size(setup, spec, options, n_dev)
    total = spec.n_points * setup.padded
    n_chunks = math.ceil(total / size)
    output = options.output
    with open_output(output, setup, options) as held:
        if held is not None and finished_output(output, setup.sweep_hash):
            dataset = held.open()
            return dataset, _report(spec, n_chunks, size, n_dev, setup, n_chunks, (), start,
                                    held.counts(), output)  # fmt: skip
        state = load_state(output, setup, spec.n_points, options) if held is not None else None
        state = state or MCState.fresh(spec.n_points, setup, n_chunks)
        runner = _Runner(model, spec, setup, mesh, size)
        done_before, paths_before = state.next_chunk, state.paths_done()
        task = progress(spec.size, what="Monte Carlo sweep", one="path", many="paths",
                        show=options.progress is not False, initial=state.paths_done())  # fmt: skip
        with task as bar:
            if setup.plan.quantiles and state.lo is None:
                _pilot(runner, spec, setup, state, size)
                if held is not None:
                    held.save(state)
            _run_chunks(runner, spec, setup, state, (size, total, n_chunks), held, options, bar)
            bar.finish()
        dataset = statistics_dataset(model, spec, setup, state)
        computed = tuple(range(done_before, n_chunks))
        report = _report(spec, n_chunks, size, n_dev, setup, done_before, computed, start,
                         state.status_counts(), output)  # fmt: skip
        report["points_computed"] = state.paths_done() - paths_before
        if held is not None:
            return held.write(dataset), report
        return dataset, report


# The resume state (histograms of every point and save time: megabytes) is written at most
# this often, and when the sweep is interrupted between chunks; a kill -9 loses at most this
# much work, and the result after a resume is the same (the chunks are merged in order).
SAVE_EVERY_S = 10.0


def _run_chunks(runner, spec, setup, state: MCState, sizes, held, options, bar) -> None:
    """Run and merge the chunks from `state.next_chunk` on, saving the state to `held`."""
    size, total, n_chunks = sizes
    saved, between = time.monotonic(), True  # `between`: the state is a whole chunk's
    try:
        for i in range(state.next_chunk, n_chunks):
            lanes = _lanes(i * size, min((i + 1) * size, total), setup.padded, spec.samples)
            lanes = _pad_lanes(lanes, size)
            between = False
            _merge(state, lanes, *runner.run(lanes, setup.block, state.ranges(),
                                            setup.plan.quantiles), setup)  # fmt: skip
            state.next_chunk, between = i + 1, True
            if held is not None and time.monotonic() - saved >= SAVE_EVERY_S:
                held.save(state)
                saved = time.monotonic()
            bar.advance(int(np.sum(lanes.valid)))
            if options.on_chunk is not None:
                options.on_chunk(i)
    except BaseException:
        if held is not None and between:  # Ctrl-C between chunks loses nothing
            held.save(state)
        raise


def _report(spec, n_chunks, size, n_dev, setup, reused, computed, start, counts, output):
    return dict(
        n_points=spec.size, n_chunks=n_chunks, chunk_size=size, n_devices=n_dev,
        bytes_per_trajectory=setup.per_traj, reused=reused, computed=computed,
        wall_time=time.perf_counter() - start, status_counts=counts, output=output,
    )  # fmt: skip


def _chunk_size(setup, spec: PathSweep, options: SweepOptions, n_dev: int) -> int:
    """Paths per chunk: from the memory budget (the solve of each path, and the
    histograms of the points a chunk spans), a multiple of the block and of the devices."""
    unit = math.lcm(setup.block, n_dev)
    total = spec.n_points * setup.padded
    cpu = all(d.platform == "cpu" for d in (options.devices or jax.devices()))
    size = choose_chunk_size(total, n_dev, setup.per_traj, options.memory_budget,
                             options.chunk_size, cpu=cpu,
                             ensemble=setup.engine == "ensemble")  # fmt: skip
    if setup.plan.quantiles and options.chunk_size is None:
        per_point = setup.times.n_saved * (BINS + 2) * 4 * len(setup.plan.quantiles)
        points = max(1, options.memory_budget // 4 // per_point - 2)
        size = min(size, points * setup.padded)
    return max(unit, -(-size // unit) * unit)


def _pad_lanes(lanes: Lanes, size: int) -> Lanes:
    extra = size - lanes.point.shape[0]
    if extra == 0:
        return lanes
    pad = lambda a, v: np.concatenate([a, np.full(extra, v, a.dtype)])  # noqa: E731
    return Lanes(pad(lanes.point, lanes.point[-1]), pad(lanes.path, 0), pad(lanes.valid, False))


def _pilot(runner: _Runner, spec: PathSweep, setup, state: "MCState", size: int) -> None:
    """The histograms' ranges: min and max of each point's first `PILOT` paths."""
    n = min(spec.samples, PILOT)
    point = np.repeat(np.arange(spec.n_points), n)
    path = np.tile(np.arange(n), spec.n_points)
    lo = {v: np.full((spec.n_points, setup.times.n_saved), np.inf) for v in setup.plan.quantiles}
    hi = {v: np.full_like(lo[v], -np.inf) for v in lo}
    for start in range(0, point.shape[0], size):
        stop = min(start + size, point.shape[0])
        lanes = Lanes(point[start:stop], path[start:stop], np.ones(stop - start, bool))
        lanes = _pad_lanes(lanes, size)
        out, _ = runner.run(lanes, 1, None, ())
        for v in lo:
            np.minimum.at(lo[v], lanes.point[lanes.valid], out[f"{v}/min"][lanes.valid])
            np.maximum.at(hi[v], lanes.point[lanes.valid], out[f"{v}/max"][lanes.valid])
    ranges = {}
    for v in lo:
        bad = ~np.isfinite(lo[v]) | ~np.isfinite(hi[v])  # no finite pilot value: any range
        lo[v][bad], hi[v][bad] = 0.0, 1.0
        ranges[v] = pilot_range(lo[v], hi[v], setup.dtype)
    state.set_ranges({v: r[0] for v, r in ranges.items()}, {v: r[1] for v, r in ranges.items()})


def _merge(state: "MCState", lanes: Lanes, out: dict, first: int, setup) -> None:
    """Merge a chunk's block partials (in order) and histograms into the accumulators."""
    block, variables = setup.block, setup.plan.variables
    n_blocks = out["n"].shape[0]
    owners = lanes.point[::block][:n_blocks]
    for b in range(n_blocks):
        acc: Accumulator = state.points[int(owners[b])]
        partial = {v: tuple(out[f"{v}/{k}"][b] for k in ("mean", "m2", "min", "max"))
                   for v in variables}  # fmt: skip
        acc.merge_block(int(out["n"][b]), partial)
    for v in setup.plan.quantiles:
        hist = out[f"{v}/hist"]
        for seg in range(hist.shape[0]):
            p = first + seg
            if p < len(state.points):
                state.points[p].hist[v] += hist[seg]
    state.count_statuses(out["status"][lanes.valid])
