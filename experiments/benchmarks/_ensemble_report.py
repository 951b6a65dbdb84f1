"""Tables and verdicts of `bench_ensemble.py` (plain text for the terminal, Markdown for
docs/benchmarks.md)."""

from _common import format_table, seconds
from _report import render_header as _base_header

from difsim._ensemble import AutoAdjoint

TARGET_SPEEDUP = 8.0  # ds.sweep (auto) vs raw diffrax vmap, CPU time, N = 1e4 and 1e5
TARGET_SCIPY = 1000.0  # ds.sweep (auto) vs the scipy loop
TARGET_OVERHEAD = 1.05  # ds.sweep (auto) vs the engine called directly
TARGET_GRAD = 3.0  # a sweep loss's gradient vs its forward
VMAP, ENGINE, AUTO = "d diffrax vmap", "a engine", "b sweep auto"
ENGINE_ARG = "a2 engine, model as argument"
# (a2) returning each lane's status and step count too, as a sweep does: the like-for-like
# reference of the overhead target.
ENGINE_STATUS = "a3 engine, model as argument, statuses"


def render_header(report: dict) -> str:
    pk = report["peak"]
    line = (
        f"- vector peak (float32): {pk['vector_bits']}-bit × {pk['fma_units']} FMA × 2 × "
        f"{pk['clock_hz'] / 1e9:.2f} GHz = {pk['per_core_flops'] / 1e9:.0f} GFLOP/s per core, "
        f"{pk['machine_flops'] / 1e9:.0f} GFLOP/s for {pk['cores']} cores"
        + (" (AVX-512 present; XLA emits 256-bit by default)" if pk["avx512"] else "")
    )
    return _base_header(report) + "\n" + line


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}"


def _size_rows(r: dict) -> list[list[str]]:
    n, cpu, wall = r["n"], r["cpu"], r["wall"]
    ref_vmap = cpu.get(VMAP, {}).get("median")
    ref_engine = cpu.get(ENGINE, {}).get("median")
    rows = []
    for name in cpu:
        c, w, e = cpu[name]["median"], wall[name], r["errors"][name]
        rows.append(
            [f"{n:,}", name, seconds(c), f"{seconds(w['median'])} ({seconds(w['min'])})",
             f"{n / c:,.0f}", _ratio(ref_vmap, c), _ratio(c, ref_engine),
             f"{e['max']:.1e}", f"{e['median']:.1e}", seconds(r["first_call_s"][name])]
        )  # fmt: skip
    sp = r.get("scipy")
    if sp:
        c, e = sp["extrapolated_cpu_s"], sp["errors"]
        rows.append(
            [f"{n:,}", f"f scipy RK45 ({sp['lanes']} lanes, extrapolated)", seconds(c),
             f"{seconds(sp['per_lane_s'])} per lane", f"{n / c:,.0f}", _ratio(ref_vmap, c),
             _ratio(c, ref_engine), f"{e['max']:.1e}", f"{e['median']:.1e}", "n/a"]
        )  # fmt: skip
    for name, why in r["skipped"].items():
        rows.append([f"{n:,}", name, "skipped: " + why] + ["n/a"] * 7)
    return rows


def _problem(title: str, rows: list[dict], rounds: int, markdown: bool) -> str:
    head = ["N", "contender", "CPU median", "wall median (min)", "lanes per CPU-s",
            "speed-up vs (d), CPU", "CPU / (a)", "max error", "median error",
            "first call"]  # fmt: skip
    body = [cells for r in rows for cells in _size_rows(r)]
    loads = ", ".join(f"{r['load_before'][0]:.1f}/{r['load_after'][0]:.1f}" for r in rows
                      if r["load_before"] and r["load_after"])  # fmt: skip
    used = {f"{k} → {e}" + (f" ({why})" if why else "")
            for r in rows for k, (e, why) in r.get("engine_used", {}).items()}  # fmt: skip
    if used:
        loads += "; ds.sweep ran: " + ", ".join(sorted(used))
    return (
        f"{title}: medians of {rounds} interleaved rounds; errors vs float64 DOP853 "
        f"(rtol = atol = 1e-12) over {rows[0]['lanes_checked']} evenly spaced lanes; load "
        f"average (1 min) before/after each size: {loads or 'n/a'}\n\n"
        + format_table(head, body, markdown)
    )


def _blocks(blocks: list[dict], markdown: bool) -> str:
    head = ["problem, N", "block size", "CPU median", "wall median (min)", "lanes per CPU-s",
            "useful lane-steps"]  # fmt: skip
    rows = [
        [f"{b['problem']}, {b['n']:,}", str(r["block"]), seconds(r["cpu"]["median"]),
         f"{seconds(r['wall']['median'])} ({seconds(r['wall']['min'])})",
         f"{b['n'] / r['cpu']['median']:,.0f}", f"{100 * r['useful']:.1f} %"]
        for b in blocks for r in b["rows"]
    ]  # fmt: skip
    return (
        "Engine block size (useful lane-steps: steps the lanes needed over steps their "
        "blocks ran, a block running until its slowest lane is done):\n\n"
        + format_table(head, rows, markdown)
    )


def _crossover(rows: list[dict], markdown: bool) -> str:
    head = ["model (N)", "P", "forward solve", "gradient, forward mode",
            "gradient, reverse mode (checkpointed loops)", "gradient, discrete adjoint",
            "cheaper", "auto takes"]  # fmt: skip
    out = []
    for r in rows:
        cpu, fwd = r["cpu"], r["cpu"]["forward"]["median"]
        f, b = cpu["grad forward"]["median"], cpu["grad checkpoint"]["median"]
        d = cpu.get("grad discrete", {}).get("median", float("inf"))
        auto = "discrete" if AutoAdjoint().reverse(r["scalars"]) else "forward"
        cheaper = min((f, "forward"), (b, "checkpoint"), (d, "discrete"))[1]
        out.append([f"{r['name']} ({r['n']:,})", str(r["scalars"]), seconds(fwd),
                    f"{seconds(f)} ({f / fwd:.1f}x)", f"{seconds(b)} ({b / fwd:.1f}x)",
                    f"{seconds(d)} ({d / fwd:.1f}x)" if d < float("inf") else "n/a",
                    cheaper, auto])  # fmt: skip
    return (
        "Forward against reverse mode by the number P of differentiated scalars (gradients "
        "of sum(final state²), CPU medians; x: over the forward solve; `auto` should take "
        "the cheaper):\n\n" + format_table(head, out, markdown)
    )


def _grad(cases: list[dict], markdown: bool) -> str:
    head = ["case (differentiated scalars, N)", "engine forward", "forward, states returned",
            "grad forward mode", "grad checkpoint (reverse)", "grad discrete (reverse)",
            "grad auto (default)",
            "grad auto / forward, states", "diffrax forward", "diffrax grad",
            "agreement (max rel. difference)"]  # fmt: skip
    rows = []
    for c in cases:
        cpu = c["cpu"]
        fwd = cpu["forward"]["median"]

        def cell(k, base=fwd):
            if k not in cpu:
                return "n/a"
            return f"{seconds(cpu[k]['median'])} ({cpu[k]['median'] / base:.2f}x)"

        dfx = cpu.get("diffrax forward", {}).get("median")
        agree = ", ".join(f"{k}: {v:.1e}" for k, v in c["agreement"].items())
        states = cpu.get("forward, states", {}).get("median")
        rows.append([f"{c['name']} ({c['scalars']}, {c['n']:,})", seconds(fwd),
                     seconds(states) if states else "n/a",
                     cell("grad forward"), cell("grad checkpoint"), cell("grad discrete"),
                     cell("grad auto"),
                     f"{cpu['grad auto']['median'] / states:.2f}x" if states else "n/a",
                     seconds(dfx) if dfx else "n/a",
                     cell("diffrax grad", dfx) if dfx else "n/a", agree])  # fmt: skip
    loads = ", ".join(f"{c['load_before'][0]:.1f}/{c['load_after'][0]:.1f}" for c in cases
                      if c["load_before"] and c["load_after"])  # fmt: skip
    return (
        "Gradients of sum(final state²), CPU medians (x: over the same contender's own "
        "forward loss; 'forward, states returned': the engine's same solve returning the "
        "final states instead of their sum); diffrax: vmap, its default "
        "RecursiveCheckpointAdjoint; load average "
        f"before/after each case: {loads}\n\n" + format_table(head, rows, markdown)
    )


def _flops(f: dict, peak: dict) -> str:
    fl = f["flops"]
    return (
        f"Vector peak, Lorenz N = {f['n']:,}: XLA counts {fl['step']:.0f} FLOPs per lane per "
        f"step ({fl['rhs']:.0f} per right-hand side); {f['steps']:,} steps taken in "
        f"{seconds(f['cpu_s'])} CPU: {f['flop_rate'] / 1e9:.2f} GFLOP/s per busy core = "
        f"{f['percent_core_peak']:.1f} % of one core's "
        f"{peak['per_core_flops'] / 1e9:.0f} GFLOP/s. Counting only the Runge–Kutta "
        f"arithmetic ({fl['arithmetic']:.0f} FLOPs per lane-step: right-hand sides, stage "
        f"sums, error estimate and norm): {f['percent_core_peak_arithmetic']:.1f} %."
    )


def _hlo(h: dict, markdown: bool) -> str:
    ops = list(next(iter(h.values()))["ops"])
    head = ["step loop (N = 1,024)", "instructions", "passes", *ops]
    rows = [[k, str(v["instructions"]), str(v["passes"]), *(str(v["ops"][o]) for o in ops)]
            for k, v in h.items()]  # fmt: skip
    return (
        "Opcodes in the largest compiled while body (fused computations and nested loops "
        "included; passes: the body's own non-trivial instructions):\n\n"
        + format_table(head, rows, markdown)
    )


def render(report: dict, markdown: bool) -> str:
    parts, rounds = [], report["rounds"]
    if report.get("lorenz"):
        parts.append(_problem("Lorenz", report["lorenz"], rounds, markdown))
    if report.get("blocks"):
        parts.append(_blocks(report["blocks"], markdown))
    if report.get("lorenz96"):
        parts.append(_problem("Lorenz-96 (40 variables)", report["lorenz96"], rounds, markdown))
    if report.get("grad"):
        parts.append(_grad(report["grad"], markdown))
    if report.get("crossover"):
        parts.append(_crossover(report["crossover"], markdown))
    if report.get("flops"):
        parts.append(_flops(report["flops"], report["peak"]))
    if report.get("hlo"):
        parts.append(_hlo(report["hlo"], markdown))
    return "\n\n".join(parts)


def _verdict(ok: bool) -> str:
    return "ok" if ok else "BELOW TARGET"


def summary(report: dict) -> str:
    lines = []
    for r in report.get("lorenz", []):
        cpu, n = r["cpu"], r["n"]
        fast = AUTO if AUTO in cpu else ENGINE
        if VMAP in cpu and fast in cpu:
            s = cpu[VMAP]["median"] / cpu[fast]["median"]
            lines.append(f"N = {n:,}: {fast} vs diffrax vmap {s:.1f}x (target >= "
                         f"{TARGET_SPEEDUP:.0f}x) {_verdict(s >= TARGET_SPEEDUP)}")  # fmt: skip
        if r.get("scipy") and fast in cpu:
            s = r["scipy"]["extrapolated_cpu_s"] / cpu[fast]["median"]
            lines.append(f"N = {n:,}: {fast} vs scipy {s:,.0f}x (target >= "
                         f"{TARGET_SCIPY:.0f}x) {_verdict(s >= TARGET_SCIPY)}")  # fmt: skip
        for ref in (ENGINE, ENGINE_ARG, ENGINE_STATUS):
            if AUTO in cpu and ref in cpu:
                o = cpu[AUTO]["median"] / cpu[ref]["median"]
                lines.append(f"N = {n:,}: sweep auto / {ref} = {o:.3f} (target <= "
                             f"{TARGET_OVERHEAD}) {_verdict(o <= TARGET_OVERHEAD)}")  # fmt: skip
    for c in report.get("grad") or []:
        fwd = c["cpu"]["forward"]["median"]
        q = c["cpu"]["grad auto"]["median"] / fwd
        lines.append(f"gradient ({c['name']}, default adjoint) / forward = {q:.2f} (target <= "
                     f"{TARGET_GRAD:.0f}) {_verdict(q <= TARGET_GRAD)}")  # fmt: skip
        if "forward, states" in c["cpu"]:
            q = c["cpu"]["grad auto"]["median"] / c["cpu"]["forward, states"]["median"]
            lines.append(f"gradient ({c['name']}, default adjoint) / the forward solve "
                         f"returning its states = {q:.2f} (target <= {TARGET_GRAD:.0f}) "
                         f"{_verdict(q <= TARGET_GRAD)}")  # fmt: skip
    if report.get("flops"):
        f = report["flops"]
        lines.append(f"engine: {f['percent_core_peak']:.1f} % of one core's vector peak "
                     f"(XLA's FLOP count), {f['percent_core_peak_arithmetic']:.1f} % "
                     "(Runge–Kutta arithmetic only)")  # fmt: skip
    if not report.get("sweep_engine"):
        lines.append("ds.sweep has no engine= argument on this revision: (b), (c) skipped")
    return "\n".join(lines)
