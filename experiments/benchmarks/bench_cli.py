"""Benchmark `difsim run` from the shell: cold (empty compilation cache), warm (the same
command again) and without the cache, plus `difsim --help`.

Each round runs, per config: `--no-compile-cache`, then cold into a fresh cache folder,
then warm from it; rounds repeat, so the three alternate. Each run is a fresh process
(`python -m difsim`, as the console script does); wall time is to the process's exit, CPU
time is the child's user + system time. The summary's own breakdown (start-up, solve,
outputs) is kept too.

```
python experiments/benchmarks/bench_cli.py                    # ~5 minutes on 2 cores
python experiments/benchmarks/bench_cli.py --rounds 5 --configs experiments/lorenz.toml
```
"""

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import command_line, format_table, load_average, machine_info, today, versions

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ["experiments/lorenz.toml", "experiments/lorenz_rho_sweep.toml",
           "experiments/lynx_hare_fit.toml"]  # fmt: skip


def _run(args: list[str], env: dict[str, str], out: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "difsim", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=900,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"difsim {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = re.search(r"wall time\s+([\d.]+) s in all: start-up ([\d.]+) s, \w+ ([\d.]+) s",
                        proc.stdout)  # fmt: skip
    parts = tuple(float(x) for x in summary.groups()) if summary else (None,) * 3
    cache = re.search(r"compile cache\s+.*$", proc.stdout, re.M)
    return dict(wall=wall, cpu=cpu, printed=parts, cache=cache.group(0) if cache else "")


def _row(config: str, mode: str, runs: list[dict]) -> tuple:
    med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
    printed = [r["printed"] for r in runs if r["printed"][0] is not None]
    startup = med([p[1] for p in printed])
    solve = med([p[2] for p in printed])
    return (
        Path(config).name, mode, f"{med([r['wall'] for r in runs]):.2f} s",
        f"{min(r['wall'] for r in runs):.2f} s", f"{med([r['cpu'] for r in runs]):.2f} s",
        f"{startup:.2f} s", f"{solve:.2f} s", runs[-1]["cache"].split(":", 1)[-1].strip(),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", nargs="+", default=CONFIGS)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DIFSIM_", "EQX_"))}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    loads = [load_average()]
    results: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for r in range(args.rounds):
            help_run = _run(["--help"], env, out)
            results.setdefault(("difsim --help", ""), []).append(help_run)
            for config in args.configs:
                name = Path(config).stem
                folder = out / f"cache-{name}-{r}"
                runs = {}
                for mode, cache in (("no cache", ["--no-compile-cache"]),
                                    ("cold", ["--compile-cache", str(folder)]),
                                    ("warm", ["--compile-cache", str(folder)])):  # fmt: skip
                    # A fresh output each time: a sweep whose output already holds its
                    # result computes nothing.
                    target = out / f"{name}-{r}-{mode.replace(' ', '_')}.nc"
                    runs[mode] = _run(["run", config, "-o", str(target), "-q", *cache], env, out)
                none, cold, warm = runs["no cache"], runs["cold"], runs["warm"]
                for mode, run in (("no cache", none), ("cold", cold), ("warm", warm)):
                    results.setdefault((config, mode), []).append(run)
            loads.append(load_average())
    rows = []
    for (config, mode), runs in results.items():
        if config == "difsim --help":
            walls = [r["wall"] for r in runs]
            cpus = [r["cpu"] for r in runs]
            rows.append((config, "", f"{statistics.median(walls):.2f} s", f"{min(walls):.2f} s",
                         f"{statistics.median(cpus):.2f} s", "", "", ""))  # fmt: skip
        else:
            rows.append(_row(config, mode, runs))
    headers = ["run", "cache", "wall (median)", "wall (min)", "CPU (median)",
               "start-up (printed)", "solve (printed)", "compile cache (last run)"]  # fmt: skip
    print(f"# {command_line()}\n# {today()}, {versions()}")
    info = machine_info()
    print(f"# {info['cpu']}, {info['nproc']} cores; load averages during the run: {loads}")
    print(format_table(headers, rows, markdown=args.markdown))


if __name__ == "__main__":
    main()
