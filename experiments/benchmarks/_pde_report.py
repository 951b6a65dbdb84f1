"""Tables for `bench_pde.py` results (plain text for the terminal, Markdown for
docs/benchmarks.md), and the comparison at matched accuracy."""

import numpy as np
from _common import format_table, seconds

KINDS = ("checkpoint", "direct", "scan")  # the gradient contenders of the memory part


# ------------------------------------------------------------------ matched accuracy
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


# ------------------------------------------------------------------ tables
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
    kinds = KINDS
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


def _variants_table(v: dict, md: bool) -> str:
    head = ["variant", "steps/s", "time / exponax", "max |u - u(zoo model)|"]
    cells = [
        [r["variant"], _rate(r["steps_per_s"]), f"{r['vs_exponax']:.2f}", f"{r['difference']:.1e}"]
        for r in v["rows"]
    ]
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
            f"{gs['ref_difference']:.2f}); median (min) of {gs['repeats']} interleaved repeats "
            "(py-pde: of 3 repeats in its own process):\n\n" + _solve_table(gs["rows"], md)
        )
        parts.append("At matched accuracy:\n\n" + _matched_table(gs["matched"], md))
        if gs.get("fresh"):
            parts.append("Fresh process, time to result:\n\n" + _fresh_table(gs["fresh"], md))
    for v in report.get("variants", []):
        parts.append(
            f"Where the KS time goes (n = {v['n']}, dt = {v['dt']:g}, {v['steps']} steps; "
            f"median of {report['repeats']} interleaved repeats):\n\n" + _variants_table(v, md)
        )
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
