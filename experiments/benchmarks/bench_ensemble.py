"""Benchmark the ensemble engine (`difsim._ensemble`, issue 11) against diffrax and scipy.

Problems (final state only, Tsit5 + PID at `rtol = atol = 1e-6`, float32, `t` in `[0, 1]`):

- **Lorenz** (`sigma = 10`, `beta = 8/3`, `u0 = (1, 0, 0)`), `rho = linspace(0, 21, N)`,
  `N = 1e3 … 1e5` (and `1e6` when asked);
- **Lorenz-96**, 40 variables on a ring, forcing `F = linspace(4, 12, N)`, `N = 1e3, 1e4`.

Contenders, timed interleaved (A B C A B C …, the first rotating) in one process, medians
of process CPU time and wall time over rounds, load average recorded:
(a) `simulate_ensemble` jitted; (b) `ds.sweep(engine="auto")`; (c) `ds.sweep(engine=
"diffrax")`; (d) `jax.jit(jax.vmap(diffrax.diffeqsolve))`; (e) the same solve in chunks
with `lax.map(batch_size=...)`; (f) a scipy `solve_ivp` RK45 loop over a subset of lanes,
extrapolated. Beside each time: the max and median over those lanes of the error against
float64 DOP853 at `rtol = atol = 1e-12`. A contender whose call would take longer than
`--max-call-s` (estimated from the previous size) is skipped, and the table says so.

Also: the engine's block size (64 … N) at one N; `jax.grad` of a sum-of-squares loss
w.r.t. the shared `(sigma, beta)` and w.r.t. each lane's `rho`, engine vs diffrax's
checkpointed adjoint, each against its own forward; the engine's FLOPs per lane-step (XLA's
cost analysis of one step) times the steps taken, over CPU time, as a % of the vector peak;
and the opcode census of each compiled step loop.

```
python experiments/benchmarks/bench_ensemble.py --quick               # a few minutes, noisy
python experiments/benchmarks/bench_ensemble.py --sizes 1e3,1e4,1e5,1e6 --rounds 9 \
    --markdown runs/bench_ensemble.md --json runs/bench_ensemble.json
python experiments/benchmarks/bench_ensemble.py --skip lorenz96 grad --sizes 1e4
```
"""

import argparse
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", False)  # the benchmark is specified in float32

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    interleaved,
    load_average,
    machine_info,
    time_call,
    today,
    versions,
    write_reports,
)
from _ensemble_analysis import (  # noqa: E402
    crossover_cases,
    grad_agreement,
    grad_cases,
    hlo_census,
    step_flops,
    vector_peak,
)
from _ensemble_overhead import bench_overhead, overhead_summary, render_overhead  # noqa: E402
from _ensemble_problems import (  # noqa: E402
    L96,
    LORENZ,
    RTOL,
    Problem,
    chunked_fn,
    engine_arg_fn,
    engine_fn,
    engine_status_fn,
    errors,
    reference,
    scipy_loop,
    subset,
    sweep_engine_available,
    sweep_fn,
    vmap_fn,
)
from _ensemble_report import render, render_header, summary  # noqa: E402

from difsim._ensemble._solve import default_block  # noqa: E402

SECTIONS = ("lorenz", "overhead", "blocks", "lorenz96", "grad", "crossover", "flops", "hlo")


def contenders(problem: Problem, chunk: int, which: str) -> dict:
    """Name → callable (or `None`: not available yet) for the letters in `which`."""
    table = {
        "a engine": lambda: engine_fn(problem),
        "a2 engine, model as argument": lambda: engine_arg_fn(problem),
        "a3 engine, model as argument, statuses": lambda: engine_status_fn(problem),
        "b sweep auto": lambda: sweep_fn(problem, "auto"),
        "c sweep diffrax": lambda: sweep_fn(problem, "diffrax"),
        "d diffrax vmap": lambda: vmap_fn(problem),
        "e diffrax lax.map": lambda: chunked_fn(problem, chunk),
    }
    return {name: make() for name, make in table.items() if name[0] in which}


def bench_size(problem: Problem, n: int, fns: dict, args, cost: dict) -> dict:
    """One size: every contender interleaved; errors on `--lanes-checked` lanes."""
    values = problem.values(n)
    idx = subset(n, args.lanes_checked)
    ref = reference(problem, values[idx])
    row = dict(n=n, load_before=load_average(), skipped={}, first_call_s={}, lanes_checked=len(idx))
    live = {}
    for name, fn in fns.items():
        estimate = cost.get(name, 0.0) * n
        if fn is None:
            row["skipped"][name] = "ds.sweep has no engine= argument on this revision"
        elif estimate > args.max_call_s:
            row["skipped"][name] = f"~{estimate:.0f} s CPU per call (> --max-call-s)"
        else:
            row["first_call_s"][name] = time_call(fn, values)[0]  # compile, warm up
            live[name] = fn
    wall, cpu = interleaved(live, (values,), args.rounds)
    row["wall"] = {k: Stats(v).as_dict() for k, v in wall.items()}
    row["cpu"] = {k: Stats(v).as_dict() for k, v in cpu.items()}
    row["errors"] = {k: errors(fn(values)[idx], ref) for k, fn in live.items()}
    row["engine_used"] = {k: fn.used for k, fn in live.items() if hasattr(fn, "used")}
    for k in live:
        cost[k] = row["cpu"][k]["median"] / n
    if args.scipy:
        sp = scipy_loop(problem, values[idx].astype(np.float64), "RK45", RTOL)
        row["scipy"] = dict(
            lanes=len(idx), per_lane_s=sp["per_lane_s"], cpu_per_lane_s=sp["cpu_per_lane_s"],
            extrapolated_cpu_s=sp["cpu_per_lane_s"] * n, errors=errors(sp["finals"], ref),
        )  # fmt: skip
    row["load_after"] = load_average()
    return row


def bench_problem(problem: Problem, sizes: list[int], which: str, args) -> list[dict]:
    fns, cost, rows = contenders(problem, args.chunk, which), {}, []
    for n in sizes:
        print(f"  {problem.name}, N = {n:,} ...", flush=True)
        rows.append(bench_size(problem, n, fns, args, cost))
    return rows


def bench_blocks(problem: Problem, n: int, blocks: list[int], rounds: int) -> dict:
    """The engine at one `N` with each block size (and its default): CPU time, and the
    share of executed lane-steps that were useful (a block runs until its slowest lane is
    done)."""
    values = problem.values(n)
    fns = {b: engine_fn(problem, block_size=b) for b in blocks}
    fns["default"] = engine_fn(problem)
    for fn in fns.values():
        time_call(fn, values)
    wall, cpu = interleaved(fns, (values,), rounds)
    steps = np.asarray(fns[blocks[0]].solution(values).num_steps)
    rows = []
    for b in fns:
        size = default_block(n, problem.size) if b == "default" else b
        pad = -n % size
        per = np.r_[steps, np.repeat(steps[-1:], pad)].reshape(-1, size)
        executed = int(per.max(axis=1).sum()) * size
        rows.append(dict(block=b if b != "default" else f"default ({size})",
                         wall=Stats(wall[b]).as_dict(), cpu=Stats(cpu[b]).as_dict(),
                         useful=float(steps.sum() / executed)))  # fmt: skip
    return dict(problem=problem.name, n=n, rows=rows)


def bench_grad(n: int, n_l96: int, rounds: int) -> list[dict]:
    """Each gradient case: the engine's forward loss, its gradient with each adjoint and
    diffrax's, interleaved; and how the gradients agree."""
    out = []
    for case in grad_cases(n, n_l96):
        print(f"    {case['name']} ...", flush=True)
        fns, args = case["fns"], case["args"]
        load = load_average()
        first = {k: time_call(fn, *args)[0] for k, fn in fns.items()}
        wall, cpu = interleaved(fns, args, rounds)
        out.append(dict(
            name=case["name"], scalars=case["scalars"], n=case["n"], first_call_s=first,
            wall={k: Stats(v).as_dict() for k, v in wall.items()},
            cpu={k: Stats(v).as_dict() for k, v in cpu.items()},
            agreement=grad_agreement(case), load_before=load, load_after=load_average(),
        ))  # fmt: skip
    return out


def bench_crossover(counts: list[int], n: int, n_l96: int, rounds: int) -> list[dict]:
    """Forward against reverse mode by the number of differentiated scalars, interleaved."""
    out = []
    for case in crossover_cases(counts, n, n_l96):
        print(f"    {case['name']}, P = {case['scalars']} ...", flush=True)
        fns, args = case["fns"], case["args"]
        for fn in fns.values():
            time_call(fn, *args)  # compile, warm up
        _, cpu = interleaved(fns, args, rounds)
        out.append(dict(name=case["name"], scalars=case["scalars"], n=case["n"],
                        cpu={k: Stats(v).as_dict() for k, v in cpu.items()}))  # fmt: skip
    return out


def bench_flops(n: int, rounds: int, peak: dict) -> dict:
    """Achieved FLOP rate of the engine on the Lorenz sweep (default block size)."""
    values = LORENZ.values(n)
    fn = engine_fn(LORENZ)
    time_call(fn, values)
    _, cpu = interleaved({"engine": fn}, (values,), rounds)
    sol = fn.solution(values)
    per_step = step_flops(LORENZ)
    steps = int(np.asarray(sol.num_steps).sum())
    cpu_s = Stats(cpu["engine"]).median
    rate = per_step["step"] * steps / cpu_s
    useful = per_step["arithmetic"] * steps / cpu_s
    return dict(n=n, flops=per_step, steps=steps, cpu_s=cpu_s, flop_rate=rate,
                percent_core_peak=100 * rate / peak["per_core_flops"],
                percent_core_peak_arithmetic=100 * useful / peak["per_core_flops"])  # fmt: skip


def parse_sizes(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=parse_sizes, help="Lorenz sizes (default 1e3,1e4,1e5)")
    p.add_argument("--l96-sizes", type=parse_sizes, help="Lorenz-96 sizes (default 1e3,1e4)")
    p.add_argument("--rounds", type=int, help="interleaved rounds per size (default 7)")
    p.add_argument("--quick", action="store_true", help="N = 1e3, 1e4; 3 rounds; 50 lanes")
    p.add_argument("--lanes-checked", type=int, help="lanes for errors and scipy (default 200)")
    p.add_argument("--no-scipy", dest="scipy", action="store_false", help="skip (f)")
    p.add_argument("--chunk", type=int, default=1024, help="lax.map batch of (e) (1024)")
    p.add_argument("--max-call-s", type=float, default=60.0, help="skip slower contenders")
    p.add_argument("--blocks", type=parse_sizes, help="block sizes (default 64 … N)")
    p.add_argument("--block-n", type=int, default=10_000, help="N of the block sweep")
    p.add_argument("--grad-n", type=int, default=10_000, help="N of the Lorenz gradients")
    p.add_argument("--grad-l96-n", type=int, default=1_000, help="N of the Lorenz-96 gradient")
    p.add_argument("--crossover-p", type=parse_sizes, default=[6, 12, 24, 40],
                   help="differentiated scalars of the crossover section (6,12,24,40)")  # fmt: skip
    p.add_argument("--fma-units", type=int, default=2, help="FMA pipes per core (peak)")
    p.add_argument("--vector-bits", type=int, help="vector width of the peak (default 256)")
    p.add_argument(
        "--overhead-sizes", type=parse_sizes, help="sizes of the overhead section (default 1e4,1e5)"
    )
    p.add_argument(
        "--overhead-rounds",
        type=int,
        default=60,
        help="interleaved rounds of the overhead section (60)",
    )
    p.add_argument(
        "--twins",
        type=int,
        default=5,
        help="compilations of each engine program in the overhead section (5)",
    )
    p.add_argument("--skip", nargs="+", default=[], choices=SECTIONS)
    p.add_argument("--markdown", type=Path, metavar="PATH", help="write Markdown tables here")
    p.add_argument("--json", type=Path, metavar="PATH", help="write raw results here")
    return p


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    quick = args.quick
    sizes = args.sizes or ([1_000, 10_000] if quick else [1_000, 10_000, 100_000])
    l96_sizes = args.l96_sizes or [1_000, 10_000]
    args.rounds = args.rounds or (3 if quick else 7)
    args.lanes_checked = args.lanes_checked or (50 if quick else 200)
    blocks = args.blocks or [b for b in (64, 128, 256, 512, 1024, 2048, 4096) if b < args.block_n]
    blocks = sorted(set(blocks) | {args.block_n})
    peak = vector_peak(args.fma_units, args.vector_bits)
    report = dict(date=today(), machine=machine_info(), versions=versions(),
                  command=command_line(), rounds=args.rounds, peak=peak,
                  sweep_engine=sweep_engine_available())  # fmt: skip
    print(render_header(report), flush=True)
    if "lorenz" not in args.skip:
        report["lorenz"] = bench_problem(LORENZ, sizes, "abcde", args)
    if "overhead" not in args.skip:
        report["overhead"] = bench_overhead(
            LORENZ, args.overhead_sizes or [10_000, 100_000], args.overhead_rounds, args.twins
        )
    if "blocks" not in args.skip:
        print(f"  block sizes at N = {args.block_n:,} ...", flush=True)
        report["blocks"] = [
            bench_blocks(LORENZ, args.block_n, blocks, args.rounds),
            bench_blocks(L96, min(l96_sizes), [8, 16, 32, 64, 128, 256], args.rounds),
        ]
    if "lorenz96" not in args.skip:
        report["lorenz96"] = bench_problem(L96, l96_sizes, "abd", args)
    if "grad" not in args.skip:
        print(f"  gradients at N = {args.grad_n:,} ...", flush=True)
        report["grad"] = bench_grad(args.grad_n, args.grad_l96_n, args.rounds)
    if "crossover" not in args.skip:
        print(f"  forward against reverse mode, P = {args.crossover_p} ...", flush=True)
        report["crossover"] = bench_crossover(
            args.crossover_p, args.grad_n, args.grad_l96_n, args.rounds
        )
    if "flops" not in args.skip:
        report["flops"] = bench_flops(max(sizes), args.rounds, peak)
    if "hlo" not in args.skip:
        report["hlo"] = hlo_census(1024)
    report["load_after"] = load_average()
    overhead = report.get("overhead")
    extra = lambda md: "\n\n" + render_overhead(overhead, md) if overhead else ""  # noqa: E731
    verdicts = "\n".join(overhead_summary(overhead)) if overhead else ""
    print("\n" + render(report, markdown=False) + extra(False) + "\n\n" + summary(report)
          + "\n" + verdicts)  # fmt: skip
    text = render_header(report) + "\n\n" + render(report, markdown=True) + extra(True)
    write_reports(report, args.markdown, args.json, text)
    return report


if __name__ == "__main__":
    main()
