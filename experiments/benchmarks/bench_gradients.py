"""Benchmark the cost of a gradient through a solve against the solve itself (issue 28.6).

Reverse-mode `jax.grad` of a loss through difsim's solve and through the same solve written
with diffrax + equinox by hand, each set against its own forward loss, for P = 10 … 10⁵
differentiated parameters. Float64; Tsit5 with a PID controller at `rtol = atol = 1e-6`,
`max_steps = 16384` (difsim's default; diffrax's `RecursiveCheckpointAdjoint` takes its
number of checkpoints from it), the same first step `dt0` for both.

- **network** (single trajectory): a damped oscillator plus a 2-w-w-2 tanh MLP force
  (`ds.Model` with an `eqx.nn.MLP` field; w chosen so the weights are nearest P), `t` in
  [0, 10], loss = sum of squares of both states at 21 times; gradient in the weights.
- **field** (single trajectory): the 1-D periodic heat equation `ds.models.Heat` on P cells
  of width 1 (`D = 0.5`: the same stiffness, so the same steps, on every grid), Tsit5 with
  PID, initial field uniform in [0, 1], loss = sum of squares of the field at 11 times in
  [0, 20]; gradient in the initial field (P = cells).
- **rhs**: where a wide network's gradient goes: 192 evaluations of the largest network
  alone, and their weight gradient formed one VJP per evaluation (as reverse mode through
  a time loop does) or batched over all evaluations (one matrix product per layer).
- **ensemble**: issue 28's case, `dy/dt = MLP(y)`, MLP 2-32-32-2 (1,218 weights, tanh),
  256 lanes with initial states uniform in [-1, 1]², `t` in [0, 2], loss = sum of squares
  of every lane's states at 21 times: `ds.simulate_ensemble` (default adjoint) against
  `jax.vmap` of `diffrax.diffeqsolve`; gradient in the shared weights. Where difsim refuses
  the model its rows are reported as skipped with the error.
- **ude**: one optax Adam step (lr 1e-2) of the UDE Lotka–Volterra of Rackauckas et al.
  2020 (p = (1.3, 0.9, 0.8, 1.8), u0 = (0.44249296, 4.6280594), t in [0, 5] every 0.25,
  data with 5 % noise; a 2-5-5-5-2 rbf MLP replaces the interaction terms; loss = MSE),
  difsim (`jax.grad` through `ds.simulate`) against diffrax + equinox + optax by hand.

Every contender is compiled ahead of time (`jax.jit(...).lower(...).compile()`), which also
gives XLA's temporary memory of the program (`memory_analysis().temp_size_in_bytes`: the
peak of its intermediate buffers, arguments and outputs aside; not RSS). Then the
contenders of a problem are timed interleaved in one process (A B C D, B C D A, …) by
process CPU time (steadier than wall time on a shared machine) and wall time, medians of
`--repeats` rounds; calls under 50 ms are timed in bursts. The load average is recorded
before and after each problem.

```
python experiments/benchmarks/bench_gradients.py                  # ~5 minutes on 2 cores (load 2)
python experiments/benchmarks/bench_gradients.py --quick          # P = 10, 1000; 3 repeats
python experiments/benchmarks/bench_gradients.py --parts ensemble ude \\
    --markdown runs/bench_gradients.md --json runs/bench_gradients.json
```
"""

import argparse
import math
import statistics
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import _gradient_problems as gp  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import (  # noqa: E402
    VERSIONED,
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

PARTS = ("network", "rhs", "field", "ensemble", "ude")
BURST_S = 0.05  # calls shorter than this are timed in bursts of several


# ------------------------------------------------------------------ compiling and timing
def compile_fn(fn, args: tuple):
    """`fn` compiled for `args` (pytrees: their arrays are the program's inputs, the rest is
    baked in), with its compile time and XLA's memory figures."""
    arrays, static = eqx.partition(args, eqx.is_array)

    def flat(arrays):
        return eqx.filter(fn(*eqx.combine(arrays, static)), eqx.is_array)

    wall, cpu = time.perf_counter(), time.process_time()
    compiled = jax.jit(flat).lower(arrays).compile()
    info = dict(compile_s=time.perf_counter() - wall, compile_cpu_s=time.process_time() - cpu)
    mem = compiled.memory_analysis()
    if mem is not None:
        info |= dict(temp_bytes=mem.temp_size_in_bytes, argument_bytes=mem.argument_size_in_bytes,
                     output_bytes=mem.output_size_in_bytes)  # fmt: skip
    return compiled, arrays, info


def _burst(fn, n: int):
    def run(x):
        for _ in range(n - 1):
            fn(x)
        return fn(x)

    return run


def _rel(a, b) -> float:
    """max |a - b| / max |b| over the arrays of two pytrees of the same structure."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    num = max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(la, lb))
    return num / max(float(jnp.max(jnp.abs(y))) for y in lb)


def agreement(out: dict, pairs: list) -> dict:
    """difsim against diffrax: relative differences of losses, gradients, updated states;
    and of the outputs of each pair of contenders in `pairs`."""
    res = {f"{a} vs {b}": _rel(out[a], out[b]) for a, b in pairs if a in out and b in out}
    for kind in ("loss", "grad", "step"):
        d, h = out.get(f"difsim {kind}"), out.get(f"diffrax {kind}")
        if d is not None and h is not None:
            res[kind] = _rel(d[0] if kind == "loss" else d, h[0] if kind == "loss" else h)
    return res


def run_problem(problem: dict, repeats: int) -> dict:
    """Compile, check and time every contender of `problem` (see `_gradient_problems`)."""
    args = problem["x"] if isinstance(problem["x"], tuple) else (problem["x"],)
    row = dict(name=problem["name"], P=problem["P"], load_before=load_average(), skipped={})
    arrays = eqx.filter(args, eqx.is_array)
    compiled, info, out = {}, {}, {}
    for name, fn in problem["fns"].items():
        try:
            compiled[name], _, info[name] = compile_fn(fn, args)
            out[name] = jax.block_until_ready(compiled[name](arrays))
        except Exception as e:  # a contender that cannot run is reported, not fatal
            row["skipped"][name] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            compiled.pop(name, None)
            print(f"  {name}: skipped ({row['skipped'][name]})")
    static = eqx.partition(args, eqx.is_array)[1]
    for name, fn in problem.get("user", {}).items():
        jitted = eqx.filter_jit(fn)
        compiled[name] = lambda a, f=jitted: f(*eqx.combine(a, static))
        wall, cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled[name](arrays))
        info[name] = dict(compile_s=time.perf_counter() - wall,
                          compile_cpu_s=time.process_time() - cpu)  # fmt: skip
    row["steps"] = {k.split()[0]: int(v[1]) for k, v in out.items() if k.endswith("loss")}
    row["agreement"] = agreement(out, problem.get("pairs", []))
    bursts = {}
    for name, fn in compiled.items():
        start = time.perf_counter()
        jax.block_until_ready(fn(arrays))
        bursts[name] = max(1, min(200, math.ceil(BURST_S / (time.perf_counter() - start))))
    fns = {k: _burst(f, bursts[k]) for k, f in compiled.items()}
    wall, cpu = interleaved(fns, (arrays,), repeats)
    row["timing"] = {
        k: dict(cpu_s=statistics.median(cpu[k]) / bursts[k],
                wall_s=statistics.median(wall[k]) / bursts[k], burst=bursts[k],
                cpu_samples=cpu[k], wall_samples=wall[k], **info[k])
        for k in compiled
    }  # fmt: skip
    row["load_after"] = load_average()
    _print_row(row)
    return row


def _print_row(row: dict) -> None:
    t = row["timing"]
    cells = [f"{k} {seconds(v['cpu_s'])}" for k, v in t.items()]
    print(f"  {row['name']} (P = {row['P']:,}), steps {row['steps']}: " + ", ".join(cells))
    for who in ("difsim", "diffrax"):
        loss, grad = t.get(f"{who} loss"), t.get(f"{who} grad") or t.get(f"{who} step")
        if loss and grad:
            print(f"    {who}: gradient / forward = {grad['cpu_s'] / loss['cpu_s']:.2f}")


# ------------------------------------------------------------------ tables
def _ratio(t: dict, a: str, b: str) -> str:
    if a not in t or b not in t:
        return "skipped"
    return f"{t[a]['cpu_s'] / t[b]['cpu_s']:.2f} ({t[a]['wall_s'] / t[b]['wall_s']:.2f})"


def _time(t: dict, k: str) -> str:
    return seconds(t[k]["cpu_s"]) if k in t else "skipped"


def _mib(t: dict, k: str) -> str:
    return f"{t[k]['temp_bytes'] / 2**20:.2f}" if k in t and "temp_bytes" in t[k] else "n/a"


STORED, SCAN = "diffrax grad, checkpoints = steps", "scan grad"


def gradient_table(rows: list[dict], markdown: bool) -> str:
    head = ["P", "problem", "steps difsim / diffrax", "difsim loss", "difsim grad",
            "difsim grad / loss", "difsim, checkpointed loops: grad / loss",
            "difsim discrete: grad / loss", "discrete / diffrax grad", "diffrax loss",
            "diffrax grad", "diffrax grad / loss",
            "difsim grad / diffrax grad", "diffrax, checkpoints = steps: grad / loss",
            "scan floor: grad / loss", "XLA temp MiB, grad: difsim / diffrax / checkpoints "
            "= steps", "rel. diff loss, grad"]  # fmt: skip
    body = []
    for r in rows:
        t, s, a = r["timing"], r["steps"], r["agreement"]
        body.append(
            [f"{r['P']:,}", r["name"], f"{s.get('difsim', '-')} / {s.get('diffrax', '-')}",
             _time(t, "difsim loss"), _time(t, "difsim grad"),
             _ratio(t, "difsim grad", "difsim loss"),
             _ratio(t, gp.CHECKPOINTED, "difsim loss") if gp.CHECKPOINTED in t else "-",
             _ratio(t, gp.DISCRETE, "difsim loss") if gp.DISCRETE in t else "-",
             _ratio(t, gp.DISCRETE, "diffrax grad") if gp.DISCRETE in t else "-",
             _time(t, "diffrax loss"),
             _time(t, "diffrax grad"), _ratio(t, "diffrax grad", "diffrax loss"),
             _ratio(t, "difsim grad", "diffrax grad"),
             _ratio(t, STORED, "diffrax loss") if STORED in t else "-",
             _ratio(t, SCAN, "scan loss") if SCAN in t else "-",
             f"{_mib(t, 'difsim grad')} / {_mib(t, 'diffrax grad')} / {_mib(t, STORED)}",
             ", ".join(f"{a[k]:.1e}" for k in ("loss", "grad") if k in a) or "n/a"]
        )  # fmt: skip
    text = format_table(head, body, markdown)
    for r in rows:
        for name, err in r["skipped"].items():
            text += f"\n\n{r['name']}: {name} skipped: `{err}`"
    return text


def rhs_table(rows: list[dict], markdown: bool) -> str:
    head = ["P", "problem", "evaluations", "VJP per evaluation", "VJP batched",
            "per evaluation / batched", "difference"]  # fmt: skip
    body = [
        [f"{r['P']:,}", r["name"], _time(r["timing"], "rhs evaluations"),
         _time(r["timing"], "VJP per evaluation"), _time(r["timing"], "VJP batched"),
         _ratio(r["timing"], "VJP per evaluation", "VJP batched"),
         ", ".join(f"{v:.1e}" for v in r["agreement"].values())]
        for r in rows
    ]  # fmt: skip
    return format_table(head, body, markdown)


def ude_table(r: dict, markdown: bool) -> str:
    t, s = r["timing"], r["steps"]
    head = ["contender", "Adam step, CPU", "step, wall", "loss alone, CPU", "step / loss",
            "step / diffrax step", "solver steps"]  # fmt: skip
    body = []
    for name in [k for k in t if " step" in k]:
        who, ref = name.split()[0], "diffrax step"
        loss = f"{who} loss"
        body.append(
            [
                name,
                _time(t, name),
                seconds(t[name]["wall_s"]),
                _time(t, loss),
                _ratio(t, name, loss),
                _ratio(t, name, ref),
                str(s.get(who, "-")),
            ]
        )
    a = r["agreement"]
    note = ", ".join(f"{k} {v:.1e}" for k, v in a.items())
    return format_table(head, body, markdown) + f"\n\ndifsim vs diffrax, relative: {note}."


def render(report: dict, markdown: bool) -> str:
    parts = []
    titles = {"network": "Single trajectory, network parameters",
              "field": "Single trajectory, field parameters (initial field)",
              "ensemble": "256-lane ensemble, shared network parameters"}  # fmt: skip
    for part, title in titles.items():
        if report["parts"].get(part):
            parts.append(f"{title} (CPU time; ratios CPU (wall)):\n\n"
                         + gradient_table(report["parts"][part], markdown))  # fmt: skip
    if report["parts"].get("rhs"):
        title = "Where a wide network's gradient goes, its evaluations alone (CPU time):"
        parts.append(f"{title}\n\n" + rhs_table(report["parts"]["rhs"], markdown))
    if report["parts"].get("ude"):
        parts.append("UDE Lotka–Volterra, one Adam step (CPU time; ratios CPU (wall)):\n\n"
                     + ude_table(report["parts"]["ude"][0], markdown))  # fmt: skip
    loads = [(r["name"], r["load_before"], r["load_after"])
             for rows in report["parts"].values() for r in rows]  # fmt: skip
    parts.append("Load average (1, 5, 15 min) before / after each problem: "
                 + "; ".join(f"{n}: {b} / {a}" for n, b, a in loads))  # fmt: skip
    return "\n\n".join(parts)


def render_header(report: dict) -> str:
    m, v = report["machine"], report["versions"]
    return "\n".join([
        f"- date: {report['date']}",
        f"- machine: {m['cpu']}, {m['nproc']} cores, {m['ram_gib']} GiB RAM, {m['os']}; "
        f"JAX backend {m['jax_backend']}; load average at start {m['loadavg']}",
        "- versions: " + ", ".join(f"{k} {x}" for k, x in v.items()),
        f"- command: `{report['command']}`; float64, Tsit5 + PID, rtol = atol = {gp.RTOL:g}, "
        f"{report['repeats']} interleaved repeats",
    ])  # fmt: skip


# ------------------------------------------------------------------ main
def build(part: str, sizes: list[int], anatomy_from: int) -> list:
    """Builders of the problems of `part` (called one at a time, so that the compiled code
    of one problem can be dropped before the next); the anatomy contenders (checkpoints =
    steps, scan floor) from `anatomy_from` parameters up."""
    if part == "network":
        return [lambda p=p: gp.network_problem(p, p >= anatomy_from) for p in sizes]
    if part == "rhs":
        return [lambda: gp.rhs_problem(max(sizes))]
    if part == "field":
        return [lambda p=p: gp.field_problem(p, p >= anatomy_from) for p in sizes]
    return [gp.ensemble_problem if part == "ensemble" else gp.ude_problem]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="P = 10 and 1000, 3 repeats")
    parser.add_argument("--sizes", default=None, help="P values, e.g. 10,100,1e3,1e4,1e5")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--anatomy-from", type=float, default=1e3,
                        help="anatomy contenders from this many parameters up")  # fmt: skip
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = args.sizes or ("10,1e3" if args.quick else "10,100,1e3,1e4,1e5")
    sizes = [int(float(s)) for s in sizes.split(",")]
    repeats = args.repeats or (3 if args.quick else 5)
    report = dict(date=today(), command=command_line(), machine=machine_info(),
                  versions=versions((*VERSIONED, "optax")), repeats=repeats, sizes=sizes,
                  rtol=gp.RTOL, atol=gp.ATOL, parts={})  # fmt: skip
    start = time.perf_counter()
    for part in args.parts:
        print(f"{part} ({time.perf_counter() - start:.0f} s)", flush=True)
        report["parts"][part] = []
        for make in build(part, sizes, int(args.anatomy_from)):
            report["parts"][part].append(run_problem(make(), repeats))
            jax.clear_caches()
    report["total_s"] = time.perf_counter() - start
    text = render(report, markdown=False)
    print(f"\n{text}\n\ntotal {report['total_s']:.0f} s")
    md = render_header(report) + "\n\n" + render(report, markdown=True)
    write_reports(report, args.markdown, args.json, md)


if __name__ == "__main__":
    main()
