"""Part 4 of bench_sweep.py: the peak memory of a fresh process that runs one sweep of `N`
(streamed to a netCDF file in chunks) or the hand-written solve on all `N` at once.
`bench_memory` launches `bench_sweep.py --rss-child`, which calls `rss_child`. Imported by
bench_sweep.py after it has set float32."""

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _sweep_contenders import MAX_STEPS, rho_values
from bench_simulate import ATOL, RTOL, T0, T1, diffrax_final

import difsim as ds

SCRIPT = Path(__file__).resolve().parent / "bench_sweep.py"


def _proc_status(key: str) -> int | None:
    """A memory figure (`VmRSS`, `VmHWM`) of this process from /proc, bytes (Linux only)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (`VmHWM`) to the current RSS (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def sweep_chunk_size(n: int, budget: int) -> int | None:
    """The sweep's chunk size for `N` (engine internals: `None` if they moved)."""
    try:
        from difsim._sweep import bytes_per_trajectory, choose_chunk_size

        model = ds.models.Lorenz()
        outputs = [type("O", (), {"shape": ()})] * 3  # x, y, z: one scalar each
        per = bytes_per_trajectory(model, outputs, 1, np.float32)
        cpu = jax.default_backend() == "cpu"
        return choose_chunk_size(n, jax.device_count(), per, budget, cpu=cpu)
    except Exception:
        return None


def _sweep_to_file(rhos: np.ndarray, budget: int, chunk_size: int | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = ds.sweep(
            ds.models.Lorenz(),
            ds.GridSweep({"rho": rhos}),
            t0=T0,
            t1=T1,
            save="final",
            rtol=RTOL,
            atol=ATOL,
            max_steps=MAX_STEPS,
            chunk_size=chunk_size,
            memory_budget=budget,
            output=Path(tmp) / "sweep.nc",
            progress=False,
        )
        ok = int(out.attrs.get("n_success", -1))
        out.close()
    return ok


def rss_child(contender: str, n: int, budget: int) -> dict:
    """Run one contender on `N` in this (fresh) process; report its peak memory.

    The program is compiled first (XLA's compiler needs a few hundred MiB for a while, which
    would hide the solve's own memory): the sweep runs once on a single chunk of the shape
    it will use, the hand-written solve is compiled ahead of time for `N`. Then the peak-RSS
    mark is reset and the measured run starts. The sweep streams its chunks to a netCDF file
    (as `difsim run` does), so nothing of size `N` but its coordinate stays in memory; the
    hand-written solve holds all `N` trajectories at once.
    """
    rhos = rho_values(n)
    chunk = sweep_chunk_size(n, budget) if contender == "sweep" else n
    start = time.perf_counter()
    if contender == "sweep":
        if chunk is not None:
            _sweep_to_file(rhos[:chunk], budget, chunk_size=chunk)

        def run():
            return _sweep_to_file(rhos, budget)
    else:
        solve = jax.jit(jax.vmap(lambda rho: diffrax_final(rho, MAX_STEPS)))
        compiled = solve.lower(jnp.asarray(rhos)).compile()

        def run():
            return int(np.isfinite(np.asarray(compiled(jnp.asarray(rhos)))).all(-1).sum())

    compile_s = time.perf_counter() - start
    before = _proc_status("VmRSS")
    reset = _reset_peak()
    start = time.perf_counter()
    ok = run()
    wall = time.perf_counter() - start
    peak = _proc_status("VmHWM") if reset else None
    stats = jax.devices()[0].memory_stats() or {}
    return dict(
        contender=contender,
        n=n,
        wall_s=wall,
        compile_s=compile_s,
        rss_before_bytes=before,
        run_peak_bytes=peak,
        maxrss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,  # KiB on Linux
        device_peak_bytes=stats.get("peak_bytes_in_use"),
        ok=ok,
        chunk_size=chunk,
    )


def bench_memory(sizes: list[int], budget: int | None, timeout: float) -> list[dict]:
    rows = []
    for n in sizes:
        for contender in ("sweep", "diffrax"):
            cmd = [sys.executable, str(SCRIPT), "--rss-child", contender, str(n)]
            if budget is not None:
                cmd += ["--memory-budget", str(budget)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(f"  {contender:>7} N = {n:>10,}: peak RSS {row['maxrss_bytes'] / 2**20:.0f} MiB",
                  flush=True)  # fmt: skip
    return rows
