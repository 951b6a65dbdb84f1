"""`difsim._sweep._distributed`: meshes, global arrays and process launch settings.

In-process tests use the 8 fake CPU devices of conftest.py; `test_two_processes` starts two
real processes on 127.0.0.1 (gloo collectives, 2 fake devices each). `run_processes` is
shared with the multi-process sweep tests.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

from difsim._sweep import _distributed as dd

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ multi-process launcher
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_processes(
    script: Path,
    args: list[str],
    *,
    num_processes: int = 2,
    devices_per_process: int = 2,
    timeout: float = 120.0,
    env: dict[str, str] | None = None,
    launcher: str = "difsim",
) -> list[tuple[int, str]]:
    """Run `python script *args` as `num_processes` processes of one JAX distributed run on
    127.0.0.1: settings through the `DIFSIM_*` variables, or (`launcher="slurm"`) as `srun`
    would set them for one job step, left to JAX's cluster detection.

    Every process is killed at the latest after `timeout` seconds (a crashed peer leaves
    the others waiting on a collective). One retry on a new port if the coordinator's port
    was taken in between.

    **Returns:** `[(returncode, stdout + stderr)]` per process.
    """
    for attempt in range(2):
        port = free_port()
        results = _launch(
            script, args, port, num_processes, devices_per_process, timeout, env, launcher
        )
        if attempt == 0 and any("ddress already in use" in out for _, out in results):
            continue
        return results
    return results


def _launch(script, args, port, n, per_process, timeout, extra_env, launcher):
    # Launch settings stripped; the suite's other DIFSIM_* settings (no compilation cache,
    # conftest.py) kept.
    clean = ("SLURM_", "OMPI_", "JAX_COORDINATOR", dd.ENV_COORDINATOR, dd.ENV_NUM_PROCESSES,
             dd.ENV_PROCESS_ID)  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith(clean)}
    base.update(
        XLA_FLAGS=f"--xla_force_host_platform_device_count={per_process}",
        JAX_PLATFORMS="cpu",
        **(extra_env or {}),
    )
    if launcher == "slurm":
        base.update(SLURM_JOB_ID="4242", SLURM_STEP_NODELIST="127.0.0.1", SLURM_NTASKS=str(n))
        base.update(JAX_COORDINATOR_PORT=str(port))  # JAX's override of its port rule
        own = lambda pid: {"SLURM_PROCID": str(pid), "SLURM_LOCALID": str(pid)}  # noqa: E731
    else:
        base.update(DIFSIM_COORDINATOR=f"127.0.0.1:{port}", DIFSIM_NUM_PROCESSES=str(n))
        own = lambda pid: {"DIFSIM_PROCESS_ID": str(pid)}  # noqa: E731
    procs, logs = [], []
    try:
        for pid in range(n):
            log = tempfile.TemporaryFile("w+")
            logs.append(log)
            procs.append(
                subprocess.Popen(
                    [sys.executable, str(script), *args],
                    env={**base, **own(pid)},
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + timeout
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
    finally:
        for proc in procs:  # only our own children, each by its id
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    out = []
    for proc, log in zip(procs, logs, strict=True):
        log.seek(0)
        out.append((proc.returncode, log.read()))
        log.close()
    return out


def check_ok(results: list[tuple[int, str]]) -> None:
    for pid, (code, log) in enumerate(results):
        assert code == 0, f"process {pid} exited with {code}:\n{log[-4000:]}"


# ------------------------------------------------------------------ mesh and sharding
def test_batch_mesh_spans_all_devices():
    mesh = dd.batch_mesh()
    assert mesh.axis_names == (dd.BATCH_AXIS,)
    assert mesh.devices.size == len(jax.devices()) == 8
    one = dd.batch_mesh([jax.devices()[3]])
    assert one.devices.size == 1 and one.devices.flat[0] == jax.devices()[3]


def test_batch_mesh_rejects_bad_devices():
    with pytest.raises(ValueError, match="at least one device"):
        dd.batch_mesh([])
    d = jax.devices()
    with pytest.raises(ValueError, match="twice"):
        dd.batch_mesh([d[0], d[1], d[0]])


def test_sharding_splits_leading_axis():
    sharding = dd.batch_sharding(dd.batch_mesh())
    host = np.arange(16 * 3, dtype=np.float64).reshape(16, 3)
    array = dd.to_global(host, sharding)
    assert array.shape == (16, 3) and array.dtype == jnp.float64
    assert len(array.sharding.device_set) == 8
    assert array.sharding.shard_shape(array.shape) == (2, 3)
    rows = set()
    for shard in array.addressable_shards:
        start = shard.index[0].start
        rows.add(start)
        assert shard.index[1] == slice(None)
        np.testing.assert_array_equal(np.asarray(shard.data), host[start : start + 2])
    assert rows == set(range(0, 16, 2))


def test_round_trip_through_a_sharded_computation():
    sharding = dd.batch_sharding(dd.batch_mesh())
    host = {"a": np.linspace(0.0, 3.0, 24).reshape(8, 3), "k": np.arange(8), "s": 2.5}
    arrays = dd.to_global(host, sharding)
    assert arrays["s"].sharding.is_fully_replicated
    np.testing.assert_array_equal(dd.to_host(arrays)["a"], host["a"])

    @jax.jit
    def f(t):
        return {"y": jnp.sin(t["a"]) * t["s"], "k2": t["k"] * 2, "total": jnp.sum(t["a"])}

    out = f(arrays)
    assert len(out["y"].sharding.device_set) == 8  # the computation itself ran sharded
    back = dd.to_host(out)
    assert all(isinstance(v, np.ndarray) for v in back.values())
    np.testing.assert_allclose(back["y"], np.sin(host["a"]) * 2.5, rtol=1e-15)
    np.testing.assert_array_equal(back["k2"], 2 * np.arange(8))
    np.testing.assert_allclose(back["total"], host["a"].sum(), rtol=1e-14)


def test_to_global_needs_a_multiple_of_the_device_count():
    sharding = dd.batch_sharding(dd.batch_mesh())
    with pytest.raises(ValueError, match="multiple of 8"):
        dd.to_global(np.zeros(12), sharding)


def test_to_global_replicated_takes_any_length():
    mesh = dd.batch_mesh()
    replicated = NamedSharding(mesh, PartitionSpec())
    times = dd.to_global(np.linspace(0.0, 1.0, 5), replicated)  # 5 save times, 8 devices
    assert times.sharding.is_fully_replicated and len(times.sharding.device_set) == 8
    np.testing.assert_array_equal(dd.to_host(times), np.linspace(0.0, 1.0, 5))


def test_to_global_follows_x64_setting():
    sharding = dd.batch_sharding(dd.batch_mesh(jax.devices()[:2]))
    with jax.enable_x64(False):
        array = dd.to_global(np.arange(4.0), sharding)
    assert array.dtype == jnp.float32


def test_single_process_helpers():
    assert dd.is_writer()
    tree = {"x": np.arange(3)}
    assert dd.broadcast_from_writer(tree) is tree
    dd.barrier("noop")  # returns at once in one process
    dd.check_same_everywhere("anything", "settings")


# ------------------------------------------------------------------ launch settings
def test_launch_from_difsim_variables():
    env = {"DIFSIM_COORDINATOR": "node7:1234", "DIFSIM_NUM_PROCESSES": "4"}
    launch = dd.launch_from_env({**env, "DIFSIM_PROCESS_ID": "3"})
    assert launch == dd.Launch("node7:1234", 4, 3, "DIFSIM_*")
    assert dd.launch_from_env({"DIFSIM_NUM_PROCESSES": "1"}) is None
    assert dd.launch_from_env({}) is None


@pytest.mark.parametrize(
    "env, culprit",
    [
        ({"DIFSIM_NUM_PROCESSES": "2", "DIFSIM_PROCESS_ID": "0"}, "DIFSIM_COORDINATOR"),
        ({"DIFSIM_NUM_PROCESSES": "2", "DIFSIM_COORDINATOR": "h:1"}, "DIFSIM_PROCESS_ID"),
        ({"DIFSIM_NUM_PROCESSES": "two"}, "DIFSIM_NUM_PROCESSES"),
        ({"DIFSIM_NUM_PROCESSES": "0"}, "DIFSIM_NUM_PROCESSES"),
        (
            {"DIFSIM_NUM_PROCESSES": "2", "DIFSIM_COORDINATOR": "h:1", "DIFSIM_PROCESS_ID": "2"},
            "DIFSIM_PROCESS_ID",
        ),
        (
            {"DIFSIM_NUM_PROCESSES": "2", "DIFSIM_COORDINATOR": "h", "DIFSIM_PROCESS_ID": "1"},
            "DIFSIM_COORDINATOR",
        ),
    ],
)
def test_launch_errors_name_the_variable(env, culprit):
    with pytest.raises(ValueError, match=culprit):
        dd.launch_from_env(env)


def test_launch_from_slurm():
    step = {"SLURM_JOB_ID": "42", "SLURM_NTASKS": "4", "SLURM_PROCID": "1", "SLURM_LOCALID": "1"}
    step["SLURM_STEP_NODELIST"] = "gpu[01-02]"
    assert dd.launch_from_env(step) == dd.Launch(None, None, None, "SLURM")
    # One task, or the batch script itself (no job step): a single process.
    assert dd.launch_from_env({**step, "SLURM_NTASKS": "1"}) is None
    batch_script = {k: v for k, v in step.items() if k != "SLURM_STEP_NODELIST"}
    assert dd.launch_from_env(batch_script) is None
    # Explicit DIFSIM_* settings win over SLURM's.
    explicit = {**step, "DIFSIM_NUM_PROCESSES": "1"}
    assert dd.launch_from_env(explicit) is None


def test_launch_from_open_mpi():
    job = {"OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.0.0.1:34911"}
    job.update(OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_RANK="2")
    assert dd.launch_from_env(job) == dd.Launch(None, None, None, "Open MPI")
    assert dd.launch_from_env({**job, "OMPI_COMM_WORLD_SIZE": "1"}) is None
    with pytest.raises(ValueError, match="OMPI_COMM_WORLD_SIZE must be an integer"):
        dd.launch_from_env({**job, "OMPI_COMM_WORLD_SIZE": "four"})


def test_no_join_without_launch_settings(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("SLURM_", "DIFSIM_")):
            monkeypatch.delenv(key)
    assert dd.maybe_initialize_from_env() is False
    monkeypatch.setenv("DIFSIM_NUM_PROCESSES", "2")
    assert dd.maybe_initialize_from_env(False) is False


# One fresh process for both checks below: the imports, each shipped config checked (JAX's
# backend state printed after each step), then the join asked for last.
UNSTARTED = """\
import contextlib, io, sys
import difsim, difsim.models, difsim.solvers, difsim._app._cli, difsim._app._run
from jax._src import xla_bridge
print('started by the imports:', xla_bridge.backends_are_initialized())
for path in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert difsim._app._cli.main(['check', path]) == 0, path
    print(f'started by checking {path}:', xla_bridge.backends_are_initialized())
try:
    difsim._sweep._distributed.maybe_initialize_from_env(True)
except ValueError as e:
    print('ERROR', e)
"""
SHIPPED_CONFIGS = sorted(str(p) for p in (ROOT / "experiments").glob("*.toml"))


@pytest.fixture(scope="module")
def unstarted() -> list[str]:
    return _fresh_process(UNSTARTED, *SHIPPED_CONFIGS).splitlines()


def test_importing_difsim_leaves_jax_unstarted(unstarted):
    # A process can only join a multi-process run before JAX starts its backend, and
    # `difsim run` joins after importing difsim: no module may compute at import time.
    # Then, asked to join with no launch settings at all, it says what is missing.
    assert unstarted[0] == "started by the imports: False"
    (error,) = [line for line in unstarted if line.startswith("ERROR")]
    assert error.startswith("ERROR asked to join a multi-process run, but found no settings")
    assert "DIFSIM_COORDINATOR" in error


def test_checking_a_shipped_config_leaves_jax_unstarted(unstarted):
    # `difsim run` loads (and checks) its config before joining: building a stochastic
    # model, the SDE save-time check and a fit's data check must all stay on the host.
    assert len(SHIPPED_CONFIGS) > 20  # each checked, in turn, leaving JAX unstarted:
    checks = [f"started by checking {path}: False" for path in SHIPPED_CONFIGS]
    assert unstarted[1 : 1 + len(checks)] == checks


def _fresh_process(code: str, *args: str) -> str:
    """The stdout of `code` run in a new Python process (no launch settings in its
    environment); fails the test if it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "DIFSIM_", "OMPI"))}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_joining_after_jax_started_explains(monkeypatch):
    jax.devices()  # the backend is up in this process
    for key in list(os.environ):
        if key.startswith(("SLURM_", "DIFSIM_", "OMPI_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DIFSIM_NUM_PROCESSES", "2")
    monkeypatch.setenv("DIFSIM_PROCESS_ID", "0")
    monkeypatch.setenv("DIFSIM_COORDINATOR", "127.0.0.1")
    with pytest.raises(ValueError, match="DIFSIM_COORDINATOR must be 'host:port'"):
        dd.maybe_initialize_from_env()
    monkeypatch.setenv("DIFSIM_COORDINATOR", "127.0.0.1:1")
    # JAX's own check, in its own words: joining must come before any computation.
    with pytest.raises(RuntimeError, match="must be called before any JAX calls"):
        dd.maybe_initialize_from_env()
    assert not jax.distributed.is_initialized()


# ------------------------------------------------------------------ two real processes
WORKER = textwrap.dedent(
    """
    import json, sys
    from difsim._sweep import _distributed as dd

    joined = dd.maybe_initialize_from_env()  # DIFSIM_* variables, before any JAX work
    import jax, jax.numpy as jnp, numpy as np

    jax.config.update("jax_enable_x64", True)
    mesh = dd.batch_mesh()
    try:
        dd.batch_mesh(jax.local_devices())
        local_mesh_error = None
    except ValueError as e:
        local_mesh_error = str(e)
    host = {"a": np.linspace(0.0, 3.0, 24).reshape(8, 3), "s": 2.5}
    arrays = dd.to_global(host, dd.batch_sharding(mesh))
    rows = sorted(int(s.index[0].start) for s in arrays["a"].addressable_shards)
    out = jax.jit(lambda t: {"y": jnp.sin(t["a"]) * t["s"], "total": jnp.sum(t["a"])})(arrays)
    back = dd.to_host(out)
    first = dd.broadcast_from_writer(np.array([jax.process_index() + 10]))
    dd.check_same_everywhere("the same settings", "settings")
    try:
        dd.check_same_everywhere(f"settings of process {jax.process_index()}", "settings")
        disagreement = None
    except ValueError as e:
        disagreement = str(e)
    dd.barrier("done")
    print("RESULT " + json.dumps(dict(
        joined=joined, count=jax.process_count(), index=jax.process_index(),
        writer=dd.is_writer(), mesh=int(mesh.devices.size), rows=rows,
        devices=len(out["y"].sharding.device_set), y=back["y"].tolist(),
        total=float(back["total"]), first=int(first[0]), local_mesh_error=local_mesh_error,
        disagreement=disagreement,
    )))
    """
)


@pytest.mark.parametrize("launcher", ["difsim", "slurm"])
def test_two_processes(tmp_path, launcher):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    results = run_processes(
        script, [], num_processes=2, devices_per_process=2, timeout=90, launcher=launcher
    )
    check_ok(results)
    reports = [json.loads(log.split("RESULT ", 1)[1].splitlines()[0]) for _, log in results]
    host = np.linspace(0.0, 3.0, 24).reshape(8, 3)
    for pid, r in enumerate(reports):
        assert r["joined"] and r["count"] == 2 and r["index"] == pid
        assert r["writer"] == (pid == 0)
        assert r["mesh"] == 4 and r["devices"] == 4
        # Each process placed only its own half of the batch ...
        assert r["rows"] == ([0, 2] if pid == 0 else [4, 6])
        # ... and every process got the whole result back.
        np.testing.assert_allclose(np.array(r["y"]), np.sin(host) * 2.5, rtol=1e-15)
        np.testing.assert_allclose(r["total"], host.sum(), rtol=1e-14)
        assert r["first"] == 10
        assert "process(es) [" in r["local_mesh_error"]
        assert "disagree on settings: process(es) [1]" in r["disagreement"]
