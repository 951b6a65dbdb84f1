"""A sweep run by 2 processes (JAX distributed, gloo on 127.0.0.1) equals the one-process run.

Each process has 2 fake CPU devices, so each chunk is sharded over 4 devices in 2
processes. Both processes run the same `ds.sweep` with the same output path; process 0
creates the zarr store, each process writes its share of the chunks into it, and process 0
assembles the netCDF file. The distributed sweep is first interrupted after two chunks (in
both processes, through `run_sweep`'s `on_chunk` callback), then rerun: it must reuse those
chunks, compute the rest and write the same file as a single process with one device; with a
store only process 0 can reach, process 0 writes every chunk, and the same file. Scipy checks
a few trajectories independently. Last, `difsim run CONFIG` started twice with the
`DIFSIM_*` variables must be one 2-process sweep too.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest
import xarray as xr

import difsim as ds

from .test_distributed import ROOT, check_ok, run_processes
from .test_sweep_sharding import assert_same_results
from .test_sweep_store import done_chunks

pytestmark = pytest.mark.skipif(
    not hasattr(ds, "sweep"), reason="difsim.sweep (src/difsim/_sweep.py) has not landed yet"
)

RHO = np.linspace(0.0, 21.0, 19)
BETA = np.array([1.0, 8.0 / 3.0])
CHUNKS = 5  # 38 points in chunks of 8 (a multiple of the 4 devices); the last one padded

WORKER = textwrap.dedent(
    """
    import json, sys
    from difsim._sweep import _distributed as dd

    joined = dd.maybe_initialize_from_env()  # before any JAX work
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import difsim as ds
    from difsim._sweep import run_sweep
    from difsim._sweep._store import ChunkStore

    # Which chunks this process writes into the shared store (each its share).
    wrote, write = [], ChunkStore.write
    def recording(self, i, arrays):
        if self.writes(i):
            wrote.append(i)
        write(self, i, arrays)
    ChunkStore.write = recording

    out, mode = sys.argv[1], sys.argv[2]
    spec = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 19), "beta": [1.0, 8.0 / 3.0]})
    kw = dict(t0=0.0, t1=1.0, save="final", keep=None, solver=None, rtol=1e-8, atol=1e-8,
              dt0=None, controller=None, max_steps=16384, chunk_size=8, memory_budget=None,
              devices=None, resume=True, overwrite=False, progress=False, attrs=None)
    report = dict(joined=joined, processes=jax.process_count(), devices=jax.device_count(),
                  writer=dd.is_writer())

    class Stop(Exception):
        pass

    if mode == "interrupt":
        def stop(i):
            if i == 1:
                raise Stop
        try:
            run_sweep(ds.models.Lorenz(), spec, output=out + "/sweep.nc", on_chunk=stop, **kw)
        except Stop:
            report["stopped"] = True
    else:
        # "auto": no chunk size given, so the stored one (8) must be kept by every process
        # (only process 0 reads the store).
        auto = dict(chunk_size=None) if sys.argv[3:] == ["auto"] else {}
        result, info = run_sweep(ds.models.Lorenz(), spec, output=out + "/sweep.nc",
                                 **{**kw, **auto})
        report.update(returned=result is not None, reused=info.reused,
                      computed=list(info.computed), wrote=list(wrote))
        # In memory (no output), every process gets the whole Dataset back.
        memory = ds.sweep(ds.models.Lorenz(), spec, **{k: v for k, v in kw.items()
                                                      if k not in ("resume", "overwrite")})
        np.savez(f"{out}/memory_{jax.process_index()}.npz",
                 **{k: np.asarray(v.values) for k, v in memory.data_vars.items()})
        # A store only process 0 can reach (fsspec's memory filesystem is per process):
        # then process 0 writes every chunk.
        wrote.clear()
        run_sweep(ds.models.Lorenz(), spec, output=out + "/fallback.nc",
                  store="memory://difsim-fallback.zarr", **kw)
        report["wrote_fallback"] = list(wrote)
    report.setdefault("wrote", wrote)
    print("RESULT " + json.dumps(report))
    """
)


def _single_process(script, args, timeout=120.0):
    # Launch settings stripped; the suite's other DIFSIM_* settings (no compilation cache,
    # conftest.py) kept.
    launch = ("SLURM_", "DIFSIM_COORDINATOR", "DIFSIM_NUM_PROCESSES", "DIFSIM_PROCESS_ID")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launch)}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=1", JAX_PLATFORMS="cpu")
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, str(script), *args],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log.seek(0)
        return proc.returncode, log.read()


def _report(log: str) -> dict:
    return json.loads(log.split("RESULT ", 1)[1].splitlines()[0])


def _load(path):
    with xr.open_dataset(path) as f:
        return f.load()


@pytest.mark.slow
def test_two_processes_equal_one(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    single, multi = tmp_path / "single", tmp_path / "multi"
    single.mkdir()
    multi.mkdir()

    # 1. Two processes, stopped after chunk 1: chunks 0 and 1 are on disk, no netCDF yet.
    stopped = run_processes(script, [str(multi), "interrupt"])
    check_ok(stopped)
    for pid, (_, log) in enumerate(stopped):
        r = _report(log)
        assert r["stopped"] and r["joined"] and r["processes"] == 2 and r["devices"] == 4
        assert r["writer"] == (pid == 0)
        assert r["wrote"] == [pid]  # chunk i is written by process i mod 2
    assert not (multi / "sweep.nc").exists()
    assert done_chunks(multi / "sweep.nc.zarr") == [0, 1]

    # 2. Rerun without a chunk size: both processes keep the stored one (8), skip the
    # stored chunks and compute the other three.
    results = run_processes(script, [str(multi), "run", "auto"])
    check_ok(results)
    for pid, (_, log) in enumerate(results):
        r = _report(log)
        assert r["reused"] == 2 and r["computed"] == list(range(2, CHUNKS))
        assert r["wrote"] == [i for i in range(2, CHUNKS) if i % 2 == pid]
        assert r["wrote_fallback"] == (list(range(CHUNKS)) if pid == 0 else [])
        assert r["returned"] == (pid == 0)  # with an output, only the writer gets a Dataset

    # 3. The reference: one process, one device.
    code, log = _single_process(script, [str(single), "run"])
    assert code == 0, f"single-process sweep failed ({code}):\n{log[-4000:]}"
    r = _report(log)
    assert not r["joined"] and r["processes"] == 1 and r["computed"] == list(range(CHUNKS))

    reference, distributed = _load(single / "sweep.nc"), _load(multi / "sweep.nc")
    # Written by both processes (and resumed) or by process 0 alone: the same file.
    assert (multi / "fallback.nc").read_bytes() == (multi / "sweep.nc").read_bytes()
    assert dict(distributed.sizes) == {"rho": RHO.size, "beta": BETA.size}
    np.testing.assert_array_equal(distributed["rho"], RHO)
    np.testing.assert_array_equal(distributed["beta"], BETA)
    assert set(distributed.data_vars) == set(reference.data_vars) >= {"x", "y", "z", "status"}
    for var in reference.data_vars:
        assert_same_results(distributed[var].values, reference[var].values, var)
    for pid in range(2):
        returned = np.load(multi / f"memory_{pid}.npz")
        for var in reference.data_vars:
            assert_same_results(returned[var], reference[var].values, var)

    from scipy.integrate import solve_ivp

    for rho, beta in [(RHO[3], 1.0), (21.0, 8.0 / 3.0)]:
        ref = solve_ivp(
            lambda t, u, r=rho, b=beta: [10 * (u[1] - u[0]), u[0] * (r - u[2]) - u[1],
                                         u[0] * u[1] - b * u[2]],
            (0.0, 1.0), [1.0, 0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12,
        )  # fmt: skip
        got = distributed.sel(rho=rho, beta=beta)
        np.testing.assert_allclose(
            [float(got[v]) for v in "xyz"], ref.y[:, -1], rtol=1e-5, atol=1e-6
        )


CONFIG = """
[model]
name = "lorenz"

[time]
t0 = 0.0
t1 = 1.0
save = "final"

[solver]
name = "tsit5"
rtol = 1e-8
atol = 1e-8
dtype = "float64"

[sweep]
rho = { linspace = [0.0, 21.0, 12] }
chunk_size = 4

[output]
plot = false
"""

CLI = "import sys; from difsim._app._cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.slow
def test_cli_two_processes(tmp_path):
    """`difsim run CONFIG` started twice with DIFSIM_* variables is one 2-process sweep."""
    multi, single = tmp_path / "multi", tmp_path / "single"
    for folder in (multi, single):
        folder.mkdir()
        (folder / "sweep.toml").write_text(CONFIG)
    script = tmp_path / "cli.py"
    script.write_text(CLI)
    results = run_processes(script, ["run", str(multi / "sweep.toml"), "-o", str(multi / "out.nc")])
    check_ok(results)
    args = ["run", str(single / "sweep.toml"), "-o", str(single / "out.nc")]
    code, log = _single_process(script, args)
    assert code == 0, log[-4000:]
    reference, distributed = _load(single / "out.nc"), _load(multi / "out.nc")
    assert distributed.sizes["rho"] == 12
    for var in reference.data_vars:
        assert_same_results(distributed[var].values, reference[var].values, var)
    # Only process 0 wrote: no chunk store or temporary file is left behind by the other.
    assert sorted(p.name for p in multi.iterdir()) == ["out.nc", "sweep.toml"]
