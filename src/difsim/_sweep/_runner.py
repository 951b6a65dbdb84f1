"""The chunk runner: one compiled, vmapped and sharded function, called once per chunk.

Every chunk has the same size (the last one is padded by repeating its last point), so the
function compiles once. The batch axis is sharded over the mesh; the model and the times
are replicated. Results come back to the host chunk by chunk, while the next chunk runs.
"""

import dataclasses
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from difsim._core import Model, simulate
from difsim._ensemble import run_ensemble, with_point
from difsim._sweep import _distributed as dist
from difsim._sweep._chunking import Chunking
from difsim._sweep._events import record_values
from difsim._sweep._observables import KeepPlan
from difsim._sweep._options import SolverChoice
from difsim._sweep._samples import KEY_ENTRY, as_key
from difsim._sweep._setup import SweepSetup
from difsim._sweep._spec import AbstractSweep


@dataclasses.dataclass(frozen=True)
class _Static:
    """Everything the compiled chunk function specialises on (hashable: a static argument).
    The model's non-array part is kept flattened: equinox modules holding dicts (a
    `State`) do not hash, but their tree structure and leaves do."""

    model: tuple[Any, tuple[Any, ...]]
    # The tree structures of the model's arrays and of the save times, which the compiled
    # function takes as flat tuples of leaves (see `_chunk`).
    dyn_tree: Any
    save_tree: Any
    keys: tuple[str, ...]
    save: Any
    solver: SolverChoice
    keep: KeepPlan
    engine: str
    progress: bool  # report model time from inside the solves (docs: "Progress and logging")
    _hash: int | None = dataclasses.field(default=None, compare=False, repr=False)

    def __hash__(self) -> int:
        if self._hash is None:
            fields = (self.model, self.dyn_tree, self.save_tree, self.keys, self.save,
                      self.solver, self.keep, self.engine)  # fmt: skip
            return hash((*fields, self.progress))
        return self._hash


def _chunk(dyn_leaves: tuple, save_leaves: tuple, points, static: _Static):
    # The model's arrays and the save times arrive as flat tuples: jit flattens a tuple in
    # C++, but an equinox module or a `SaveSpec` through Python calls on every chunk (~30 µs
    # of a repeated small sweep).
    model_dyn = jax.tree.unflatten(static.dyn_tree, dyn_leaves)
    times = jax.tree.unflatten(static.save_tree, save_leaves)
    model = eqx.combine(model_dyn, jax.tree.unflatten(static.model[0], static.model[1]))
    if static.engine == "ensemble":
        # Every lane at once; then what is kept, lane by lane (cheap: no solve). A Monte
        # Carlo path's key goes to the engine, which draws the path's increments.
        points = dict(points)
        keys = points.pop(KEY_ENTRY, None)
        sol = run_ensemble(model, points, times, static.solver.settings, keys=keys)
        # Each lane's model rebuilt from its point, not `sol.model`: the arrays no point
        # changes (a network's weights) stay unbatched, never copied per lane; and
        # `filter_vmap` passes the model's callables (its activation) through.
        evaluate = lambda p, s: static.keep.evaluate(with_point(model, p), s)  # noqa: E731
        kept = eqx.filter_vmap(evaluate)(points, sol)
        return dict(kept, status=sol.status, num_steps=sol.num_steps)

    def one(point):
        # A Monte Carlo path carries its key (`_samples.PathSweep`), not a model value.
        point = dict(point)
        key = point.pop(KEY_ENTRY, None)
        key = None if key is None else as_key(key)
        # `with_point` (`tree_at`), not `model.replace`: no re-run of `__init__` or
        # `__check_init__`, whose Python checks could not look at traced values.
        m = with_point(model, point)
        # Times and solver settings were checked and resolved once, in `prepare`.
        sol = simulate(
            m, times, solver=static.solver.settings, key=key, throw=False,
            progress=static.progress, max_events=static.solver.max_events,
        )  # fmt: skip
        kept = static.keep.evaluate(m, sol)
        return dict(kept, **record_values(sol), status=sol.status, num_steps=sol.num_steps)

    return jax.vmap(one)(points)


def _local_chunk(mesh: Mesh):
    """`_chunk` run by each device on its own lanes: the ensemble engine's blocks and
    loops are per device, never partitioned across devices by XLA."""
    rep, batch = PartitionSpec(), PartitionSpec(dist.BATCH_AXIS)

    def run(dyn_leaves, save_leaves, points, static):
        local = lambda d, t, p: _chunk(d, t, p, static)  # noqa: E731
        mapped = jax.shard_map(
            local, mesh=mesh, in_specs=(rep, rep, batch), out_specs=batch, check_vma=False
        )
        return mapped(dyn_leaves, save_leaves, points)

    return run


@lru_cache(maxsize=8)
def _compiled(mesh: Mesh, engine: str):
    rep, batch = NamedSharding(mesh, PartitionSpec()), dist.batch_sharding(mesh)
    return jax.jit(
        _local_chunk(mesh) if engine == "ensemble" else _chunk,
        static_argnums=3,
        in_shardings=(rep, rep, batch),
        out_shardings=batch,
    )


def run_chunks(
    model: Model,
    spec: AbstractSweep,
    setup: SweepSetup,
    mesh: Mesh,
    chunking: Chunking,
    todo: Sequence[int],
    finished: Callable[[int, dict[str, np.ndarray]], None],
    progress: bool = False,
) -> None:
    """Run chunks `todo` of `spec` over `mesh`; call `finished(i, arrays)` with chunk `i`'s
    results on the host (`{name: (length(i), *tail)}`, in the layout's dtypes) as each
    one finishes, in order. `progress`: the solves report their model time (a host
    callback; the diffrax engine only)."""
    runner = chunk_runner(model, spec, setup, mesh, progress and setup.engine != "ensemble")
    # A sweep of one chunk keeps its points placed on the devices in its setup: a repeat
    # (its points compared bitwise when the setup was found) neither converts nor
    # transfers them again.
    memo = setup.memo if chunking.n_chunks == 1 else None
    pending = None
    for i in todo:
        # Dispatch the next chunk before fetching the previous one: the host work
        # (transfer, writing) overlaps the device work.
        launched = (i, runner.launch(spec, chunking, i, memo))
        if pending is not None:
            finished(pending[0], runner.fetch(chunking, *pending))
        pending = launched
    if pending is not None:
        finished(pending[0], runner.fetch(chunking, *pending))


def run_one_chunk(
    model: Model, spec: AbstractSweep, setup: SweepSetup, mesh: Mesh, chunking: Chunking
) -> dict[str, np.ndarray]:
    """[`run_chunks`][] of a sweep of one chunk, without progress: its results as arrays of
    their own (`{name: (size, *tail)}`, writable). The chunk's points stay placed on the
    devices in the setup's memo, as `run_chunks` keeps them."""
    runner = chunk_runner(model, spec, setup, mesh, False)
    return runner.fetch(chunking, 0, runner.launch(spec, chunking, 0, setup.memo), copy=True)


@dataclasses.dataclass(frozen=True)
class ChunkRunner:
    """What every chunk of a sweep is run with: `run`, the compiled chunk function; its
    arguments `model_dyn` and `save` (the leaves of the model's arrays and of the save
    times, replicated on every device, as tuples) and `static`; `batch`, the points'
    sharding; `dtype`, the points' dtype; `dtypes`, each result's dtype in the layout;
    `one_device`, whether the run is one process on one device."""

    run: Callable
    model_dyn: tuple[jax.Array, ...]
    save: tuple[jax.Array, ...]
    static: _Static
    batch: NamedSharding
    dtype: np.dtype
    dtypes: dict[str, np.dtype]
    one_device: bool

    def launch(
        self, spec: AbstractSweep, chunking: Chunking, i: int, memo: dict | None = None
    ) -> dict[str, jax.Array]:
        """Dispatch chunk `i` of `spec` (asynchronously): its results, on the devices.
        `memo`: where the chunk's points, placed on the devices, are kept for a repeat."""
        # Keyed by the sharding too: a repeat on other devices places them there.
        key = ("points", self.batch, chunking.size, i)
        placed = None if memo is None else memo.get(key)
        if placed is not None:
            return self.run(self.model_dyn, self.save, placed, self.static)
        n, start, size = chunking.length(i), chunking.start(i), chunking.size
        pts = spec.points(start, start + n, self.dtype)
        if n < size:  # the last chunk is padded by repeating its last point: one shape
            pts = {
                k: np.concatenate([v, np.repeat(v[-1:], size - n, axis=0)]) for k, v in pts.items()
            }
        if not self.one_device:  # each process places its own shards, explicitly
            pts = {k: dist.to_global(v, self.batch) for k, v in pts.items()}
        elif memo is not None:
            pts = {k: jax.device_put(v, self.batch) for k, v in pts.items()}
        if memo is not None:
            memo[key] = pts
        # On one device and nothing kept, jit places the host arrays itself: ~0.2 ms less
        # per call than building a global array first (a visible share of a small sweep).
        return self.run(self.model_dyn, self.save, pts, self.static)

    def fetch(
        self, chunking: Chunking, i: int, out: dict[str, jax.Array], copy: bool | None = None
    ) -> dict[str, np.ndarray]:
        """Chunk `i`'s results `out` (launched) on the host, less the padding, cast to the
        layout's dtypes: what the file and a resumed run expect, whatever the model's
        observables returned. One gather for all variables: one collective per chunk in a
        multi-process run. `copy`: `True` gives arrays of their own (writable), `None`
        copies only to cast (else read-only views of the device buffers on a CPU)."""
        host, n = dist.to_host(out), chunking.length(i)
        if n < chunking.size:  # drop the padding
            host = {k: v[:n] for k, v in host.items()}
        dtypes = self.dtypes
        return {k: np.array(v, dtypes[k], copy=copy) for k, v in host.items()}


def chunk_runner(
    model: Model, spec: AbstractSweep, setup: SweepSetup, mesh: Mesh, progress: bool
) -> ChunkRunner:
    """The [`ChunkRunner`][] of a sweep of `model` over `mesh`: made once per model,
    settings, mesh and `progress` (`setup.shared`): a sweep of the same model over other
    points reuses it."""
    key = ("runner", mesh, spec.keys, progress)
    if key in setup.shared:
        return setup.shared[key]
    rep = NamedSharding(mesh, PartitionSpec())
    model_dyn, model_static = eqx.partition(model, eqx.is_array)
    place = lambda x: None if x is None else dist.to_global(np.asarray(x), rep)  # noqa: E731
    dyn_leaves, dyn_tree = jax.tree.flatten(jax.tree.map(place, model_dyn))
    # The checked times as arrays of the run's dtype on every device: `tree.map` swaps the
    # leaves without running `SaveSpec.__init__` (no second check).
    save = jax.tree.map(lambda v: place(np.asarray(v, setup.dtype)), setup.save)
    save_leaves, save_tree = jax.tree.flatten(save)
    leaves, treedef = jax.tree.flatten(model_static)
    static = _Static(
        (treedef, tuple(leaves)), dyn_tree, save_tree, spec.keys, setup.times.save,
        setup.solver, setup.plan, setup.engine, progress,
    )  # fmt: skip
    # jit hashes its static argument on every call: hash the fields once.
    object.__setattr__(static, "_hash", hash(static))
    dtypes = {name: dt for name, (_, _, dt, _) in setup.layout.variables.items()}
    one_device = jax.process_count() == 1 and mesh.devices.size == 1
    setup.shared[key] = ChunkRunner(
        _compiled(mesh, setup.engine), tuple(dyn_leaves), tuple(save_leaves), static,
        dist.batch_sharding(mesh), setup.dtype, dtypes, one_device,
    )  # fmt: skip
    return setup.shared[key]
