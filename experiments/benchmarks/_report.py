"""Tables and headers for `bench_simulate.py` results (plain text for the terminal, Markdown
for docs/benchmarks.md)."""

import json

from _common import format_table, seconds

TARGET_RATIO = 1.05  # difsim may cost at most 5% more than the same solve written by hand


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}"


def _cell(s: dict) -> str:
    return f"{seconds(s['median'])} ({seconds(s['min'])})"


def _steady_row(r: dict) -> list[str]:
    st, cpu, sp = r["steady"], r["steady_cpu"], r.get("scipy")
    d, t, raw = st["difsim"], st["difsim throw=True"], st["diffrax"]
    cells = [f"{r['n']:,}", _cell(d), _cell(t), _cell(raw), _cell(st["diffrax max_steps=4096"])]
    cells += [
        f"{_ratio(d['median'], raw['median'])} ({_ratio(d['min'], raw['min'])})",
        _ratio(cpu["difsim"]["median"], cpu["diffrax"]["median"]),
        _ratio(t["median"], raw["median"]),
    ]
    if sp:
        cells += [seconds(sp["extrapolated_s"]), f"{sp['extrapolated_s'] / raw['median']:.0f}x"]
    else:
        cells += ["n/a", "n/a"]
    return cells


def _compile_row(r: dict) -> list[str]:
    wall, cpu, load = r["compile_s"], r["compile_cpu_s"], r["load_before"]
    cells = [f"{r['n']:,}"] + [f"{wall[k]:.2f} s ({cpu[k]:.2f} s)" for k in wall]
    cells.append(
        f"{wall['difsim'] - wall['diffrax']:+.2f} s ({cpu['difsim'] - cpu['diffrax']:+.2f} s)"
    )
    cells.append(f"{load[0]:.2f} / {r['load_after'][0]:.2f}" if load else "n/a")
    return cells


def _agreement_row(r: dict) -> list[str]:
    dd, sp = r["max_abs_diff_vs_diffrax"], r.get("scipy")
    cells = [f"{r['n']:,}"]
    cells += [f"{dd[k]:.2e}" for k in ("difsim", "difsim throw=True", "diffrax max_steps=4096")]
    cells.append(str(sum(r["nonfinite"].values())))
    if sp:
        cells += [str(sp["n"]), seconds(sp["per_traj_s"]), f"{sp['max_abs_diff_diffrax']:.2e}"]
    else:
        cells += ["n/a"] * 3
    return cells


def _compiled_row(name: str, v: dict) -> list[str]:
    wall, cpu = v["wall"], v["cpu"]
    cells = [name, *(f"{wall[p]:.2f} s" for p in ("trace", "lower", "compile"))]
    cells.append(f"{wall['total']:.2f} s ({cpu['total']:.2f} s)")
    cells += [str(v["instructions"]), ", ".join(map(str, v["loops"])), str(v["callbacks"])]
    return cells


def _cold(cold: dict, markdown: bool) -> str:
    head = ["fresh process", "median", "min", "first"]
    rows = [
        [f'python -c "{k}"', seconds(v["median"]), seconds(v["min"]), seconds(v["samples"][0])]
        for k, v in cold["imports"].items()
    ]
    cli = cold.get("cli")
    if cli:
        ex, fi = cli["exit_s"], cli["file_s"]
        rows.append(
            [f"difsim run {cli['config']}: netCDF written", seconds(fi["median"]),
             seconds(fi["min"]), seconds(fi["samples"][0])]
        )  # fmt: skip
        rows.append(
            ["... process exited", seconds(ex["median"]), seconds(ex["min"]),
             seconds(cli["first_exit_s"])]
        )  # fmt: skip
    text = "Cold start (fresh processes):\n\n" + format_table(head, rows, markdown)
    if cli:
        sweep, span = json.dumps(cli["sweep"]), json.dumps(cli["time"])
        text += f"\n\nThe config's sweep: `{sweep}`; time: `{span}`."
    if cold.get("cli_skipped"):
        text += "\n\n" + cold["cli_skipped"]
    return text


def render(report: dict, markdown: bool) -> str:
    """All result tables of a `bench_simulate` report."""
    sizes, parts = report["sizes"], []
    head = ["N", "difsim", "difsim throw=True", "diffrax", "diffrax 4096 steps",
            "difsim/diffrax wall median (min)", "difsim/diffrax CPU", "throw=True/diffrax",
            "scipy (extrapolated)", "diffrax vs scipy"]  # fmt: skip
    parts.append(
        f"Steady state, wall time median (min) of {report['repeats']} interleaved repeats:\n\n"
        + format_table(head, [_steady_row(r) for r in sizes], markdown)
    )
    head = ["N", "difsim", "difsim throw=True", "diffrax", "diffrax 4096 steps",
            "difsim - diffrax", "load avg (1 min) before/after"]  # fmt: skip
    parts.append(
        "Compile time, wall (CPU): first call minus steady median, caches cleared before each:"
        "\n\n" + format_table(head, [_compile_row(r) for r in sizes], markdown)
    )
    head = ["N", "max abs diff difsim", "max abs diff throw=True", "max abs diff 4096 steps",
            "non-finite", "scipy subset", "scipy per trajectory",
            "max abs diff scipy"]  # fmt: skip
    parts.append(
        "Agreement of final states with the hand-written diffrax solve (scipy: float64 RK45 on "
        "an evenly spaced subset):\n\n"
        + format_table(head, [_agreement_row(r) for r in sizes], markdown)
    )
    if report.get("compiled"):
        head = ["contender", "trace", "lower", "XLA compile", "total wall (CPU)",
                "HLO instructions", "while-loop bodies", "host callbacks"]  # fmt: skip
        rows = [_compiled_row(k, v) for k, v in report["compiled"].items()]
        parts.append(
            f"Cold ahead-of-time compile (N = {report['compiled_n']:,}, median wall time), "
            "and the optimised program:\n\n" + format_table(head, rows, markdown)
        )
    if report.get("cold"):
        parts.append(_cold(report["cold"], markdown))
    return "\n\n".join(parts)


def render_header(report: dict) -> str:
    """Date, machine, versions and command as a Markdown bullet list."""
    m, v = report["machine"], report["versions"]
    return "\n".join(
        [
            f"- date: {report['date']}",
            f"- machine: {m['cpu']}, {m['nproc']} cores, {m['ram_gib']} GiB RAM, {m['os']}; "
            f"JAX backend {m['jax_backend']}; load average at start {m['loadavg']}",
            "- versions: " + ", ".join(f"{k} {x}" for k, x in v.items()),
            f"- command: `{report['command']}`",
            # What XLA ran with: `_common` calls `difsim.tune_xla()` (difsim/_xla.py).
            f"- XLA_FLAGS: `{m.get('xla_flags') or '(none)'}`",
        ]
    )


def summary(report: dict) -> str:
    """One verdict line per size: difsim/diffrax median ratio against the target."""
    lines = []
    for r in report["sizes"]:
        ratio = r["steady"]["difsim"]["median"] / r["steady"]["diffrax"]["median"]
        verdict = "OK" if ratio <= TARGET_RATIO else "ABOVE TARGET"
        lines.append(
            f"N={r['n']:,}: difsim/diffrax = {ratio:.3f} (target <= {TARGET_RATIO}) {verdict}"
        )
    return "\n".join(lines)
