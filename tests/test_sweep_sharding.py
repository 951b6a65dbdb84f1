"""A sweep sharded over 8 devices gives the same Dataset as on one device.

The sweeps run in subprocesses so that each gets the device count it asks for
(`XLA_FLAGS=--xla_force_host_platform_device_count=...`) whatever the test process has: one
process with 8 fake CPU devices runs the sweep on all of them (`devices=None`) and on the
first only, a second process has a single device. A spy on `difsim._sweep._distributed` records how
many devices each chunk's inputs and outputs were spread over, so the test knows the work
really was sharded. Scipy checks a few trajectories independently.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import difsim as ds

pytestmark = pytest.mark.skipif(
    not hasattr(ds, "sweep"), reason="difsim.sweep (src/difsim/_sweep.py) has not landed yet"
)

ROOT = Path(__file__).resolve().parents[1]
RHO = np.linspace(0.0, 21.0, 37)
BETA = np.array([1.0, 8.0 / 3.0])
CHUNK = 16  # 74 trajectories: 4 full chunks and a padded one
TOL = 1e-8

WORKER = (
    textwrap.dedent(
        """
    import json, sys
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np
    import difsim as ds
    from difsim._sweep import _distributed as dd

    # Spy on the engine's way in and out of the devices: how many devices hold each array.
    seen = {"in": [], "out": []}
    to_global, to_host = dd.to_global, dd.to_host

    def spy_global(tree, sharding):
        out = to_global(tree, sharding)
        seen["in"] += [len(x.sharding.device_set) for x in jax.tree.leaves(out) if x.ndim]
        return out

    def spy_host(tree):
        seen["out"] += [len(x.sharding.device_set) for x in jax.tree.leaves(tree)
                        if isinstance(x, jax.Array) and x.ndim]
        return to_host(tree)

    for module in [dd] + [m for n, m in list(sys.modules.items()) if n.startswith("difsim.")]:
        if getattr(module, "to_global", None) is to_global:
            module.to_global = spy_global
        if getattr(module, "to_host", None) is to_host:
            module.to_host = spy_host

    spec = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 37), "beta": [1.0, 8.0 / 3.0]})
    report = {"device_count": jax.device_count()}
    for run in sys.argv[2:]:
        devices = None if run == "all" else [jax.devices()[0]]
        seen = {"in": [], "out": []}
        ds.sweep(ds.models.Lorenz(), spec, t0=0.0, t1=1.0, save="final", rtol=TOL, atol=TOL,
                 chunk_size=CHUNK, devices=devices, output=f"{sys.argv[1]}/{run}.nc",
                 progress=False)
        report[run] = seen
    print("RESULT " + json.dumps(report))
    """
    )
    .replace("TOL", repr(TOL))
    .replace("CHUNK", str(CHUNK))
)


def _start(script: Path, out: Path, devices: int, runs: list[str]):
    # Launch settings stripped; the suite's other DIFSIM_* settings (no compilation cache,
    # conftest.py) kept.
    launch = ("SLURM_", "DIFSIM_COORDINATOR", "DIFSIM_NUM_PROCESSES", "DIFSIM_PROCESS_ID")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launch)}
    env.update(XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}", JAX_PLATFORMS="cpu")
    log = tempfile.TemporaryFile("w+")
    cmd = [sys.executable, str(script), str(out), *runs]
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    return proc, log


def _finish(proc, log, deadline: float) -> dict:
    try:
        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log.seek(0)
    text = log.read()
    log.close()
    assert proc.returncode == 0, f"sweep subprocess failed ({proc.returncode}):\n{text[-4000:]}"
    return json.loads(text.split("RESULT ", 1)[1].splitlines()[0])


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    """Run both subprocesses side by side; `(reports, datasets)` keyed by run name."""
    out = tmp_path_factory.mktemp("sharding")
    script = out / "worker.py"
    script.write_text(WORKER)
    (out / "one_device").mkdir()
    many = _start(script, out, 8, ["all", "first"])
    single = _start(script, out / "one_device", 1, ["all"])
    deadline = time.monotonic() + 240
    reports = {"8 devices": _finish(*many, deadline), "1 device": _finish(*single, deadline)}
    paths = {
        "sharded": out / "all.nc",
        "first device": out / "first.nc",
        "single-device process": out / "one_device" / "all.nc",
    }
    datasets = {}
    for name, path in paths.items():
        with xr.open_dataset(path) as f:
            datasets[name] = f.load()
    return reports, datasets


def assert_same_results(a: np.ndarray, b: np.ndarray, var: str) -> None:
    """Equal "to float tolerance": bitwise here, but XLA's CPU code for an array op can
    differ in the last bit with the number of lanes per device (seen between batches of
    1,024 and 8,192 Lorenz trajectories), and an adaptive solver turns one ulp into a
    different step: a difference of the order of the solver's tolerance (1e-8), far below
    anything a misplaced trajectory would give."""
    if var == "status":
        np.testing.assert_array_equal(a, b, err_msg=var)
    elif var == "num_steps":
        np.testing.assert_allclose(a, b, atol=2, err_msg=var)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=var)


def test_sweep_really_was_sharded(sweeps):
    reports, _ = sweeps
    many, single = reports["8 devices"], reports["1 device"]
    assert many["device_count"] == 8 and single["device_count"] == 1
    all_devices = many["all"]
    # Several chunks went in and came out, each spread over all 8 devices.
    assert len(all_devices["in"]) >= 2 and set(all_devices["in"]) == {8}
    assert len(all_devices["out"]) >= 2 and set(all_devices["out"]) == {8}
    # On one device the points go in as host arrays (jit places them): none on 8 devices.
    assert set(many["first"]["in"]) <= {1} and set(many["first"]["out"]) == {1}
    assert set(single["all"]["in"]) <= {1} and set(single["all"]["out"]) == {1}


def test_sharded_equals_single_device(sweeps):
    _, datasets = sweeps
    sharded = datasets["sharded"]
    # The default engine of this sweep is the ensemble engine, run per device.
    assert {d.attrs["engine"] for d in datasets.values()} == {"ensemble"}
    assert dict(sharded.sizes) == {"rho": RHO.size, "beta": BETA.size}
    np.testing.assert_array_equal(sharded["rho"], RHO)
    assert int((sharded["status"] != 0).sum()) == 0
    for name in ("first device", "single-device process"):
        other = datasets[name]
        assert set(other.data_vars) == set(sharded.data_vars)
        for var in sharded.data_vars:
            assert_same_results(sharded[var].values, other[var].values, var)


def test_sharded_values_match_scipy(sweeps):
    from scipy.integrate import solve_ivp

    _, datasets = sweeps
    sharded = datasets["sharded"]
    for rho, beta in [(0.0, 1.0), (RHO[17], 8.0 / 3.0), (21.0, 8.0 / 3.0), (RHO[30], 1.0)]:

        def f(t, u, rho=rho, beta=beta):
            x, y, z = u
            return [10.0 * (y - x), x * (rho - z) - y, x * y - beta * z]

        ref = solve_ivp(f, (0.0, 1.0), [1.0, 0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12)
        got = sharded.sel(rho=rho, beta=beta)
        got = [float(got[v]) for v in ("x", "y", "z")]
        np.testing.assert_allclose(got, ref.y[:, -1], rtol=1e-5, atol=1e-6)
