"""Benchmark `difsim.simulate` against hand-written diffrax and scipy on a Lorenz sweep.

The problem (one run, side by side): Lorenz with `sigma = 10`, `beta = 8/3`, initial state
`(1, 0, 0)`, `t` in `[0, 1]`, `rho = linspace(0, 21, N)`, Tsit5 with a PID controller at
`rtol = atol = 1e-6`, float32, final state only. Contenders:

- **difsim**: `jax.jit(jax.vmap(lambda rho: ds.simulate(Lorenz(rho=rho), ...).final))`, with
  `throw=False` (what sweeps use) and `throw=True`;
- **diffrax**: the same solve written by hand with `diffrax.diffeqsolve` and a
  `jnp.stack` vector field, at difsim's `max_steps=16384` and at diffrax's default 4096;
- **scipy**: a Python loop of `scipy.integrate.solve_ivp` (RK45, same tolerances, float64)
  over an evenly spaced subset of the `rho` values, extrapolated to `N`;
- **cold start**: `python -c "import difsim"` and `difsim run experiments/lorenz.toml`, each in
  a fresh process.

Steady-state times are medians of interleaved repeats (the minimum is shown too: on a
shared machine it is the least disturbed figure); compile time is the first call minus the
steady median, with JAX's caches cleared before each first call; a second table splits a
cold ahead-of-time compile into trace / lower / XLA phases and counts the instructions of
the optimised program and of its step loops (`diagnose_overhead.py` digs further).

```
python experiments/benchmarks/bench_simulate.py                      # N = 1e3, 1e4, 1e5
python experiments/benchmarks/bench_simulate.py --quick              # about a minute
python experiments/benchmarks/bench_simulate.py --sizes 1000 10000 --repeats 15 \
    --markdown runs/bench.md --json runs/bench.json
```
"""

import argparse
import importlib.util
import json
import re
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", False)  # the benchmark is specified in float32

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    aot_phases,
    command_line,
    hlo_host_callbacks,
    hlo_op_histogram,
    hlo_while_bodies,
    interleaved,
    load_average,
    machine_info,
    time_call,
    time_process,
    today,
    versions,
    write_reports,
)
from _report import render, render_header, summary  # noqa: E402

import difsim as ds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SIGMA, BETA = 10.0, 8.0 / 3.0
RTOL = ATOL = 1e-6
T0, T1 = 0.0, 1.0
RHO_MAX = 21.0
MAX_STEPS = 16_384  # difsim's default, used for the raw diffrax solve too
DIFFRAX_DEFAULT_MAX_STEPS = 4_096


# ------------------------------------------------------------------ contenders
def difsim_final(rho, throw: bool):
    sol = ds.simulate(
        ds.models.Lorenz(rho=rho), t0=T0, t1=T1, save="final", rtol=RTOL, atol=ATOL, throw=throw
    )
    return sol.final


def lorenz_jax(t, y, rho):
    x, v, z = y
    return jnp.stack([SIGMA * (v - x), x * (rho - z) - v, x * v - BETA * z])


def diffrax_final(rho, max_steps: int):
    y0 = jnp.array([1.0, 0.0, 0.0])
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(lorenz_jax),
        diffrax.Tsit5(),
        T0,
        T1,
        None,
        y0,
        args=rho,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
        max_steps=max_steps,
        throw=False,
    )
    return sol.ys


def lorenz_numpy(t, y, rho):
    x, v, z = y
    return [SIGMA * (v - x), x * (rho - z) - v, x * v - BETA * z]


def contenders() -> dict:
    """Name → jitted, vmapped function of `rho` (shape `(N,)`) returning final states."""
    return {
        "difsim": jax.jit(jax.vmap(lambda rho: difsim_final(rho, throw=False))),
        "difsim throw=True": jax.jit(jax.vmap(lambda rho: difsim_final(rho, throw=True))),
        "diffrax": jax.jit(jax.vmap(lambda rho: diffrax_final(rho, MAX_STEPS))),
        "diffrax max_steps=4096": jax.jit(
            jax.vmap(lambda rho: diffrax_final(rho, DIFFRAX_DEFAULT_MAX_STEPS))
        ),
    }


def as_states(out) -> np.ndarray:
    """Final states as a `(N, 3)` float64 array, whichever contender produced them."""
    if isinstance(out, dict):
        return np.stack([np.asarray(out[k], np.float64) for k in ("x", "y", "z")], axis=-1)
    return np.asarray(out, np.float64)[:, -1, :]  # diffrax ys: (N, 1, 3)


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.max(np.abs(a[both] - b[both]))) if both.any() else float("nan")


# ------------------------------------------------------------------ measurements
def run_scipy(rhos: np.ndarray, subset: int) -> dict:
    from scipy.integrate import solve_ivp

    index = np.unique(np.linspace(0, len(rhos) - 1, min(subset, len(rhos))).round().astype(int))
    finals, nfev = [], []
    start = time.perf_counter()
    for rho in rhos[index]:
        sol = solve_ivp(
            lorenz_numpy,
            (T0, T1),
            [1.0, 0.0, 0.0],
            method="RK45",
            rtol=RTOL,
            atol=ATOL,
            args=(float(rho),),
        )
        finals.append(sol.y[:, -1])
        nfev.append(sol.nfev)
    elapsed = time.perf_counter() - start
    per = elapsed / len(index)
    return dict(
        index=index,
        finals=np.array(finals),
        n=len(index),
        per_traj_s=per,
        extrapolated_s=per * len(rhos),
        mean_nfev=float(np.mean(nfev)),
    )


def bench_size(n: int, fns: dict, repeats: int, scipy_subset: int) -> dict:
    rhos = jnp.linspace(0.0, RHO_MAX, n, dtype=jnp.float32)
    load_before = load_average()
    first, first_cpu = {}, {}
    for name, fn in fns.items():
        jax.clear_caches()  # each first call compiles from scratch, none reuses another's work
        first[name], first_cpu[name] = time_call(fn, rhos)
    wall, cpu = interleaved(fns, (rhos,), repeats)
    steady = {k: Stats(v) for k, v in wall.items()}
    steady_cpu = {k: Stats(v) for k, v in cpu.items()}
    outs = {name: as_states(fn(rhos)) for name, fn in fns.items()}
    ref = outs["diffrax"]
    result = dict(
        n=n,
        load_before=load_before,
        load_after=load_average(),
        steady={k: s.as_dict() for k, s in steady.items()},
        steady_cpu={k: s.as_dict() for k, s in steady_cpu.items()},
        compile_s={k: first[k] - steady[k].median for k in fns},
        compile_cpu_s={k: first_cpu[k] - steady_cpu[k].median for k in fns},
        first_call_s=first,
        max_abs_diff_vs_diffrax={k: max_abs_diff(v, ref) for k, v in outs.items()},
        nonfinite={k: int((~np.isfinite(v)).any(axis=-1).sum()) for k, v in outs.items()},
    )
    if scipy_subset > 0 and importlib.util.find_spec("scipy") is None:
        print("  scipy is not installed (pip install -e '.[dev]'): skipping its loop")
    elif scipy_subset > 0:
        sp = run_scipy(np.asarray(rhos, np.float64), scipy_subset)
        result["scipy"] = dict(
            n=sp["n"],
            per_traj_s=sp["per_traj_s"],
            extrapolated_s=sp["extrapolated_s"],
            mean_nfev=sp["mean_nfev"],
            max_abs_diff_diffrax=max_abs_diff(ref[sp["index"]], sp["finals"]),
            max_abs_diff_difsim=max_abs_diff(outs["difsim"][sp["index"]], sp["finals"]),
        )
    return result


def compile_breakdown(fns: dict, n: int, repeats: int) -> dict:
    """Cold ahead-of-time compile phases (medians) and the compiled program's size."""
    rhos = jnp.linspace(0.0, RHO_MAX, n, dtype=jnp.float32)
    names = ("difsim", "difsim throw=True", "diffrax")
    samples = {k: [] for k in names}
    out = {}
    for _ in range(repeats):
        for name in names:
            jax.clear_caches()
            wall, cpu, compiled = aot_phases(fns[name], rhos)
            samples[name].append((wall, cpu))
            hlo = compiled.as_text()
            out[name] = dict(
                instructions=sum(hlo_op_histogram(hlo).values()),
                loops=hlo_while_bodies(hlo),
                callbacks=hlo_host_callbacks(hlo),
            )
    for name in names:
        for kind, i in (("wall", 0), ("cpu", 1)):
            phases = samples[name][0][i]
            out[name][kind] = {p: statistics.median(s[i][p] for s in samples[name]) for p in phases}
            out[name][kind]["total"] = statistics.median(sum(s[i].values()) for s in samples[name])
    return out


# ------------------------------------------------------------------ cold start
def _difsim_command() -> list[str]:
    script = Path(sys.executable).with_name("difsim")
    return [str(script)] if script.exists() else [sys.executable, "-m", "difsim"]


def cli_missing(config: Path) -> str | None:
    """Why `difsim run <config>` cannot be timed yet (`None` if it can)."""
    if importlib.util.find_spec("difsim._app._cli") is None:
        return "the CLI module difsim._app._cli does not exist yet"
    if not config.exists():
        return f"the config {config} does not exist yet"
    return None


def redirect_output(text: str, target: Path) -> str | None:
    """`text` (a TOML config) with its `[output] path` pointed at `target` (None if absent)."""
    lines, section, done = text.splitlines(), None, False
    for i, line in enumerate(lines):
        head = re.match(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
        if head:
            section = head.group(1).strip()
        elif section == "output" and re.match(r"^\s*path\s*=", line):
            lines[i] = f"path = {json.dumps(str(target))}"
            done = True
    if not done:
        return None
    new = "\n".join(lines) + "\n"
    return new if tomllib.loads(new)["output"]["path"] == str(target) else None


def bench_cold(config: Path, repeats: int, cli_repeats: int, wait_cli: float) -> dict:
    py = sys.executable
    imports = {f"import {m}": [py, "-c", f"import {m}"] for m in ("jax", "diffrax", "difsim")}
    out: dict = {"imports": {}, "cli": None}
    with tempfile.TemporaryDirectory() as tmp:  # a neutral cwd: nothing from the repo shadows
        times: dict[str, list[float]] = {k: [] for k in imports}
        for r in range(repeats):
            for name, cmd in imports.items():
                run = time_process(cmd, cwd=tmp)
                if run["returncode"] != 0:
                    raise RuntimeError(f"{name} failed:\n{run['stderr_tail']}")
                times[name].append(run["exit_s"])
        out["imports"] = {k: Stats(v).as_dict() for k, v in times.items()}

    deadline = time.monotonic() + wait_cli
    while (why := cli_missing(config)) and time.monotonic() < deadline:
        left = deadline - time.monotonic()
        print(f"  waiting for the CLI ({why}); {left:.0f} s left", flush=True)
        time.sleep(min(30.0, max(1.0, deadline - time.monotonic())))
    if why:
        out["cli_skipped"] = f"skipped `difsim run {config.name}`: {why}"
        return out

    text = config.read_text()
    settings = tomllib.loads(text)
    runs = []
    for _ in range(cli_repeats):
        with tempfile.TemporaryDirectory() as tmp:
            name = Path(settings.get("output", {}).get("path", "out.nc")).name
            target = Path(tmp) / "out" / name
            new = redirect_output(text, target)
            if new is None:
                out["cli_skipped"] = f"skipped: no [output] path in {config} to redirect"
                return out
            cfg = Path(tmp) / config.name
            cfg.write_text(new)
            run = time_process([*_difsim_command(), "run", str(cfg)], cwd=tmp, watch=target)
            if run["returncode"] != 0:
                out["cli_skipped"] = (
                    f"`difsim run` failed (exit {run['returncode']}):\n{run['stderr_tail']}"
                )
                return out
            if not target.exists():
                out["cli_skipped"] = f"`difsim run` exited 0 but wrote no {target.name}"
                return out
            runs.append(run)
    out["cli"] = dict(
        config=str(config.relative_to(ROOT) if config.is_relative_to(ROOT) else config),
        sweep=settings.get("sweep"),
        time=settings.get("time"),
        exit_s=Stats([r["exit_s"] for r in runs]).as_dict(),
        file_s=Stats([r["file_s"] for r in runs]).as_dict(),
        first_exit_s=runs[0]["exit_s"],
    )
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", help="sweep sizes N (default 1e3 1e4 1e5)")
    parser.add_argument("--repeats", type=int, help="steady-state repeats per contender (>= 5)")
    parser.add_argument("--scipy-subset", type=int, help="trajectories solved with scipy (0: none)")
    parser.add_argument("--cold-repeats", type=int, help="fresh-process imports to time (0: none)")
    parser.add_argument("--cli-repeats", type=int, help="`difsim run` processes to time")
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "lorenz.toml")
    parser.add_argument(
        "--wait-cli",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for the CLI/config to appear",
    )
    parser.add_argument(
        "--compile-repeats", type=int, default=3, help="cold AOT compiles per contender (0: none)"
    )
    parser.add_argument("--quick", action="store_true", help="N=1000 only, fewer repeats")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write Markdown tables here")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write raw results here")
    args = parser.parse_args(argv)
    quick = args.quick
    sizes = args.sizes or ([1_000] if quick else [1_000, 10_000, 100_000])
    repeats = args.repeats or (5 if quick else 11)
    if repeats < 5:
        parser.error("--repeats must be at least 5 (the medians need them)")
    scipy_subset = args.scipy_subset if args.scipy_subset is not None else (50 if quick else 200)
    cold_repeats = args.cold_repeats if args.cold_repeats is not None else (2 if quick else 5)
    cli_repeats = args.cli_repeats if args.cli_repeats is not None else (1 if quick else 3)

    report = dict(
        date=today(),
        machine=machine_info(),
        versions=versions(),
        command=command_line(),
        repeats=repeats,
    )
    print(render_header(report), flush=True)
    fns = contenders()
    warm = jnp.linspace(0.0, RHO_MAX, 2, dtype=jnp.float32)
    for fn in fns.values():  # pay one-off Python-side set-up (lazy imports) outside the timings
        jax.block_until_ready(fn(warm))
    report["sizes"] = []
    for n in sizes:
        print(f"\nN = {n:,} ...", flush=True)
        report["sizes"].append(bench_size(n, fns, repeats, scipy_subset))
    if args.compile_repeats > 0:
        print("\ncompile breakdown ...", flush=True)
        report["compiled_n"] = sizes[0]
        report["compiled"] = compile_breakdown(fns, sizes[0], args.compile_repeats)
    if cold_repeats > 0:
        print("\ncold start ...", flush=True)
        report["cold"] = bench_cold(args.config.resolve(), cold_repeats, cli_repeats, args.wait_cli)
    print("\n" + render(report, markdown=False) + "\n\n" + summary(report))
    write_reports(
        report, args.markdown, args.json, render_header(report) + "\n\n" + render(report, True)
    )
    return report


if __name__ == "__main__":
    main()
