"""The overhead section of `bench_ensemble.py`: `ds.sweep` against the engine called
directly, with the luck of each compilation measured and taken out.

Two compilations of one program in one process run at speeds up to ~7 % apart (the same
HLO; where XLA places the buffers differs), which is more than the 5 % the target allows.
So a single pair (b) / (a3) measures that luck as much as the sweep. Here:

- (a3#i) the engine called directly (`simulate_ensemble` jitted by hand, returning the
  states, statuses and step counts), compiled `twins` times;
- (a4#0) the very compiled chunk `ds.sweep` runs (the same executable as (b)), called
  directly with the arguments the sweep gives it; (a4#i), i > 0, new compilations of it;
- (b) `ds.sweep(engine="auto")`.

(b) / (a4#0) is the sweep's own cost around its engine call (one executable: no luck),
timed in pairs of its own, (a4#0) (b) (b) (a4#0) …, as a user runs either one in a loop
(and, steadier, (b) - (a4#0) by the calling thread's CPU time: the solve runs on XLA's
threads, so that is the host work alone);
median(a4) / median(a3) compares the two programs over several compilations, timed in a
rotation of all of them; their product estimates `ds.sweep` / the engine called directly.
The strict reading is timed too: (b) against (a#k), the engine jitted around the fixed
model (its values compiled in, the program `jax.jit(lambda v: ...)` a user writes; states
only), `twins` compilations of it, each in pairs of its own with (b): the median over the
compilations of each one's median pair ratio. The plain (b) / (a3#1) of the rotation is
shown too, and (b) / (a4#0) in the rotation: there
nine other executables run between two calls of (b) and leave the sweep's Python objects
out of the CPU's caches, which no loop of sweeps (nor of engine calls) does: it read the
host's share 1.2-2.2x higher on 2026-11-28, and moves more from run to run. Each ratio is
taken within a pair or round and its median reported: the two sides run within a fraction
of a second, so the machine's drift cancels.
"""

import time
from collections.abc import Callable

import jax
import numpy as np
from _common import Stats, format_table, interleaved, load_average, seconds, time_call
from _ensemble_problems import (
    ATOL,
    MAX_STEPS,
    RTOL,
    T0,
    T1,
    Problem,
    _stack,
    engine_fn,
    engine_status_fn,
    sweep_fn,
)

import difsim as ds
from difsim._sweep._options import SweepOptions
from difsim._sweep._runner import _compiled, chunk_runner
from difsim._sweep._setup import prepare
from difsim._sweep._sweep import _mesh, run_sweep

TARGET_OVERHEAD = 1.05


def sweep_chunk_fn(problem: Problem, values: np.ndarray, fresh: bool) -> Callable:
    """(a4) the compiled chunk of the in-memory `ds.sweep` of `values` (one chunk of all
    of them, checked), called directly; `fresh`: a new compilation of it."""
    spec = ds.GridSweep({problem.key: values})
    options = SweepOptions(t0=T0, t1=T1, save="final", solver="tsit5", rtol=RTOL, atol=ATOL,
                           max_steps=MAX_STEPS, progress=False)  # fmt: skip
    _, report = run_sweep(problem.model, spec, options)
    if report.n_chunks != 1:
        raise RuntimeError(f"the sweep of {spec.size} points ran {report.n_chunks} chunks")
    setup = prepare(problem.model, spec, options)
    mesh = _mesh(tuple(jax.devices()))
    runner = chunk_runner(problem.model, spec, setup, mesh, False)
    run = _compiled.__wrapped__(mesh, setup.engine) if fresh else runner.run
    names = tuple(problem.model.initial_state().values)

    def call(v):
        out = run(runner.model_dyn, runner.save, {problem.key: v}, runner.static)
        call.status = np.asarray(out["status"]), np.asarray(out["num_steps"])
        return _stack({k: out[k] for k in names})

    return call


def bench_overhead(problem: Problem, sizes: list[int], rounds: int, twins: int) -> list[dict]:
    """Each size: the contenders of the module docstring, `rounds` interleaved calls."""
    rows = []
    for n in sizes:
        print(f"  overhead, N = {n:,} ...", flush=True)
        values = problem.values(n)
        fns = {f"a3#{i}": engine_status_fn(problem) for i in range(1, twins + 1)}
        fns.update({f"a4#{i}": sweep_chunk_fn(problem, values, i > 0) for i in range(twins)})
        fns["b"] = sweep_fn(problem, "auto")
        for fn in fns.values():
            time_call(fn, values)  # compile, warm up
        load = load_average()
        # No settling pause: every contender here is one engine program, which leaves no
        # pool threads spinning, and the host work measured is sensitive to a cooled cache.
        wall, cpu = interleaved(fns, (values,), rounds, settle=0)
        pairs = _pairs(fns["a4#0"], fns["b"], values, 2 * rounds)
        strict = _strict_pairs(problem, fns["b"], values, twins, max(2, 2 * rounds // twins))
        rows.append(dict(n=n, rounds=rounds, load_before=load, load_after=load_average(),
                         cpu={k: Stats(v).as_dict() for k, v in cpu.items()},
                         wall={k: Stats(v).as_dict() for k, v in wall.items()},
                         pairs=pairs, strict=strict))  # fmt: skip
    return rows


def _strict_pairs(problem: Problem, b: Callable, values, twins: int, n: int) -> list[dict]:
    """(b) against `twins` compilations (a#k) of the engine with the model closed over,
    `n` pairs each (the `_pairs` of each)."""
    out = []
    for _ in range(twins):
        a = engine_fn(problem)
        time_call(a, values)  # compile, warm up
        out.append(_pairs(a, b, values, n))
    return out


def _pairs(a: Callable, b: Callable, values: np.ndarray, n: int) -> dict[str, list[float]]:
    """CPU seconds of `n` pairs of calls, alternately `a b` and `b a` (each side follows
    the other as often): `{"a": [...], "b": [...]}` of the process, and `"a_main"`,
    `"b_main"` of the calling thread alone. The solve runs on XLA's threads, so the
    calling thread's time is the host work around it (and the same wait for both): a far
    steadier reading of the sweep's own cost than the process's time."""
    fns = {"a": a, "b": b}
    out: dict[str, list[float]] = {"a": [], "b": [], "a_main": [], "b_main": []}
    for i in range(n):
        for name in ("a", "b") if i % 2 == 0 else ("b", "a"):
            main = time.thread_time()
            out[name].append(time_call(fns[name], values, settle=0)[1])
            out[name + "_main"].append(time.thread_time() - main)
    return out


def ratios(row: dict) -> dict[str, float]:
    """The ratios of the module docstring from one size's CPU times, each taken within a
    round (the contenders of one round ran within a fraction of a second of each other)
    and then the median over rounds: the machine's drift between rounds cancels.

    `host`: (b) / (a4#0) in their own pairs (`host_rotation`: in the rotation);
    `program`: the round's median over the (a4) compilations over its median over the (a3)
    compilations; `plain`: (b) / (a3#1). The spreads compare the compilations' own
    medians."""
    samples = {k: np.asarray(v["samples"]) for k, v in row["cpu"].items()}
    a3 = np.stack([v for k, v in samples.items() if k.startswith("a3#")])
    a4 = np.stack([v for k, v in samples.items() if k.startswith("a4#")])
    host_rotation = float(np.median(samples["b"] / samples["a4#0"]))
    pairs = {k: np.asarray(v) for k, v in row.get("pairs", {}).items()}
    host = float(np.median(pairs["b"] / pairs["a"])) if pairs else host_rotation
    # The sweep's own work per call, by the calling thread's CPU time (seconds).
    main = pairs.get("b_main"), pairs.get("a_main")
    host_main = float(np.median(main[0] - main[1])) if main[0] is not None else None
    program = float(np.median(np.median(a4, axis=0) / np.median(a3, axis=0)))

    def spread(runs: np.ndarray) -> float:
        medians = np.median(runs, axis=1)
        return float(medians.max() / medians.min() - 1)

    # Each compilation's median pair ratio; their median (the luck of a compilation out).
    strict = [float(np.median(np.asarray(p["b"]) / np.asarray(p["a"])))
              for p in row.get("strict", [])]  # fmt: skip
    return dict(host=host, host_main=host_main, host_rotation=host_rotation, program=program,
                strict=float(np.median(strict)) if strict else float("nan"),
                strict_range=(min(strict), max(strict)) if strict else None,
                estimate=host * program, estimate_rotation=host_rotation * program,
                plain=float(np.median(samples["b"] / samples["a3#1"])),
                a3_spread=spread(a3), a4_spread=spread(a4))  # fmt: skip


def render_overhead(rows: list[dict], markdown: bool) -> str:
    head = ["N", *rows[0]["cpu"], "(b)/(a4#0) in pairs: sweep around its engine",
            "(b) - (a4#0) in pairs, calling thread's CPU: the sweep's own work",
            "median (a4)/(a3): program", "estimate (b)/(a3)", "(b)/(a4#0) in the rotation",
            "plain (b)/(a3#1)", "spread of compilations (a3, a4)",
            "strict (b)/(a#k) in pairs: median (range) over compilations"]  # fmt: skip
    body = []
    for r in rows:
        q = ratios(r)
        body.append([f"{r['n']:,}", *(seconds(v["median"]) for v in r["cpu"].values()),
                     f"{q['host']:.3f}", seconds(q["host_main"]), f"{q['program']:.3f}",
                     f"{q['estimate']:.3f}",
                     f"{q['host_rotation']:.3f}", f"{q['plain']:.3f}",
                     f"{100 * q['a3_spread']:.1f} %, {100 * q['a4_spread']:.1f} %",
                     _strict_cell(q)])  # fmt: skip
    loads = ", ".join(f"{r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}" for r in rows
                      if r["load_before"] and r["load_after"])  # fmt: skip
    return (
        f"Overhead of ds.sweep over the engine called directly: CPU medians of "
        f"{rows[0]['rounds']} interleaved rounds; (a3#i) the engine jitted by hand and "
        "(a4#i) the sweep's compiled chunk, each compiled several times (a4#0 is the "
        "executable (b) runs); the ratios are medians over rounds of each round's ratio; "
        f"(b)/(a4#0) in pairs: the median ratio of {2 * rows[0]['rounds']} pairs of those "
        "two alone; strict: (b) against the engine jitted around the fixed model (a), "
        f"{len(rows[0].get('strict', []))} compilations in pairs of their own with (b); "
        "load average before/after each size: "
        f"{loads or 'n/a'}\n\n" + format_table(head, body, markdown)
    )


def _strict_cell(q: dict) -> str:
    if q["strict_range"] is None:
        return "n/a"
    lo, hi = q["strict_range"]
    return f"{q['strict']:.3f} ({lo:.3f}-{hi:.3f})"


def overhead_summary(rows: list[dict]) -> list[str]:
    lines = []
    for r in rows:
        q = ratios(r)
        ok = "ok" if q["estimate"] <= TARGET_OVERHEAD else "BELOW TARGET"
        strict_ok = "ok" if q["strict"] <= TARGET_OVERHEAD else "BELOW TARGET"
        lines.append(
            f"N = {r['n']:,}: ds.sweep / engine called directly = {q['estimate']:.3f} "
            f"(sweep around its engine {q['host']:.3f}, {seconds(q['host_main'])} of the "
            f"calling thread's CPU per call, × program {q['program']:.3f}; "
            f"target <= {TARGET_OVERHEAD}) {ok}; against the engine with the model "
            f"compiled in (a) {_strict_cell(q)} {strict_ok}; with (b)/(a4#0) of the "
            f"rotation {q['estimate_rotation']:.3f}; plain (b)/(a3#1) {q['plain']:.3f}"
        )
    return lines
