"""`sweep`: many trajectories of one model, vmapped, chunked, sharded and resumable."""

import contextlib
import dataclasses
import inspect
import json
import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from difsim import solvers
from difsim._core import KEYS, Model, resolve_solver_settings, simulate
from difsim._sweep import _distributed as dist
from difsim._sweep._layout import (
    build_layout,
    count_attrs,
    counts_from_file,
    default_controller,
    settings,
    settings_hash,
    status_counts,
)
from difsim._sweep._observables import KeepPlan, Output, plan_keep
from difsim._sweep._spec import AbstractSweep
from difsim._sweep._store import ChunkStore, agree, finished_chunks, write_netcdf

logger = logging.getLogger("difsim")

DEFAULT_MEMORY_BUDGET = 2**30  # bytes per chunk (1 GiB)
MIN_CHUNK = 1024  # trajectories: below this, per-call overhead starts to show
TARGET_CHUNKS = 32  # aim for this many chunks: progress and resume granularity
_STAGES = 16  # generous bound on a solver's stages (Dopri8 has 13 — 16 covers any named one)

# Test hook: called with the chunk index after each chunk is stored (may raise).
_after_chunk: Callable[[int], None] | None = None


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

    @property
    def computed_points(self) -> int:
        """Trajectories computed in this run (not reused from disk)."""
        return sum(_valid(i, self.chunk_size, self.n_points) for i in self.computed)


def sweep(
    model: Model,
    spec: AbstractSweep,
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
    chunk_size: int | None = None,
    memory_budget: int | str | None = None,
    devices: Sequence[jax.Device] | None = None,
    output: str | os.PathLike | None = None,
    resume: bool = True,
    overwrite: bool = False,
    progress: bool | None = None,
    attrs: Mapping[str, Any] | None = None,
) -> xr.Dataset | None:
    """Simulate `model` at every point of `spec` and return one labelled Dataset.

    ```python
    out = ds.sweep(ds.models.Lorenz(), ds.GridSweep({"rho": np.linspace(0, 21, 10_000)}),
                   t0=0.0, t1=1.0, output="runs/rho.nc")
    out.x.plot()          # final x against rho
    ```

    Trajectories run as `jax.jit(jax.vmap(...))` over chunks of a fixed size (one
    compilation), with the batch axis sharded over `devices`. Each trajectory is
    `simulate(model.replace(**point), ..., throw=False)`: a failure gives that trajectory
    its [`Status`][] and NaN values, and every other trajectory is kept.

    **Arguments:**

    - `model`: the base [`Model`][]; swept keys replace its values.
    - `spec`: a [`GridSweep`][], [`ZipSweep`][] or [`RandomSweep`][]; keys are parameter
      names or `"state.<var>"` (initial values).
    - `t0`, `t1`, `save`, `solver`, `rtol`, `atol`, `dt0`, `controller`, `max_steps`: as for
      [`simulate`][] (`save` defaults to `"final"`).
    - `keep`: `"final"` (default: the state at the last saved time), `"trajectory"` (the
      saved series; needs `save` = n or times), or a list of observables: `"x.max"`,
      `"x.min"`, `"x.mean"` (trapezoid time average), `"x.rate"` (`(x_last - x_first) /
      (t_last - t_first)`), `"x.final"`, or the name of a model method decorated with
      [`observable`][].
    - `chunk_size`: trajectories per compiled call, rounded up to a multiple of the number
      of devices. Default: from `memory_budget` (see `docs/sweeps.md`).
    - `memory_budget`: bytes one chunk may use, an int or a string like `"512MiB"`
      (default 1 GiB).
    - `devices`: devices to shard over (default: all, of every process).
    - `output`: a netCDF path. Chunks are stored next to it (`<output>.chunks/`) as they
      finish, and assembled into `output` at the end; a rerun resumes.
    - `resume`: reuse finished chunks of the same sweep (default); `False` starts over.
    - `overwrite`: replace an `output` (or chunks) that belongs to a different sweep, instead
      of refusing.
    - `progress`: a progress bar (default: when stderr is a terminal).
    - `attrs`: extra global attributes for the Dataset (e.g. the config text).

    **Returns:** the `xarray.Dataset`: dims are the grid keys (each with its coordinate) or
    `sample` (with a coordinate per key); one variable per kept quantity, plus `status` and
    `num_steps`; attributes as [`to_xarray`][] plus the sweep settings and `n_<status>`
    counts. With `output`, the Dataset is opened from the file (lazily); in a
    multi-process run, processes other than the writer return `None` when `output` is set.
    """
    dataset, _ = run_sweep(
        model, spec, t0=t0, t1=t1, save=save, keep=keep, solver=solver, rtol=rtol, atol=atol,
        dt0=dt0, controller=controller, max_steps=max_steps, chunk_size=chunk_size,
        memory_budget=memory_budget, devices=devices, output=output, resume=resume,
        overwrite=overwrite, progress=progress, attrs=attrs,
    )  # fmt: skip
    return dataset


@dataclasses.dataclass(frozen=True)
class _Static:
    """Everything the compiled chunk function specialises on (hashable: a static argument).
    The model's non-array part is kept flattened: equinox modules holding dicts (a
    `State`) do not hash, but their tree structure and leaves do."""

    model: tuple[Any, tuple[Any, ...]]
    keys: tuple[str, ...]
    save: Any
    solver: Any
    rtol: float
    atol: float
    dt0: float | None
    controller: Any
    max_steps: int
    keep: KeepPlan


def _chunk(model_dyn, t0, t1, ts, points, static: _Static):
    model = eqx.combine(model_dyn, jax.tree.unflatten(static.model[0], static.model[1]))

    def one(point):
        # `tree_at`, not `model.replace`: no re-run of `__init__`/`__check_init__`, whose
        # Python checks could not look at traced values.
        nodes = [_node(key) for key in static.keys]
        m = eqx.tree_at(lambda m: [f(m) for f in nodes], model, [point[k] for k in static.keys])
        sol = simulate(
            m, t0=t0, t1=t1, save=static.save if ts is None else ts, solver=static.solver,
            rtol=static.rtol, atol=static.atol, dt0=static.dt0, controller=static.controller,
            max_steps=static.max_steps, throw=False,
        )  # fmt: skip
        return dict(static.keep.evaluate(m, sol), status=sol.status, num_steps=sol.num_steps)

    return jax.vmap(one)(points)


def _node(key: str) -> Callable[[Model], Any]:
    if key.startswith("state."):
        var = key.removeprefix("state.")
        return lambda m: m.state.values[var]
    return lambda m: getattr(m, key)


@lru_cache(maxsize=8)
def _compiled(mesh: Mesh):
    rep, batch = NamedSharding(mesh, PartitionSpec()), dist.batch_sharding(mesh)
    return jax.jit(
        _chunk,
        static_argnums=5,
        in_shardings=(rep, rep, rep, rep, batch),
        out_shardings=batch,
    )


def run_sweep(model, spec, **kwargs) -> tuple[xr.Dataset | None, SweepReport]:
    """[`sweep`][] (same arguments) plus a [`SweepReport`][]: what `difsim run` prints."""
    start = time.perf_counter()
    bound = inspect.signature(sweep).bind(model, spec, **kwargs)
    bound.apply_defaults()
    kw = bound.arguments
    setup = _setup(model, spec, kw)
    mesh = dist.batch_mesh(kw["devices"])
    n_dev, writer = mesh.devices.size, dist.is_writer()
    output = None if kw["output"] is None else Path(kw["output"])
    size = _chunk_size(spec, setup, kw, n_dev, output if writer else None)
    n_chunks = math.ceil(spec.size / size)
    store = None
    if output is not None and writer:
        expected = {k: (tail, dt) for k, (_, tail, dt, _) in setup.layout.variables.items()}
        chunked = {**setup.settings, "chunk_size": str(size)}
        result_hash = setup.layout.attrs["sweep_hash"]
        store = ChunkStore(output, chunked, (spec.size, size), expected, result_hash)
    # Processes given different configs would run different programs in lockstep and hang
    # or mix results: refuse on every process instead.
    dist.check_same_everywhere(setup.layout.attrs["sweep_hash"], "the sweep's settings")
    done = agree(lambda: finished_chunks(store, kw["resume"], kw["overwrite"]), n_chunks)

    def report(reused, computed, counts):
        return SweepReport(spec.size, n_chunks, size, n_dev, setup.per_traj, reused, computed,
                           time.perf_counter() - start, counts, output)  # fmt: skip

    if done is None:  # the output already holds this sweep's result
        logger.info("%s already holds this sweep's result: nothing to compute", output)
        if not writer:
            return None, report(n_chunks, (), {})
        return _open(output), report(n_chunks, (), counts_from_file(output))
    if done:
        logger.info("resuming: %d of %d chunks already stored", len(done), n_chunks)
    todo = tuple(i for i in range(n_chunks) if i not in done)
    arrays = setup.layout.empty() if output is None else None
    show = (sys.stderr.isatty() if kw["progress"] is None else kw["progress"]) and writer
    with _progress(spec.size, sum(_valid(i, size, spec.size) for i in done), show) as bar:
        _compute(model, spec, setup, kw, mesh, size, todo, store, arrays, bar)
    if output is None:
        counts = status_counts(arrays["status"])
        setup.layout.attrs.update(count_attrs(counts))
        return setup.layout.to_dataset(arrays), report(len(done), todo, counts)
    if store is None:  # not the writer
        return None, report(len(done), todo, {})
    counts = _assemble(output, setup.layout, store)
    return _open(output), report(len(done), todo, counts)


@dataclasses.dataclass
class _Setup:
    """A sweep's checked arguments and everything derived from them before running."""

    t0: float
    t1: float
    save: Any  # "final", an int, or None (times in `ts`)
    ts: np.ndarray | None
    dtype: np.dtype
    solver: Any
    plan: KeepPlan
    layout: Any
    settings: dict[str, str]
    per_traj: int


def _setup(model, spec, kw) -> _Setup:
    if not isinstance(model, Model):
        raise TypeError(f"sweep expects a difsim.Model instance, got {type(model).__name__}")
    if not isinstance(spec, AbstractSweep):
        raise TypeError(
            "sweep expects a spec (ds.GridSweep, ds.ZipSweep or ds.RandomSweep), got "
            f"{type(spec).__name__}"
        )
    spec.check(model)
    t0, t1, save, ts, n_saved, save_text = _check_times(kw["t0"], kw["t1"], kw["save"])
    kw.update(resolve_solver_settings(type(model), **{k: kw[k] for k in KEYS}))
    solver = kw["solver"]
    solvers.make_solver(solver)  # unknown names fail here, before anything compiles
    # Defaults spelt out, so that a config (which stores them) and a Python call that leaves
    # them out are the same sweep: same hash, same compiled function.
    kw["controller"] = default_controller(solver, kw["controller"])
    state = model.initial_state()
    dtype = np.dtype(jnp.result_type(*[jnp.asarray(v) for v in state.values.values()]))
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(jnp.result_type(float))
    plan = plan_keep(kw["keep"], type(model), state, n_saved, save_text)
    outputs = plan.outputs(model, n_saved, dtype)
    layout = build_layout(model, spec, outputs, plan, t0, t1, save, ts, n_saved, dtype, solver, kw)
    described = settings(model, spec, t0, t1, save_text, ts, solver, plan, dtype, kw)
    layout.attrs["sweep_hash"] = settings_hash(described)
    layout.attrs["sweep_settings"] = json.dumps(described, sort_keys=True)
    per_traj = bytes_per_trajectory(model, outputs, n_saved, dtype)
    return _Setup(t0, t1, save, ts, dtype, solver, plan, layout, described, per_traj)


def _chunk_size(spec, setup: _Setup, kw, n_dev: int, output: Path | None) -> int:
    budget = kw["memory_budget"]
    budget = DEFAULT_MEMORY_BUDGET if budget is None else parse_bytes(budget, "memory_budget")
    cpu = all(d.platform == "cpu" for d in (kw["devices"] or jax.devices()))
    size = choose_chunk_size(spec.size, n_dev, setup.per_traj, budget, kw["chunk_size"], cpu=cpu)
    old = None if output is None else ChunkStore.peek_chunk_size(output)
    if kw["chunk_size"] is None and old is not None and old != size and old % n_dev == 0:
        size = old  # resuming on another device count: keep the chunk boundaries
    return size


def _compute(model, spec, setup: _Setup, kw, mesh, size, todo, store, arrays, bar) -> None:
    """Run chunks `todo`; store each (or fill `arrays`) as it finishes."""
    run = _compiled(mesh)
    rep, batch = NamedSharding(mesh, PartitionSpec()), dist.batch_sharding(mesh)
    model_dyn, model_static = eqx.partition(model, eqx.is_array)
    place = lambda x: None if x is None else dist.to_global(np.asarray(x), rep)  # noqa: E731
    model_dyn = jax.tree.map(place, model_dyn)
    times = [place(np.asarray(setup.t0, setup.dtype)), place(np.asarray(setup.t1, setup.dtype))]
    times.append(place(None if setup.ts is None else setup.ts.astype(setup.dtype)))
    leaves, treedef = jax.tree.flatten(model_static)
    static = _Static((treedef, tuple(leaves)), spec.keys, setup.save, setup.solver,
                     float(kw["rtol"]), float(kw["atol"]),
                     None if kw["dt0"] is None else float(kw["dt0"]), kw["controller"],
                     int(kw["max_steps"]), setup.plan)  # fmt: skip
    dtypes = {name: dt for name, (_, _, dt, _) in setup.layout.variables.items()}

    def launch(i):
        n = _valid(i, size, spec.size)
        pts = spec.points(i * size, i * size + n, setup.dtype)
        # The last chunk is padded by repeating its last point: one compiled shape.
        pts = {k: np.concatenate([v, np.repeat(v[-1:], size - n)]) for k, v in pts.items()}
        pts = {k: dist.to_global(v, batch) for k, v in pts.items()}
        return run(model_dyn, *times, pts, static)

    def finish(i, out):
        n = _valid(i, size, spec.size)
        # Cast to the layout's dtypes: what the file and a resumed run expect, whatever the
        # model's observables returned.
        # One gather for all variables: one collective per chunk in a multi-process run.
        host = {k: v[:n].astype(dtypes[k], copy=False) for k, v in dist.to_host(out).items()}
        if store is not None:
            store.write(i, host)
        elif arrays is not None:
            for k, v in host.items():
                arrays[k][i * size : i * size + n] = v
        bar.update(n)
        if _after_chunk is not None:
            _after_chunk(i)

    pending = None
    for i in todo:
        # Dispatch the next chunk before fetching the previous one: the host work
        # (transfer, writing) overlaps the device work.
        launched = (i, launch(i))
        if pending is not None:
            finish(*pending)
        pending = launched
    if pending is not None:
        finish(*pending)


def _assemble(output: Path, layout, store: ChunkStore) -> dict[int, int]:
    """Stream every stored chunk into the netCDF file; return the status counts."""
    counted: dict[int, int] = {}
    size = store.chunk_size

    def chunks():
        for i in range(store.n_chunks):
            n = _valid(i, size, store.n_points)
            data = store.read(i, n)
            if data is None:
                raise RuntimeError(f"chunk {i} of {store.directory} vanished or is corrupt")
            for code, count in status_counts(data["status"]).items():
                counted[code] = counted.get(code, 0) + count
            yield i * size, i * size + n, data

    write_netcdf(output, layout, chunks(), lambda: count_attrs(counted))
    store.remove()
    return counted


# ---------------------------------------------------------------- chunking


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
) -> int:
    """Trajectories per chunk: `chunk_size` if given, else `min(budget / per_traj,
    max(1024, n / 32), n)`; always a multiple of `n_devices` (rounded up).

    On CPU (`cpu=True`) at most 1024 per device: a vmapped solve's working set then stays
    in cache, 2–5x faster per trajectory than large chunks (docs/sweeps.md, scaling)."""
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
        return _round_up(int(chunk_size), n_devices)
    cap = max(n_devices, budget // per_traj // n_devices * n_devices)
    target = _round_up(max(MIN_CHUNK, math.ceil(n / TARGET_CHUNKS)), n_devices)
    if cpu:
        target = min(target, MIN_CHUNK * n_devices)
    return min(cap, target, _round_up(n, n_devices))


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _valid(i: int, size: int, n: int) -> int:
    return min(size, n - i * size)


_BYTE_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def parse_bytes(value: int | str, what: str = "memory_budget") -> int:
    """`"512MiB"` → 536870912; `"2GB"` → 2e9; an int is a number of bytes."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value > 0:
        return int(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _BYTE_UNITS and float(m.group(1)) > 0:
            return max(1, int(float(m.group(1)) * _BYTE_UNITS[m.group(2).lower()]))
    raise ValueError(
        f"{what}: expected a positive number of bytes or a size like '512MiB', '2GB', "
        f"'1GiB' (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got {value!r}"
    )


# ---------------------------------------------------------------- checks and metadata


def _check_times(t0, t1, save):
    try:
        t0, t1 = float(t0), float(t1)
    except (TypeError, ValueError):
        raise ValueError(f"t0 and t1 must be numbers, got t0={t0!r}, t1={t1!r}") from None
    if not (math.isfinite(t0) and math.isfinite(t1) and t1 > t0):
        raise ValueError(f"t1 must be greater than t0 (both finite), got t0={t0}, t1={t1}")
    if isinstance(save, str):
        if save != "final":
            raise ValueError(f"save must be 'final', a number of points or times, got {save!r}")
        return t0, t1, "final", None, 1, "'final'"
    if isinstance(save, int | np.integer) and not isinstance(save, bool):
        if save < 1:
            raise ValueError(f"save must be at least 1 point, got {save}")
        if save == 1:
            return t0, t1, "final", None, 1, "1"
        return t0, t1, int(save), None, int(save), str(int(save))
    ts = np.asarray(save, dtype=np.float64)
    if ts.ndim != 1 or ts.size == 0 or not np.all(np.isfinite(ts)):
        raise ValueError(f"save times must be a non-empty 1-D array of finite times, got {save!r}")
    if ts.size > 1 and not np.all(np.diff(ts) > 0):
        raise ValueError("save times must be strictly increasing")
    if ts[0] < t0 or ts[-1] > t1:
        raise ValueError(f"save times must lie in [t0, t1] = [{t0}, {t1}]")
    return t0, t1, None, ts, ts.size, f"[{ts.size} times]"


def _open(path: Path) -> xr.Dataset:
    return xr.open_dataset(path, engine="h5netcdf")


def _progress(total: int, initial: int, show: bool):
    """A tqdm bar over trajectories (rate, ETA), or a stand-in that shows nothing."""
    if not show:
        return contextlib.nullcontext(_NoBar())
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit="traj", unit_scale=True, desc="sweep",
                smoothing=0.1, file=sys.stderr)  # fmt: skip


class _NoBar:
    def update(self, n):
        pass
