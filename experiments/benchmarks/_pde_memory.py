"""Part 3 of bench_pde.py: memory of gradients through long fixed-step rollouts.

`jax.grad` of `Σ u(t_end)² dx dy` w.r.t. the diffusivity of `ds.models.Heat` (periodic
32², Tsit5, fixed step): difsim with `adjoint="checkpoint"` (fixed-step solves run as
scans that checkpoint blocks of ~√n steps) and `adjoint="direct"`, and a naive `lax.scan`
of the same Tsit5 step. Imported by bench_pde.py after it has enabled float64.
"""

import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
from _pde_report import KINDS

import difsim as ds

HERE = Path(__file__).resolve().parent
MEM_GRID = 32
MEM_DT = 0.05


def heat_model(n: int = MEM_GRID) -> ds.Model:
    return ds.models.Heat(grid=ds.Grid.periodic((n, n), (1.0, 1.0)), D=1e-4)


def grad_fn(kind: str, steps: int) -> Callable:
    """`jax.jit(jax.grad(loss))` of `D`, `loss = Σ u(t_end)² dx dy`."""
    model = heat_model()
    grid = model.grid
    t1 = steps * MEM_DT
    if kind == "scan":
        term = dfx.ODETerm(lambda t, u, D: D * ds.fd.laplacian(u, grid))
        solver = dfx.Tsit5()

        def loss(D):
            u0 = model.initial_state()["u"]
            state = solver.init(term, 0.0, MEM_DT, u0, D)

            def step(u, i):
                t = i * MEM_DT
                u, *_ = solver.step(term, t, t + MEM_DT, u, D, state, made_jump=False)
                return u, None

            u, _ = jax.lax.scan(step, u0, jnp.arange(steps))
            return jnp.sum(u**2) * grid.cell_volume

    else:

        def loss(D):
            sol = ds.simulate(model.replace(D=D), t0=0.0, t1=t1, save="final", solver="tsit5",
                              dt0=MEM_DT, controller="constant", max_steps=steps, adjoint=kind,
                              throw=False)  # fmt: skip
            return jnp.sum(sol.final["u"] ** 2) * grid.cell_volume

    return jax.jit(jax.grad(loss))


def _proc_status_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux), so that the peak of the
    run is not hidden by the compiler's; `False` where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def grad_child(spec: dict) -> None:
    """Fresh process: compile, then run one gradient; RSS before it and its peak during it."""
    fn = grad_fn(spec["kind"], spec["steps"])
    d = jnp.asarray(1e-4)
    compiled = fn.lower(d).compile()
    reset = _reset_peak_rss()
    before = _proc_status_kib("VmRSS") if reset else None
    before = before or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    g = float(jax.block_until_ready(compiled(d)))
    run_s = time.perf_counter() - start
    peak = _proc_status_kib("VmHWM") if reset else None
    peak = peak or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    Path(spec["result"]).write_text(
        json.dumps(dict(rss_before_kib=before, rss_peak_kib=peak, run_s=run_s, grad=g))
    )


def bench_memory(cfg, tmp: Path) -> dict:
    """Compiled temporary memory (and fresh-process peak RSS) of the gradient per kind."""
    kinds = KINDS
    rows = []
    for steps in cfg.mem_steps:
        row = dict(steps=steps, temp_mib={}, compile_s={}, rss={})
        for kind in kinds:
            start = time.perf_counter()
            compiled = grad_fn(kind, steps).lower(jnp.asarray(1e-4)).compile()
            row["compile_s"][kind] = time.perf_counter() - start
            row["temp_mib"][kind] = compiled.memory_analysis().temp_size_in_bytes / 2**20
            print(f"  {steps} steps, {kind}: {row['temp_mib'][kind]:.1f} MiB", flush=True)
            if cfg.rss_all or steps == max(cfg.mem_steps):
                result = tmp / f"grad_{kind}_{steps}.json"
                spec = dict(kind=kind, steps=steps, result=str(result))
                spec_path = tmp / f"grad_{kind}_{steps}.spec.json"
                spec_path.write_text(json.dumps(spec))
                cmd = [sys.executable, str(HERE / "bench_pde.py"), "--child", str(spec_path)]
                subprocess.run(cmd, check=True, cwd=HERE, stdout=subprocess.DEVNULL)
                row["rss"][kind] = json.loads(result.read_text())
        rows.append(row)
    slopes = {}
    if len(rows) > 1:
        log_n = np.log([r["steps"] for r in rows])
        for kind in kinds:
            slopes[kind] = float(
                np.polyfit(log_n, np.log([r["temp_mib"][kind] for r in rows]), 1)[0]
            )
    # The three gradients are the same arithmetic: they must agree to round-off.
    spread = [
        abs(r["rss"][k]["grad"] / r["rss"]["checkpoint"]["grad"] - 1)
        for r in rows
        for k in kinds
        if len(r["rss"]) == len(kinds)
    ]
    state_kib = MEM_GRID**2 * 8 / 1024
    return dict(
        grid=MEM_GRID,
        dt=MEM_DT,
        state_kib=state_kib,
        rows=rows,
        slopes=slopes,
        grad_spread=max(spread) if spread else None,
    )
