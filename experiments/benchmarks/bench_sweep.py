"""Benchmark `difsim.sweep` on the DiffEqGPU Lorenz problem: overhead, scaling, memory.

The problem: Lorenz with `sigma = 10`, `beta = 8/3`, initial state `(1, 0, 0)`, `t` in
`[0, 1]`, `rho = linspace(0, 21, N)`, Tsit5 with a PID controller at `rtol = atol = 1e-6`,
float32, final state only. Measured side by side in one process:

1. **Overhead**: `ds.sweep(Lorenz(), GridSweep({"rho": rhos}), ...)` against the same solve
   written by hand, `jax.jit(jax.vmap(diffrax.diffeqsolve))` on all `N` at once (its result
   copied to the host, as the sweep's is), for `N = 1e4, 1e5`: medians of interleaved repeats.
2. **scipy**: a Python loop of `solve_ivp` (RK45, float64) over an evenly spaced subset,
   extrapolated to `N`.
3. **Scaling**: sweep time vs `N = 1e3 ... 1e6` and the slope of `log t` against `log N`
   (`scipy.stats.linregress`).
4. **Memory**: peak resident memory (`ru_maxrss`) of a fresh process that runs one sweep of
   `N`, with a memory budget small enough that the sweep is chunked from `N = 1e5` on, and
   of one that runs the hand-written solve on all `N` at once (plus the device's own peak
   where the backend reports one, e.g. on GPU).

```
python experiments/benchmarks/bench_sweep.py                 # a few minutes on 2 cores
python experiments/benchmarks/bench_sweep.py --quick         # about a minute
python experiments/benchmarks/bench_sweep.py --sizes 1000 100000 10000000 \
    --overhead-sizes 10000 100000 1000000 --markdown runs/bench_sweep.md   # a GPU
```
"""

import argparse
import json
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", False)  # the benchmark is specified in float32

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    format_table,
    interleaved,
    load_average,
    machine_info,
    seconds,
    time_call,
    today,
    versions,
    write_reports,
)
from _report import render_header  # noqa: E402
from _sweep_contenders import raw_fn, rho_values, sweep_fn  # noqa: E402
from _sweep_memory import bench_memory, rss_child, sweep_chunk_size  # noqa: E402
from bench_simulate import max_abs_diff, run_scipy  # noqa: E402

TARGET_OVERHEAD = 1.05  # ds.sweep may cost at most 5% more than jit(vmap(diffeqsolve))
# For the memory table: ~4,600 trajectories per chunk (float32 Lorenz, final state), so the
# budget, not the sweep's N/32 rule, sets the chunk size from N ~ 1.5e5 on.
DEFAULT_BUDGET = 4 * 2**20
DEFAULT_ENGINE_BUDGET = 2**30  # ds.sweep's own default, to show its chunk sizes


# ------------------------------------------------------------------ measurements
def bench_overhead(n: int, repeats: int, scipy_subset: int) -> dict:
    rhos = rho_values(n)
    fns = {
        "sweep": sweep_fn(),  # what a user gets: chunks from the default memory budget
        "sweep one chunk": sweep_fn(chunk_size=n),  # the same batch as the hand-written solve
        "diffrax": raw_fn(),
    }
    first = {name: time_call(fn, rhos)[0] for name, fn in fns.items()}  # compile, warm up
    wall, cpu = interleaved(fns, (rhos,), repeats)
    outs = {name: fn(rhos) for name, fn in fns.items()}
    result = dict(
        n=n,
        first_call_s=first,
        steady={k: Stats(v).as_dict() for k, v in wall.items()},
        steady_cpu={k: Stats(v).as_dict() for k, v in cpu.items()},
        max_abs_diff={k: max_abs_diff(outs[k], outs["diffrax"]) for k in fns},
        nonfinite=int((~np.isfinite(outs["sweep"])).any(axis=-1).sum()),
    )
    if scipy_subset > 0:
        sp = run_scipy(rhos.astype(np.float64), scipy_subset)
        result["scipy"] = dict(
            n=sp["n"],
            per_traj_s=sp["per_traj_s"],
            extrapolated_s=sp["extrapolated_s"],
            max_abs_diff=max_abs_diff(outs["sweep"][sp["index"]], sp["finals"]),
        )
    return result


def bench_scaling(sizes: list[int], repeats: int, fixed_chunk: int) -> dict:
    """Sweep time against `N`, with the default chunking (chunks grow as `N / 32` up to the
    memory budget) and with a fixed chunk size (the cost per trajectory then stays put)."""
    from scipy.stats import linregress

    series = {"default": sweep_fn(), "fixed": sweep_fn(chunk_size=fixed_chunk)}
    rows = []
    for n in sizes:
        rhos = rho_values(n)
        row = dict(n=n, chunk=sweep_chunk_size(n, DEFAULT_ENGINE_BUDGET))
        for name, fn in series.items():
            first = time_call(fn, rhos)[0]
            wall = [time_call(fn, rhos)[0] for _ in range(repeats)]
            row[name] = dict(first_call_s=first, steady=Stats(wall).as_dict())
        rows.append(row)
        print(f"  N = {n:>10,}: {seconds(row['default']['steady']['median'])} (default), "
              f"{seconds(row['fixed']['steady']['median'])} (chunk {fixed_chunk:,})",
              flush=True)  # fmt: skip

    def slope(points, name):
        if len(points) < 2:
            return None
        fit = linregress(np.log([r["n"] for r in points]),
                         np.log([r[name]["steady"]["median"] for r in points]))  # fmt: skip
        return dict(slope=fit.slope, stderr=fit.stderr, r=fit.rvalue, from_n=points[0]["n"])

    # Below ~1e4 trajectories fixed costs (dispatch, building the Dataset) dominate: the
    # slope of the large sizes is the one that says whether the sweep scales linearly.
    large = [r for r in rows if r["n"] >= 10_000]
    return dict(
        rows=rows,
        fixed_chunk=fixed_chunk,
        slopes={name: dict(all=slope(rows, name), large=slope(large, name)) for name in series},
    )


# ------------------------------------------------------------------ report
def _mib(x: int | None) -> str:
    return "n/a" if x is None else f"{x / 2**20:,.0f} MiB"


def _growth(row: dict) -> str:
    if row.get("run_peak_bytes") is None or row.get("rss_before_bytes") is None:
        return "n/a"
    return _mib(row["run_peak_bytes"] - row["rss_before_bytes"])


def _ratio_cell(report_row: dict, name: str) -> str:
    s, raw = report_row["steady"][name], report_row["steady"]["diffrax"]
    return f"{s['median'] / raw['median']:.3f} ({s['min'] / raw['min']:.3f})"


def render(report: dict, markdown: bool) -> str:
    parts = []
    if report.get("overhead"):
        head = ["N", "sweep", "sweep one chunk", "jit(vmap(diffeqsolve))",
                "sweep / diffrax", "one chunk / diffrax", "one chunk / diffrax CPU",
                "max abs diff", "scipy loop (extrapolated)", "sweep vs scipy",
                "diffrax vs scipy"]  # fmt: skip
        rows = []
        for r in report["overhead"]:
            st, cpu, sp = r["steady"], r["steady_cpu"], r.get("scipy")
            cells = [f"{r['n']:,}"]
            cells += [f"{seconds(st[k]['median'])} ({seconds(st[k]['min'])})"
                      for k in ("sweep", "sweep one chunk", "diffrax")]  # fmt: skip
            cells += [_ratio_cell(r, "sweep"), _ratio_cell(r, "sweep one chunk")]
            cells.append(f"{cpu['sweep one chunk']['median'] / cpu['diffrax']['median']:.3f}")
            cells.append(f"{max(r['max_abs_diff'].values()):.1e}")
            if sp:
                cells += [seconds(sp["extrapolated_s"]),
                          f"{sp['extrapolated_s'] / st['sweep']['median']:.0f}x",
                          f"{sp['extrapolated_s'] / st['diffrax']['median']:.0f}x"]  # fmt: skip
            else:
                cells += ["n/a"] * 3
            rows.append(cells)
        parts.append(
            f"Overhead: wall time median (min) of {report['repeats']} interleaved repeats; "
            "ratios are median (min), target ≤ "
            f"{TARGET_OVERHEAD}:\n\n" + format_table(head, rows, markdown)
        )
        sp_rows = [
            [f"{r['n']:,}", str(r["scipy"]["n"]), seconds(r["scipy"]["per_traj_s"]),
             f"{r['scipy']['max_abs_diff']:.1e}"]
            for r in report["overhead"] if r.get("scipy")
        ]  # fmt: skip
        if sp_rows:
            head = ["N", "scipy subset", "scipy per trajectory", "max abs diff sweep vs scipy"]
            table = format_table(head, sp_rows, markdown)
            parts.append("scipy `solve_ivp` (RK45, float64):\n\n" + table)
    sc = report.get("scaling")
    if sc:
        fixed = sc["fixed_chunk"]
        head = ["N", "default chunk", "sweep, default chunks", "per trajectory",
                f"sweep, chunk {fixed:,}", "per trajectory", "first call (default)"]  # fmt: skip
        rows = []
        for r in sc["rows"]:
            d, f = r["default"]["steady"], r["fixed"]["steady"]
            rows.append(
                [f"{r['n']:,}", f"{r['chunk']:,}" if r["chunk"] else "n/a",
                 f"{seconds(d['median'])} ({seconds(d['min'])})", seconds(d["median"] / r["n"]),
                 f"{seconds(f['median'])} ({seconds(f['min'])})", seconds(f["median"] / r["n"]),
                 seconds(r["default"]["first_call_s"])]
            )  # fmt: skip
        text = (
            f"Scaling: median (min) of {report['scale_repeats']} runs per size, with the "
            f"default chunking and with a fixed chunk of {fixed:,} trajectories:\n\n"
            + format_table(head, rows, markdown)
        )
        for name, what in (("default", "default chunks"), ("fixed", f"chunk {fixed:,}")):
            for key, span in (("all", "all sizes"), ("large", "N ≥ 10,000")):
                fit = sc["slopes"][name][key]
                if fit:
                    text += (
                        f"\n\nSlope of log t vs log N, {what}, {span}: {fit['slope']:.3f} "
                        f"± {fit['stderr']:.3f} (r = {fit['r']:.4f})"
                    )
        parts.append(text)
    mem = report.get("memory")
    if mem:
        by_n: dict[int, dict] = {}
        for row in mem:
            by_n.setdefault(row["n"], {})[row["contender"]] = row
        head = ["N", "sweep chunk", "sweep: run peak - start", "diffrax: run peak - start",
                "sweep process peak", "diffrax process peak", "sweep device peak",
                "diffrax device peak", "sweep run", "diffrax run"]  # fmt: skip
        rows = []
        for n, v in sorted(by_n.items()):
            sw, raw = v["sweep"], v["diffrax"]
            rows.append(
                [f"{n:,}", f"{sw['chunk_size']:,}" if sw["chunk_size"] else "n/a",
                 _growth(sw), _growth(raw), _mib(sw["maxrss_bytes"]), _mib(raw["maxrss_bytes"]),
                 _mib(sw["device_peak_bytes"]), _mib(raw["device_peak_bytes"]),
                 seconds(sw["wall_s"]), seconds(raw["wall_s"])]
            )  # fmt: skip
        budget = report["memory_budget"]
        parts.append(
            "Memory of one run in a fresh process, compiled beforehand: resident memory at "
            "the run's peak minus before it (`VmHWM` after resetting it), and the process's "
            "peak over its life (`ru_maxrss`: imports and XLA's compiler included); sweep "
            f"`memory_budget = {budget}` bytes ({_mib(budget)}), results streamed to "
            "netCDF:\n\n" + format_table(head, rows, markdown)
        )
    return "\n\n".join(parts)


def summary(report: dict) -> str:
    lines = []
    for r in report.get("overhead", []):
        for name in ("sweep", "sweep one chunk"):
            ratio = r["steady"][name]["median"] / r["steady"]["diffrax"]["median"]
            verdict = "ok" if ratio <= TARGET_OVERHEAD else "ABOVE TARGET"
            lines.append(f"N = {r['n']:,}: {name} / diffrax = {ratio:.3f} ({verdict})")
    for name, fits in (report.get("scaling") or {}).get("slopes", {}).items():
        if fits["large"]:
            lines.append(f"scaling slope (N ≥ 1e4), {name} chunks: {fits['large']['slope']:.3f}")
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    parser.add_argument("--overhead-sizes", type=int, nargs="+", help="default 1e4 1e5")
    parser.add_argument("--sizes", type=int, nargs="+", help="scaling sizes (default 1e3..1e6)")
    parser.add_argument("--memory-sizes", type=int, nargs="+", help="default: the scaling sizes")
    parser.add_argument("--repeats", type=int, help="interleaved overhead repeats (default 9)")
    parser.add_argument("--scale-repeats", type=int, help="runs per scaling size (default 3)")
    parser.add_argument("--scipy-subset", type=int, help="trajectories for scipy (0: none)")
    parser.add_argument(
        "--memory-budget",
        type=int,
        default=DEFAULT_BUDGET,
        metavar="BYTES",
        help=f"memory_budget of the sweeps in the memory table (default {DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--fixed-chunk",
        type=int,
        help="chunk size of the second scaling series (default: 1024 per CPU device; 2^17 on GPU)",
    )
    parser.add_argument("--skip", nargs="+", default=[], choices=["overhead", "scaling", "memory"])
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write Markdown tables here")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw results here")
    parser.add_argument("--rss-child", nargs=2, metavar=("CONTENDER", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    budget = args.memory_budget
    if args.rss_child:
        print(json.dumps(rss_child(args.rss_child[0], int(args.rss_child[1]), budget)))
        return {}

    quick = args.quick
    overhead_sizes = args.overhead_sizes or ([10_000] if quick else [10_000, 100_000])
    sizes = args.sizes or ([1_000, 10_000, 100_000] if quick else [10**k for k in range(3, 7)])
    memory_sizes = args.memory_sizes or ([10_000, 1_000_000] if quick else sizes)
    repeats = args.repeats or (5 if quick else 9)
    scale_repeats = args.scale_repeats or (2 if quick else 3)
    scipy_subset = args.scipy_subset if args.scipy_subset is not None else (50 if quick else 200)

    report = dict(
        date=today(),
        machine=machine_info(),
        versions=versions(),
        command=command_line(),
        repeats=repeats,
        scale_repeats=scale_repeats,
        memory_budget=budget,
    )
    print(render_header(report), flush=True)
    if "overhead" not in args.skip:
        report["overhead"] = []
        for n in overhead_sizes:
            print(f"\noverhead, N = {n:,} ...", flush=True)
            report["overhead"].append(bench_overhead(n, repeats, scipy_subset))
    if "scaling" not in args.skip:
        print("\nscaling ...", flush=True)
        fixed = args.fixed_chunk or (
            1024 * jax.device_count() if jax.default_backend() == "cpu" else 2**17
        )
        report["scaling"] = bench_scaling(sizes, scale_repeats, fixed)
    if "memory" not in args.skip:
        print("\npeak memory (fresh processes) ...", flush=True)
        # Generous: a child imports, compiles, then solves N trajectories once (~10 µs each
        # on one CPU core).
        timeout = 300 + 1e-4 * max(memory_sizes)
        report["memory"] = bench_memory(memory_sizes, budget, timeout)
    report["load_after"] = load_average()
    print("\n" + render(report, markdown=False) + "\n\n" + summary(report))
    write_reports(
        report, args.markdown, args.json, render_header(report) + "\n\n" + render(report, True)
    )
    return report


if __name__ == "__main__":
    main()
