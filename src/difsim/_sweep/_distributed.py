"""Devices, meshes and processes: the one place that knows about `jax.distributed`.

A sweep's batch axis is sharded over every device JAX can see: all local devices in one
process, or every device of every process once the process has joined a multi-process run
([`maybe_initialize_from_env`][]). Each process holds the (small) parameter arrays of a
chunk in full and places only its own shards ([`to_global`][]); the results are gathered
back to every process ([`to_host`][]), and one process, 0, writes them ([`is_writer`][]).

**Launching a multi-process run.** Start the same command once per process (one per node,
or one per GPU). Joining is `jax.distributed.initialize()`, which reads the cluster's own
settings (coordinator, process count and index) under SLURM's `srun`, Open MPI's `mpirun`
and on TPU pods. What it lacks, and this module adds:

- *whether* to join: JAX joins whenever asked, so a plain single-process run must not ask.
  A launch is a SLURM job step (`SLURM_STEP_NODELIST`; a batch script or `salloc` shell is
  one process) or an Open MPI job with more than one process;
- settings by hand for any other launcher, through variables JAX has no equivalent of:
  `DIFSIM_COORDINATOR=host:port` (process 0's address and a free port),
  `DIFSIM_NUM_PROCESSES=N` and `DIFSIM_PROCESS_ID=0..N-1`, checked, with errors naming the
  variable. They win over a cluster's, and then each process sees all its local devices
  (`JAX_LOCAL_DEVICE_IDS` or `CUDA_VISIBLE_DEVICES` restrict them), where JAX's cluster
  detection would give each process one GPU (numbered by its local rank).
"""

import dataclasses
import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"
ENV_COORDINATOR = "DIFSIM_COORDINATOR"
ENV_NUM_PROCESSES = "DIFSIM_NUM_PROCESSES"
ENV_PROCESS_ID = "DIFSIM_PROCESS_ID"

# Launchers whose settings `jax.distributed.initialize()` reads itself: (name, variables
# that say this process was started by it, the variable holding the number of processes).
# JAX only needs the first; the count tells a multi-process launch from a single process.
_CLUSTERS = (
    ("SLURM", ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_PROCID"), "SLURM_NTASKS"),
    ("Open MPI", ("OMPI_MCA_orte_hnp_uri", "OMPI_COMM_WORLD_RANK"), "OMPI_COMM_WORLD_SIZE"),
)


@dataclasses.dataclass(frozen=True)
class Launch:
    """How this process joins a multi-process run; `None` fields are left to JAX's cluster
    detection (SLURM, Open MPI)."""

    coordinator_address: str | None
    num_processes: int | None
    process_id: int | None
    source: str  # where the settings came from, for messages: "DIFSIM_*", "SLURM", ...


def _env_int(environ: Mapping[str, str], key: str) -> int:
    text = environ[key]
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {key} must be an integer, got {text!r}") from None


def launch_from_env(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The multi-process launch this environment describes, or `None` for a single process.

    `DIFSIM_NUM_PROCESSES > 1` (with `DIFSIM_COORDINATOR` and `DIFSIM_PROCESS_ID`) wins;
    else a SLURM job step (started with `srun`: `SLURM_STEP_NODELIST` is set) or an Open
    MPI job of more than one process, whose settings JAX reads itself.

    **Raises:** `ValueError` naming the variable when the `DIFSIM_*` settings are incomplete
    or inconsistent.
    """
    env = os.environ if environ is None else environ
    if ENV_NUM_PROCESSES in env:
        n = _env_int(env, ENV_NUM_PROCESSES)
        if n < 1:
            raise ValueError(f"{ENV_NUM_PROCESSES} must be at least 1, got {n}")
        if n == 1:
            return None
        missing = [k for k in (ENV_COORDINATOR, ENV_PROCESS_ID) if not env.get(k)]
        if missing:
            raise ValueError(
                f"{ENV_NUM_PROCESSES}={n} also needs {' and '.join(missing)} "
                f"(process 0's host:port, and this process's index 0..{n - 1})"
            )
        pid = _env_int(env, ENV_PROCESS_ID)
        if not 0 <= pid < n:
            raise ValueError(f"{ENV_PROCESS_ID} must be in 0..{n - 1}, got {pid}")
        address = env[ENV_COORDINATOR]
        _check_address(address, ENV_COORDINATOR)
        return Launch(address, n, pid, "DIFSIM_*")
    for name, present, count in _CLUSTERS:
        if all(k in env for k in (*present, count)) and _env_int(env, count) > 1:
            return Launch(None, None, None, name)
    return None


def _check_address(address: str, what: str) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{what} must be 'host:port' (e.g. 'node001:12355'), got {address!r}")


def maybe_initialize_from_env(enable: bool | None = None, *, timeout: int = 300) -> bool:
    """Join a multi-process run if the environment asks for one, before any JAX computation
    in this process (even `jax.devices()`); `difsim run` calls it first thing.

    `enable=None` (default) joins when [`launch_from_env`][] finds a launch; `True` also
    joins without one, leaving the settings to JAX's detection (e.g. `mpi4py`); `False`
    never joins. `timeout`: seconds to wait for every process to connect. Calling it again
    in a process that has joined is a no-op.

    **Returns:** whether this process is now part of a multi-process run.

    **Raises:** `ValueError` for incomplete `DIFSIM_*` settings, or with `enable=True` and
    nothing to read settings from; JAX's `RuntimeError` if this process has already
    started JAX.
    """
    if enable is False:
        return False
    if jax.distributed.is_initialized():
        return True
    launch = launch_from_env()
    if launch is None and not enable:
        return False
    try:
        # Only affects the CPU backend (GPU/TPU collectives are their own) and must be set
        # before the backend starts. gloo is the default since jax 0.4.3x; older versions
        # lack the option (and then cannot run CPU collectives across processes at all).
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except AttributeError:
        pass
    if launch is not None and launch.source == "DIFSIM_*":
        jax.distributed.initialize(
            launch.coordinator_address,
            launch.num_processes,
            launch.process_id,
            # All given: no cluster detection, which would also restrict each process to
            # one GPU. JAX_LOCAL_DEVICE_IDS (read by JAX itself) still restricts devices.
            cluster_detection_method="deactivate",
            initialization_timeout=timeout,
        )
        return jax.process_count() > 1
    try:
        jax.distributed.initialize(initialization_timeout=timeout)
    except ValueError as e:  # JAX found no cluster environment to read settings from
        raise ValueError(
            "asked to join a multi-process run, but found no settings: set "
            f"{ENV_COORDINATOR}, {ENV_NUM_PROCESSES} and {ENV_PROCESS_ID}, or start the "
            f"processes with srun or mpirun ({e})"
        ) from None
    return jax.process_count() > 1


def batch_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named `"batch"` over `devices` (default: every device of every process).

    In a multi-process run the mesh must include devices of every process: a process
    without one could neither place its share of the inputs nor see the results.
    """
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("devices must name at least one device")
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices lists a device twice: {devices}")
    if jax.process_count() > 1:
        missing = set(range(jax.process_count())) - {d.process_index for d in devices}
        if missing:
            raise ValueError(
                f"in a {jax.process_count()}-process run the devices must include some of "
                f"every process; none of process(es) {sorted(missing)} (use devices=None)"
            )
    return Mesh(np.asarray(devices), (BATCH_AXIS,))


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Sharding that splits an array's leading (batch) axis over the mesh."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXIS))


def to_global(host: Any, sharding: NamedSharding) -> Any:
    """Global arrays from host arrays (a pytree) that every process holds in full.

    With [`batch_sharding`][] each leaf's leading axis is split over the mesh (its length
    must be a multiple of the number of devices); with a replicated sharding
    (`PartitionSpec()`) every device gets the whole leaf. 0-d leaves are always replicated.
    Each process places only its own shards, so nothing crosses between processes.
    """
    replicated = NamedSharding(sharding.mesh, PartitionSpec())
    splits = _leading_splits(sharding)

    def place(leaf):
        leaf = np.asarray(leaf)
        dtype = jax.dtypes.canonicalize_dtype(leaf.dtype)
        leaf = leaf.astype(dtype, copy=False)
        if leaf.ndim == 0:
            return jax.make_array_from_callback((), replicated, lambda i: leaf, dtype=dtype)
        if leaf.shape[0] % splits:
            raise ValueError(
                f"a batch of {leaf.shape[0]} cannot be split evenly over {splits} devices: "
                f"pad the chunk to a multiple of {splits}"
            )
        return jax.make_array_from_callback(leaf.shape, sharding, lambda i: leaf[i], dtype=dtype)

    return jax.tree.map(place, host)


def _leading_splits(sharding: NamedSharding) -> int:
    """Into how many pieces `sharding` cuts an array's leading axis."""
    spec = sharding.spec
    if not spec or spec[0] is None:
        return 1
    names = spec[0] if isinstance(spec[0], tuple) else (spec[0],)
    return math.prod(sharding.mesh.shape[name] for name in names)


def to_host(tree: Any) -> Any:
    """The full value of every (possibly multi-process, sharded) array of a pytree, as NumPy
    arrays on every process.

    Arrays that span processes are gathered in one collective (every process must call
    this, with arrays of the same shapes).
    """
    leaves, treedef = jax.tree.flatten(tree)
    if jax.process_count() == 1:  # every array is addressable here
        # Rebuilt by hand, not by `jax.tree.map`, whose Python layers cost ~0.05 ms more on
        # the cold caches a repeated sweep fetches its results on.
        return treedef.unflatten([np.asarray(x) for x in leaves])
    out: list[Any] = list(leaves)
    remote = []
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, jax.Array):
            out[i] = np.asarray(leaf)
        elif leaf.is_fully_addressable:
            out[i] = np.asarray(leaf)
        elif leaf.is_fully_replicated:
            out[i] = np.asarray(leaf.addressable_data(0))
        else:
            remote.append(i)
    if remote:
        gathered = multihost_utils.process_allgather([leaves[i] for i in remote], tiled=True)
        for i, value in zip(remote, gathered, strict=True):
            out[i] = np.asarray(value)
    return jax.tree.unflatten(treedef, out)


def is_writer() -> bool:
    """Whether this process writes outputs (process 0; always true in a single process)."""
    return jax.process_index() == 0


def broadcast_from_writer(tree: Any) -> Any:
    """Process 0's value of a pytree of arrays (same shapes everywhere), on every process.

    For decisions every process must take alike, such as which chunks a resumed sweep still
    has to compute: only the writer reads its store, the others follow. A no-op in a single
    process.
    """
    if jax.process_count() == 1:
        return tree
    return multihost_utils.broadcast_one_to_all(tree)


def barrier(name: str) -> None:
    """Wait until every process reaches the barrier `name` (a no-op in a single process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def check_same_everywhere(text: str, what: str) -> None:
    """Raise `ValueError` on every process unless all processes pass the same `text`.

    Processes that disagree (say, on a sweep's settings, because their config files differ)
    would otherwise run different programs in lockstep and hang or mix results. A no-op in
    a single process.
    """
    if jax.process_count() == 1:
        return
    digest = np.frombuffer(hashlib.sha256(text.encode()).digest(), dtype=np.uint8)
    every = np.asarray(multihost_utils.process_allgather(digest))  # (processes, 32)
    differ = [i for i in range(every.shape[0]) if not np.array_equal(every[i], every[0])]
    if differ:
        raise ValueError(
            f"the processes of this run disagree on {what}: process(es) {differ} differ from "
            "process 0 (every process must run the same command on the same files)"
        )
