"""Benchmark difsim's PDE solvers against exponax and py-pde at matched accuracy, and the
memory of gradients through long rollouts.

Three parts, side by side in one run (float64 throughout):

1. **Kuramoto–Sivashinsky**, `u_t = -u u_x - u_xx - u_xxxx` on a periodic `[0, 32π)`,
   `n = 256` points, Kassam & Trefethen's initial field `cos(x/16) (1 + sin(x/16))`,
   `t` in `[0, 20]` (before the chaos sets in, so errors measure the method, not the
   divergence of trajectories). ETDRK4 with a fixed step in both: `ds.simulate(
   ds.models.KuramotoSivashinsky(grid=...), t0=0, t1=20, save="final", dt0=dt)` (the
   model's default solver is ETDRK4) and `exponax.stepper.KuramotoSivashinskyConservative(
   1, 32π, n, dt, order=4)` (the same equation, 2/3 dealiasing, physical domain), looped in
   Fourier space (`step_fourier`, exponax's fastest) and with `exponax.repeat` (the
   documented way). Error: max |u - u_ref| at `t = 20`, `u_ref` the same library's
   solution with `dt_min / 16`.
2. **Gray–Scott**, `ds.models.GrayScott` (Pearson's system and perturbed square with 1%
   noise, `F = 0.046`, `k = 0.061`, periodic 128² on 2.5 × 2.5, 5-point Laplacian),
   `t` in `[0, 500]`. difsim with its default ETDRK4 and with Tsit5, fixed steps; py-pde
   (`pde.PDE` with the same right-hand side, numba backend, `RungeKuttaSolver` with a fixed
   step, i.e. classic RK4); exponax's `GrayScott` stepper (ETDRK4, Fourier pseudo-spectral).
   Error: max |v - v_ref| at `t_end`. difsim and py-pde share the 5-point semi-discretisation,
   so their reference is one difsim Tsit5 solve with `dt_min / 16`; exponax's spectral
   Laplacian gives a different semi-discrete system, so its reference is its own solve with
   `dt_min / 16` (the two references are O(1) apart by `t = 500`: a pattern-forming system on
   a 128² grid is sensitive to the spatial discretisation).
3. **Memory of gradients**: `jax.grad` of `Σ u(t_end)²` with respect to the diffusivity `D`
   of `ds.models.Heat` on a periodic 32² grid, Tsit5 with a fixed step, for increasing
   numbers of steps: difsim with `adjoint="checkpoint"` (diffrax's recursive checkpointing,
   the default) and `adjoint="direct"`, and a naive `lax.scan` of the same Tsit5 step
   (reverse mode stores every step). Memory: XLA's temporary buffer size of the compiled
   gradient (`compiled.memory_analysis()`), and for the longest rollout (every one with
   `--full`) the peak resident memory of a fresh process running it.

Timing. Steady state: the median of interleaved repeats of the whole solve after
compilation (steps/s = steps / median); "first call" is compile + run with JAX's caches
cleared before it. **Time to result**: a fresh Python process that imports the library,
builds the problem, solves it once and writes the result, timed by the parent from launch
until the result file exists (py-pde compiles its right-hand side and stepping loop with
numba in every new process; JAX compiles on the first call). Matched accuracy: each other
library's time at its error is compared with difsim's time at the same error, interpolated
log-log along difsim's error-vs-time points (no extrapolation beyond a factor 2).

```
python experiments/benchmarks/bench_pde.py                # ~4 min on 2 cores
python experiments/benchmarks/bench_pde.py --quick        # ~1 min: no py-pde, no fresh processes
python experiments/benchmarks/bench_pde.py --full         # more steps, 1024-point KS, RSS of all
python experiments/benchmarks/bench_pde.py --sizes 256 1024 --gs-sizes 128 256   # e.g. on a GPU
python experiments/benchmarks/bench_pde.py --markdown runs/bench_pde.md --json runs/bench_pde.json
```
"""

import argparse
import dataclasses
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

_START = time.perf_counter()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    format_table,
    interleaved,
    load_average,
    machine_info,
    seconds,
    today,
    versions,
    write_reports,
)
from _report import render_header  # noqa: E402

import difsim as ds  # noqa: E402

IMPORT_S = time.perf_counter() - _START  # what a fresh difsim process spends on imports
HERE = Path(__file__).resolve().parent
KS_LENGTH = 32 * math.pi
KS_T1 = 20.0
GS_LENGTH = 2.5
REF_FACTOR = 16  # the reference solve takes steps REF_FACTOR times smaller than the smallest
MEM_GRID = 32
MEM_DT = 0.05
VERSIONED = ("jax", "jaxlib", "diffrax", "equinox", "numpy", "exponax", "py-pde", "numba", "difsim")


@dataclasses.dataclass
class Settings:
    ks_sizes: list[int]
    ks_dts: list[float]
    gs_sizes: list[int]
    gs_dts: list[float]
    gs_t1: float
    pypde_dts: list[float]
    mem_steps: list[int]
    repeats: int
    fresh: bool
    pypde: bool
    rss_all: bool
    parts: list[str]


def settings_from(args) -> Settings:
    quick, full = args.quick, args.full
    return Settings(
        ks_sizes=args.sizes or ([256, 1024] if full else [256]),
        ks_dts=[0.5, 0.25, 0.125] if quick else [0.5, 0.25, 0.125, 0.0625],
        gs_sizes=args.gs_sizes or [128],
        gs_dts=[2.0, 1.0] if not full else [2.0, 1.0, 0.5],
        gs_t1=200.0 if quick else 500.0,
        pypde_dts=[1.0, 0.5] if full else [1.0],
        mem_steps=[250, 1000]
        if quick
        else ([250, 1000, 4000, 16000] if full else [250, 1000, 4000]),
        repeats=args.repeats or (5 if quick else 9),
        fresh=not quick and not args.no_fresh,
        pypde=not quick and not args.no_pypde,
        rss_all=full,
        parts=args.parts,
    )


# ------------------------------------------------------------------ difsim side
def ks_model(n: int) -> ds.Model:
    return ds.models.KuramotoSivashinsky(grid=ds.Grid.periodic(n, KS_LENGTH))


def gs_model(n: int) -> ds.Model:
    return ds.models.GrayScott(grid=ds.Grid.periodic((n, n), (GS_LENGTH, GS_LENGTH)))


def gs_params(model) -> dict:
    return {name: float(getattr(model, name)) for name in ("Du", "Dv", "F", "k")}


def steps_of(t1: float, dt: float) -> int:
    steps = round(t1 / dt)
    if not math.isclose(steps * dt, t1):
        raise ValueError(f"dt = {dt} does not divide t1 = {t1}")
    return steps


def difsim_solve(case: str, solver: str, dt: float, t1: float) -> Callable:
    """`jax.jit` of the model → final field (KS: `u`; Gray–Scott: the stacked `(u, v)`)."""
    max_steps = max(16_384, steps_of(t1, dt) + 1)
    options = {} if solver == "default" else dict(solver=solver, controller="constant")

    def solve(model):
        sol = ds.simulate(model, t0=0.0, t1=t1, save="final", dt0=dt, max_steps=max_steps,
                          **options)  # fmt: skip
        final = sol.final
        return final["u"] if case == "ks" else jnp.stack([final["u"], final["v"]])

    return jax.jit(solve)


# ------------------------------------------------------------------ measurements
def max_error(result, ref, case: str) -> float:
    result, ref = np.asarray(result), np.asarray(ref)
    if case == "gs":  # the error of v
        result, ref = result[1], ref[1]
    return float(np.max(np.abs(result - ref)))


def time_contenders(calls: dict[str, Callable], repeats: int) -> tuple[dict, dict, dict]:
    """First call (caches cleared) and interleaved steady repeats of argument-less calls.

    **Returns:** `(first_s, steady Stats, results)`.
    """
    first, results = {}, {}
    for key, call in calls.items():
        jax.clear_caches()  # each first call compiles from scratch
        start = time.perf_counter()
        results[key] = np.asarray(call())
        first[key] = time.perf_counter() - start
    for call in calls.values():  # clear_caches dropped the earlier executables: recompile
        jax.block_until_ready(call())
    wall, _ = interleaved(calls, (), repeats)
    return first, {k: Stats(v) for k, v in wall.items()}, results


def run_fresh(cmd: list[str], result: Path, timeout: float = 1800.0) -> dict:
    """Launch `cmd`; wall seconds until `result` exists, and the child's own timings."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=HERE)
        result_s = None
        while proc.poll() is None:
            if result_s is None and result.exists():
                result_s = time.perf_counter() - start
            if time.perf_counter() - start > timeout:
                proc.kill()
                proc.wait()
                break
            time.sleep(0.01)
        if result_s is None and result.exists():
            result_s = time.perf_counter() - start
        err.seek(0)
        stderr = err.read()
    if proc.returncode != 0 or result_s is None:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{stderr[-3000:]}")
    own = json.loads(result.with_suffix(".json").read_text())
    return dict(result_s=result_s, exit_s=time.perf_counter() - start, **own)


def fresh_run(spec: dict, tmp: Path, initial: np.ndarray | None) -> tuple[dict, np.ndarray]:
    """Run one library on one problem in a fresh process (see `_pde_refs.py`)."""
    name = f"{spec['lib']}_{spec['case']}_{spec['n']}_{spec.get('solver', spec.get('scheme'))}"
    name += f"_{spec['dt']}".replace(".", "p")
    result = tmp / f"{name}.npy"
    spec = dict(spec, result=str(result))
    if initial is not None:
        np.save(tmp / f"{name}_y0.npy", initial)
        spec["initial"] = str(tmp / f"{name}_y0.npy")
    spec_path = tmp / f"{name}.spec.json"
    spec_path.write_text(json.dumps(spec))
    script = "bench_pde.py" if spec["lib"] == "difsim" else "_pde_refs.py"
    extra = ["--child"] if spec["lib"] == "difsim" else []
    out = run_fresh([sys.executable, str(HERE / script), *extra, str(spec_path)], result)
    return out, np.load(result)


def interpolate_time(points: list[tuple[float, float]], error: float) -> float | None:
    """Time at `error` along `(error, time)` points, log-log; `None` if `error` lies more
    than a factor 2 outside their range."""
    pts = sorted((e, t) for e, t in points if e > 0)
    if len(pts) < 2 or not pts[0][0] / 2 <= error <= pts[-1][0] * 2:
        return None
    le, lt = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    i = int(np.clip(np.searchsorted(le, np.log(error)), 1, len(pts) - 1))
    w = (np.log(error) - le[i - 1]) / (le[i] - le[i - 1])
    return float(np.exp(lt[i - 1] + w * (lt[i] - lt[i - 1])))


def rows_of(first: dict, steady: dict, results: dict, refs: dict, case: str, meta: dict) -> list:
    rows = []
    for key, (name, dt, steps, ref_key) in meta.items():
        rows.append(
            dict(
                contender=name,
                dt=dt,
                steps=steps,
                error=max_error(results[key], refs[ref_key], case),
                steady=steady[key].as_dict(),
                steps_per_s=steps / steady[key].median,
                first_call_s=first[key],
            )
        )
    return rows


def matched(rows: list[dict], difsim_names: list[str], others: list[str]) -> list[dict]:
    """Each other contender's time vs difsim's time at the same error."""
    out = []
    for d in difsim_names:
        curve = [(r["error"], r["steady"]["median"]) for r in rows if r["contender"] == d]
        for r in rows:
            if r["contender"] not in others:
                continue
            t = interpolate_time(curve, r["error"])
            out.append(
                dict(
                    other=r["contender"],
                    dt=r["dt"],
                    error=r["error"],
                    other_s=r["steady"]["median"],
                    difsim=d,
                    difsim_s=t,
                    ratio=None if t is None else r["steady"]["median"] / t,
                )
            )
    return out


# ------------------------------------------------------------------ 1. Kuramoto–Sivashinsky
def bench_ks(n: int, cfg: Settings, tmp: Path) -> dict:
    from _pde_refs import exponax_ks

    model = ks_model(n)
    u0 = jnp.asarray(model.initial_state()["u"])
    ref_dt = min(cfg.ks_dts) / REF_FACTOR
    print(f"  references (dt = {ref_dt}) ...", flush=True)
    refs = {
        "difsim": np.asarray(difsim_solve("ks", "default", ref_dt, KS_T1)(model)),
        "exponax": np.asarray(exponax_ks(n, KS_LENGTH, ref_dt, steps_of(KS_T1, ref_dt))(u0)),
    }
    calls, meta = {}, {}
    for dt in cfg.ks_dts:
        steps = steps_of(KS_T1, dt)
        calls[f"d{dt}"] = partial(difsim_solve("ks", "default", dt, KS_T1), model)
        meta[f"d{dt}"] = ("difsim ETDRK4", dt, steps, "difsim")
        calls[f"e{dt}"] = partial(exponax_ks(n, KS_LENGTH, dt, steps), u0)
        meta[f"e{dt}"] = ("exponax ETDRK4", dt, steps, "exponax")
        calls[f"r{dt}"] = partial(exponax_ks(n, KS_LENGTH, dt, steps, repeat=True), u0)
        meta[f"r{dt}"] = ("exponax.repeat ETDRK4", dt, steps, "exponax")
    print(f"  {len(calls)} solves, {cfg.repeats} repeats ...", flush=True)
    load = load_average()
    first, steady, results = time_contenders(calls, cfg.repeats)
    rows = rows_of(first, steady, results, refs, "ks", meta)
    out = dict(
        n=n,
        t1=KS_T1,
        ref_dt=ref_dt,
        ref_difference=float(np.max(np.abs(refs["difsim"] - refs["exponax"]))),
        rows=rows,
        matched=matched(rows, ["difsim ETDRK4"], ["exponax ETDRK4", "exponax.repeat ETDRK4"]),
        load=(load, load_average()),
    )
    if cfg.fresh:
        print("  fresh processes ...", flush=True)
        dt = 0.25
        base = dict(case="ks", n=n, dt=dt, t1=KS_T1, steps=steps_of(KS_T1, dt), length=KS_LENGTH)
        fresh = []
        for lib, label in (("difsim", "difsim ETDRK4"), ("exponax", "exponax ETDRK4")):
            spec = dict(base, lib=lib, solver="default")
            run, result = fresh_run(spec, tmp, None if lib == "difsim" else np.asarray(u0))
            run.update(contender=label, dt=dt, error=max_error(result, refs[lib], "ks"))
            fresh.append(run)
        out["fresh"] = fresh
    return out


# ------------------------------------------------------------------ 2. Gray–Scott
def bench_gs(n: int, cfg: Settings, tmp: Path) -> dict:
    from _pde_refs import exponax_gray_scott

    model = gs_model(n)
    params = gs_params(model)
    state = model.initial_state()
    y0 = jnp.stack([state["u"], state["v"]])
    t1 = cfg.gs_t1
    ref_dt = min(cfg.gs_dts) / REF_FACTOR
    print(f"  references (dt = {ref_dt}) ...", flush=True)
    ref_steps = steps_of(t1, ref_dt)
    refs = {
        "fd": np.asarray(difsim_solve("gs", "tsit5", ref_dt, t1)(model)),
        "spectral": np.asarray(exponax_gray_scott(n, GS_LENGTH, ref_dt, ref_steps, params)(y0)),
    }
    calls, meta = {}, {}
    for dt in cfg.gs_dts:
        steps = steps_of(t1, dt)
        calls[f"d{dt}"] = partial(difsim_solve("gs", "default", dt, t1), model)
        meta[f"d{dt}"] = ("difsim ETDRK4", dt, steps, "fd")
        calls[f"t{dt}"] = partial(difsim_solve("gs", "tsit5", dt, t1), model)
        meta[f"t{dt}"] = ("difsim Tsit5", dt, steps, "fd")
        calls[f"e{dt}"] = partial(exponax_gray_scott(n, GS_LENGTH, dt, steps, params), y0)
        meta[f"e{dt}"] = ("exponax ETDRK4 (spectral)", dt, steps, "spectral")
    print(f"  {len(calls)} solves, {cfg.repeats} repeats ...", flush=True)
    load = load_average()
    first, steady, results = time_contenders(calls, max(3, cfg.repeats // 3))
    rows = rows_of(first, steady, results, refs, "gs", meta)
    out = dict(n=n, t1=t1, ref_dt=ref_dt, params=params, rows=rows, load=(load, load_average()))
    out["ref_difference"] = max_error(refs["fd"], refs["spectral"], "gs")
    fresh = []
    base = dict(case="gs", n=n, t1=t1, length=GS_LENGTH, params=params)
    if cfg.pypde:
        for dt in cfg.pypde_dts:
            print(f"  py-pde RK4, dt = {dt}, fresh process (numba compiles) ...", flush=True)
            spec = dict(base, lib="pypde", scheme="rk4", dt=dt, steps=steps_of(t1, dt), repeats=3)
            run, result = fresh_run(spec, tmp, np.asarray(y0))
            run.update(
                contender="py-pde RK4 (numba)", dt=dt, error=max_error(result, refs["fd"], "gs")
            )
            fresh.append(run)
            steady_s = Stats(run["steady_s"])
            rows.append(
                dict(
                    contender="py-pde RK4 (numba)",
                    dt=dt,
                    steps=run["steps"],
                    error=run["error"],
                    steady=steady_s.as_dict(),
                    steps_per_s=run["steps"] / steady_s.median,
                    first_call_s=run["make_stepper_s"] + run["first_call_s"],
                )
            )
    if cfg.fresh:
        print("  fresh processes ...", flush=True)
        dt = 1.0
        for lib, solver, label, ref in (
            ("difsim", "default", "difsim ETDRK4", "fd"),
            ("difsim", "tsit5", "difsim Tsit5", "fd"),
            ("exponax", "default", "exponax ETDRK4 (spectral)", "spectral"),
        ):
            spec = dict(base, lib=lib, solver=solver, dt=dt, steps=steps_of(t1, dt))
            run, result = fresh_run(spec, tmp, None if lib == "difsim" else np.asarray(y0))
            run.update(contender=label, dt=dt, error=max_error(result, refs[ref], "gs"))
            fresh.append(run)
    out["fresh"] = fresh
    others = ["py-pde RK4 (numba)", "exponax ETDRK4 (spectral)"]
    out["matched"] = matched(rows, ["difsim ETDRK4", "difsim Tsit5"], others)
    return out


# ------------------------------------------------------------------ 3. memory of gradients
def heat_model(n: int = MEM_GRID) -> ds.Model:
    return ds.models.Heat(grid=ds.Grid.periodic((n, n), (1.0, 1.0)), D=1e-4)


def grad_fn(kind: str, steps: int) -> Callable:
    """`jax.jit(jax.grad(loss))` of `D`, `loss = Σ u(t_end)² dx dy`."""
    model = heat_model()
    grid = model.grid
    t1 = steps * MEM_DT
    if kind == "scan":
        term = dfx.ODETerm(lambda t, u, D: D * ds.laplacian(u, grid))
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


def bench_memory(cfg: Settings, tmp: Path) -> dict:
    kinds = ("checkpoint", "direct", "scan")
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


# ------------------------------------------------------------------ report
def _rate(x: float) -> str:
    return f"{x:,.0f}"


def _steady(s: dict) -> str:
    return f"{seconds(s['median'])} ({seconds(s['min'])})"


def _solve_table(rows: list[dict], md: bool) -> str:
    head = ["contender", "dt", "steps", "max error", "solve, median (min)", "steps/s",
            "first call (compile + run)"]  # fmt: skip
    cells = [
        [r["contender"], f"{r['dt']:g}", str(r["steps"]), f"{r['error']:.2e}",
         _steady(r["steady"]), _rate(r["steps_per_s"]), seconds(r["first_call_s"])]
        for r in rows
    ]  # fmt: skip
    return format_table(head, cells, md)


def _matched_table(rows: list[dict], md: bool) -> str:
    head = ["other", "dt", "its error", "its time", "difsim", "difsim time at that error",
            "other / difsim"]  # fmt: skip
    cells = [
        [r["other"], f"{r['dt']:g}", f"{r['error']:.2e}", seconds(r["other_s"]), r["difsim"],
         seconds(r["difsim_s"]), "n/a" if r["ratio"] is None else f"{r['ratio']:.2f}"]
        for r in rows
    ]  # fmt: skip
    return format_table(head, cells, md)


def _fresh_table(rows: list[dict], md: bool) -> str:
    head = ["contender", "dt", "time to result", "its CPU time", "import", "set-up",
            "first solve (compile + run)", "max error"]  # fmt: skip
    cells = []
    for r in rows:
        first = r["first_call_s"] + r.get("make_stepper_s", 0.0)
        cells.append(
            [r["contender"], f"{r['dt']:g}", seconds(r["result_s"]),
             seconds(r["cpu_at_result_s"]), seconds(r["import_s"]), seconds(r["setup_s"]),
             seconds(first), f"{r['error']:.2e}"]
        )  # fmt: skip
    return format_table(head, cells, md)


def _memory_table(mem: dict, md: bool) -> str:
    kinds = ("checkpoint", "direct", "scan")
    head = ["steps", *(f"{k}: XLA temp" for k in kinds), *(f"{k}: RSS growth (run)" for k in kinds)]
    cells = []
    for r in mem["rows"]:
        row = [f"{r['steps']:,}", *(f"{r['temp_mib'][k]:.1f} MiB" for k in kinds)]
        for k in kinds:
            rss = r["rss"].get(k)
            row.append(
                f"{(rss['rss_peak_kib'] - rss['rss_before_kib']) / 1024:.0f} MiB "
                f"({seconds(rss['run_s'])})"
                if rss
                else "-"
            )
        cells.append(row)
    return format_table(head, cells, md)


def render(report: dict, md: bool) -> str:
    parts = []
    for ks in report.get("ks", []):
        parts.append(
            f"Kuramoto–Sivashinsky, n = {ks['n']}, t = 0..{ks['t1']:g}; error = max |u - u_ref| "
            f"(u_ref: the same library with dt = {ks['ref_dt']:g}; the two references differ "
            f"by {ks['ref_difference']:.1e}); solve time of the whole run, median (min) of "
            f"{report['repeats']} interleaved repeats:\n\n" + _solve_table(ks["rows"], md)
        )
        parts.append("At matched accuracy:\n\n" + _matched_table(ks["matched"], md))
        if ks.get("fresh"):
            parts.append("Fresh process, time to result:\n\n" + _fresh_table(ks["fresh"], md))
    for gs in report.get("gs", []):
        parts.append(
            f"Gray–Scott, {gs['n']}², t = 0..{gs['t1']:g}, {gs['params']}; error = max |v - "
            f"v_ref| (5-point Laplacian: difsim Tsit5 with dt = {gs['ref_dt']:g}; exponax: "
            f"its own solve with dt = {gs['ref_dt']:g}; the two references differ by "
            f"{gs['ref_difference']:.2f}):\n\n" + _solve_table(gs["rows"], md)
        )
        parts.append("At matched accuracy:\n\n" + _matched_table(gs["matched"], md))
        if gs.get("fresh"):
            parts.append("Fresh process, time to result:\n\n" + _fresh_table(gs["fresh"], md))
    mem = report.get("memory")
    if mem:
        slopes = ", ".join(f"{k} {v:.2f}" for k, v in mem["slopes"].items())
        parts.append(
            f"Gradient memory, heat equation on {mem['grid']}² (one state "
            f"{mem['state_kib']:.0f} KiB), Tsit5, dt = {mem['dt']}; XLA temporaries of the "
            "compiled gradient, and the growth of peak RSS while it runs in a fresh process "
            f"(run time):\n\n" + _memory_table(mem, md) + f"\n\nlog-log slope of XLA "
            f"temporaries vs steps: {slopes}."
        )
        if mem["grad_spread"] is not None:
            parts[-1] += f" The three gradients agree to a relative {mem['grad_spread']:.1e}."
    return "\n\n".join(parts)


def summary(report: dict) -> str:
    lines = []
    for ks in report.get("ks", []):
        ratios = [
            r["ratio"] for r in ks["matched"] if r["other"] == "exponax ETDRK4" and r["ratio"]
        ]
        if ratios:
            lines.append(
                f"KS n={ks['n']}: exponax / difsim time at equal error = "
                f"{min(ratios):.2f}..{max(ratios):.2f} (goal >= 1)"
            )
    for gs in report.get("gs", []):
        for r in gs["matched"]:
            if r["other"].startswith("py-pde") and r["ratio"]:
                lines.append(
                    f"GS n={gs['n']}: py-pde RK4 dt={r['dt']:g} / {r['difsim']} at equal error "
                    f"= {r['ratio']:.2f} (goal >= 1)"
                )
        by = {r["contender"]: r for r in gs.get("fresh", [])}
        pypde = next((r for k, r in by.items() if k.startswith("py-pde")), None)
        if pypde and "difsim ETDRK4" in by:
            lines.append(
                f"GS n={gs['n']}: time to result py-pde / difsim = "
                f"{pypde['result_s'] / by['difsim ETDRK4']['result_s']:.1f}x"
            )
    return "\n".join(lines)


# ------------------------------------------------------------------ main
def difsim_child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if "kind" in spec:
        grad_child(spec)
        return
    start = time.perf_counter()
    model = ks_model(spec["n"]) if spec["case"] == "ks" else gs_model(spec["n"])
    fn = difsim_solve(spec["case"], spec["solver"], spec["dt"], spec["t1"])
    setup = time.perf_counter() - start
    start = time.perf_counter()
    result = np.asarray(fn(model))
    first = time.perf_counter() - start
    out = Path(spec["result"])
    tmp = out.with_name(out.stem + ".partial.npy")
    np.save(tmp, result)
    tmp.replace(out)
    timings = dict(setup_s=setup, first_call_s=first, import_s=IMPORT_S, steady_s=[])
    timings["cpu_at_result_s"] = time.process_time()
    out.with_suffix(".json").write_text(json.dumps(timings))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="KS grid sizes (default 256)")
    parser.add_argument("--gs-sizes", type=int, nargs="+", help="Gray–Scott n for n² grids")
    parser.add_argument("--parts", nargs="+", default=["ks", "gs", "memory"],
                        choices=["ks", "gs", "memory"])  # fmt: skip
    parser.add_argument("--repeats", type=int, help="steady-state repeats (KS; GS uses 1/3)")
    parser.add_argument("--quick", action="store_true", help="fewer steps, no py-pde/fresh runs")
    parser.add_argument("--full", action="store_true", help="more sizes/steps, RSS of every run")
    parser.add_argument("--no-pypde", action="store_true", help="skip py-pde (numba compiles)")
    parser.add_argument("--no-fresh", action="store_true", help="skip fresh-process timings")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write Markdown here")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw results here")
    args = parser.parse_args(argv)
    cfg = settings_from(args)
    report = dict(
        date=today(),
        machine=machine_info(),
        versions=versions(VERSIONED),
        command=command_line(),
        repeats=cfg.repeats,
        settings=dataclasses.asdict(cfg),
    )
    print(render_header(report), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if "ks" in cfg.parts:
            report["ks"] = []
            for n in cfg.ks_sizes:
                print(f"\nKuramoto–Sivashinsky, n = {n} ...", flush=True)
                report["ks"].append(bench_ks(n, cfg, tmp))
        if "gs" in cfg.parts:
            report["gs"] = []
            for n in cfg.gs_sizes:
                print(f"\nGray–Scott, {n}² ...", flush=True)
                report["gs"].append(bench_gs(n, cfg, tmp))
        if "memory" in cfg.parts:
            print("\ngradient memory ...", flush=True)
            report["memory"] = bench_memory(cfg, tmp)
    report["load_end"] = load_average()
    print("\n" + render(report, md=False) + "\n\n" + summary(report))
    text = render_header(report) + "\n\n" + render(report, True)
    write_reports(report, args.markdown, args.json, text)
    return report


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        difsim_child(sys.argv[2])
    else:
        main()
