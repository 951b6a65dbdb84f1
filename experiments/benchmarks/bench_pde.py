"""Benchmark difsim's PDE solvers against exponax and py-pde at matched accuracy, and the
memory of gradients through long rollouts.

Three parts, side by side in one run (float64 throughout), and an optional fourth:

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
   noise, `F = 0.046`, `k = 0.061`, periodic 128² (`--gs-sizes`; the model's default is
   256²) on 2.5 × 2.5, 5-point Laplacian),
   `t` in `[0, 500]`. difsim with ETDRK4 and with Tsit5 (the model's default), fixed steps; py-pde
   (`pde.PDE` with the same right-hand side, numba backend, `RungeKuttaSolver` with a fixed
   step, i.e. classic RK4); exponax's `GrayScott` stepper (ETDRK4, Fourier pseudo-spectral).
   Error: max |v - v_ref| at `t_end`. difsim and py-pde share the 5-point semi-discretisation,
   so their reference is one difsim Tsit5 solve with `dt_min / 16`; exponax's spectral
   Laplacian gives a different semi-discrete system, so its reference is its own solve with
   `dt_min / 16` (the two references are O(1) apart by `t = 500`: a pattern-forming system on
   a 128² grid is sensitive to the spatial discretisation).
3. **Memory of gradients**: `jax.grad` of `Σ u(t_end)²` with respect to the diffusivity `D`
   of `ds.models.Heat` on a periodic 32² grid, Tsit5 with a fixed step, for increasing
   numbers of steps: difsim with `adjoint="checkpoint"` (the default: fixed-step solves run
   as scans that checkpoint blocks of ~√n steps) and `adjoint="direct"`, and a naive
   `lax.scan` of the same Tsit5 step (reverse mode stores every step; `_pde_memory.py`).
   Memory: XLA's temporary buffer size of the compiled gradient
   (`compiled.memory_analysis()`), and for the longest rollout (every one with `--full`) the
   growth of peak resident memory while a fresh process runs it.
4. **Where the KS time goes** (`--parts variants`): one KS solve written five ways: the zoo
   model (non-stiff term given as its spectrum, `rhs_nonstiff_spectrum`), the same term in
   physical space, diffrax with hand-written physical-space terms, and exponax's two loops.

Timing. Steady state: the median of interleaved repeats of the whole solve after
compilation (steps/s = steps / median); "first call" is compile + run with JAX's caches
cleared before it. **Time to result**: a fresh Python process that imports the library,
builds the problem, solves it once and writes the result, timed by the parent from launch
until the result file exists (py-pde compiles its right-hand side and stepping loop with
numba in every new process; JAX compiles on the first call), with the process's own CPU
time until then, its import time, set-up (exponax builds its ETDRK4 coefficients eagerly)
and first solve. Matched accuracy: each other
library's time at its error is compared with difsim's time at the same error, interpolated
log-log along difsim's error-vs-time points (no extrapolation beyond a factor 2).

```
python experiments/benchmarks/bench_pde.py                # ~4 min on 2 cores
python experiments/benchmarks/bench_pde.py --quick        # ~1 min: no py-pde, no fresh processes
python experiments/benchmarks/bench_pde.py --full         # also KS 1024, GS 256², 16000 steps
python experiments/benchmarks/bench_pde.py --sizes 256 1024 --gs-sizes 128 256   # e.g. on a GPU
python experiments/benchmarks/bench_pde.py --parts variants   # where the KS time goes (~30 s)
python experiments/benchmarks/bench_pde.py --markdown runs/bench_pde.md --json runs/bench_pde.json
```
"""

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

_START = time.perf_counter()

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    load_average,
    machine_info,
    today,
    versions,
    write_reports,
)
from _pde_memory import bench_memory, grad_child  # noqa: E402
from _pde_problems import (  # noqa: E402
    GS_LENGTH,
    KS_LENGTH,
    KS_T1,
    difsim_solve,
    gs_model,
    gs_params,
    ks_model,
    max_error,
    steps_of,
)
from _pde_report import matched, render, summary  # noqa: E402
from _pde_timing import fresh_run, rows_of, time_contenders  # noqa: E402
from _pde_variants import PhysicalKS, raw_diffrax_ks  # noqa: E402
from _report import render_header  # noqa: E402

IMPORT_S = time.perf_counter() - _START  # what a fresh difsim process spends on imports
REF_FACTOR = 16  # the reference solve takes steps REF_FACTOR times smaller than the smallest
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
        gs_sizes=args.gs_sizes or ([128, 256] if full else [128]),
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
        calls[f"d{dt}"] = partial(difsim_solve("gs", "etdrk4", dt, t1), model)
        meta[f"d{dt}"] = ("difsim ETDRK4", dt, steps, "fd")
        calls[f"t{dt}"] = partial(difsim_solve("gs", "tsit5", dt, t1), model)
        meta[f"t{dt}"] = ("difsim Tsit5", dt, steps, "fd")
        calls[f"e{dt}"] = partial(exponax_gray_scott(n, GS_LENGTH, dt, steps, params), y0)
        meta[f"e{dt}"] = ("exponax ETDRK4 (spectral)", dt, steps, "spectral")
    repeats = max(3, cfg.repeats // 3)
    print(f"  {len(calls)} solves, {repeats} repeats ...", flush=True)
    load = load_average()
    first, steady, results = time_contenders(calls, repeats)
    rows = rows_of(first, steady, results, refs, "gs", meta)
    out = dict(n=n, t1=t1, ref_dt=ref_dt, params=params, rows=rows, repeats=repeats)
    out["load"] = (load, load_average())
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
            ("difsim", "etdrk4", "difsim ETDRK4", "fd"),
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


# ------------------------------------------------------------------ 4. where KS time goes
def bench_variants(n: int, cfg: Settings, dt: float = 0.125) -> dict:
    """One KS solve written five ways: where difsim's time goes relative to exponax."""
    from _pde_refs import exponax_ks

    model = ks_model(n)
    physical = PhysicalKS(grid=model.grid)
    u0 = jnp.asarray(model.initial_state()["u"])
    steps = steps_of(KS_T1, dt)
    solve = difsim_solve("ks", "default", dt, KS_T1)
    calls = {
        "difsim, zoo model (non-stiff term as a spectrum)": partial(solve, model),
        "difsim, non-stiff term in physical space": partial(solve, physical),
        "diffrax + difsim's ETDRK4, hand-written terms": partial(
            raw_diffrax_ks(n, KS_LENGTH, dt, KS_T1, steps), u0
        ),
        "exponax.repeat (physical space)": partial(
            exponax_ks(n, KS_LENGTH, dt, steps, repeat=True), u0
        ),
        "exponax (Fourier-space loop)": partial(exponax_ks(n, KS_LENGTH, dt, steps), u0),
    }
    _, steady, results = time_contenders(calls, cfg.repeats)
    base = results["difsim, zoo model (non-stiff term as a spectrum)"]
    fastest = steady["exponax (Fourier-space loop)"].median
    rows = [
        dict(
            variant=name,
            steps_per_s=steps / steady[name].median,
            vs_exponax=steady[name].median / fastest,
            difference=float(np.max(np.abs(results[name] - base))),
        )
        for name in calls
    ]
    return dict(n=n, dt=dt, steps=steps, rows=rows)


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
                        choices=["ks", "gs", "memory", "variants"],
                        help="what to run (default: ks gs memory; variants: where the KS time "
                        "goes)")  # fmt: skip
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
        if "variants" in cfg.parts:
            print("\nKS variants ...", flush=True)
            report["variants"] = [bench_variants(n, cfg) for n in cfg.ks_sizes]
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
