"""Did a change make difsim slower? The same workloads on two revisions, interleaved.

A refactor should change no speed. Comparing against figures taken on another day mixes the
change with the machine's mood (the shared 2-core machines drift by tens of percent between
hours), so this script times both revisions now, alternately: each round runs one fresh
worker process per revision (A B, then B A, ...), each worker compiles its workloads once
and times `--repeats` steady calls of each, by process CPU time and wall time. Reported:
the median over rounds of each revision's medians, and of the per-round ratio new / base.

```bash
python experiments/benchmarks/compare_revisions.py --base c66ebb0 --rounds 6
```

The base revision is unpacked with `git archive` into a temporary folder laid out as the
installed package (`src/difsim`, `models/` → `difsim/models`, `solvers/` → `difsim/solvers`)
and put first on `PYTHONPATH`; "new" is the working tree, laid out the same way.

Workloads (float32, Lorenz rho = linspace(0, 21, N), t in [0, 1], rtol = atol = 1e-6, final
state): `sweep` is `ds.sweep(..., save="final")`; `vmap` is `jit(vmap(ds.simulate(...)))`;
`fit` is the lynx–hare Lotka–Volterra fit of `bench_fit.py` (Levenberg–Marquardt, float64).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _common import run_worker

ROOT = Path(__file__).resolve().parents[2]

WORKER = r"""
import json, os, sys, time
import jax, jax.numpy as jnp
import xarray as xr
import difsim as ds

n, repeats = int(sys.argv[1]), int(sys.argv[2])
rhos = jnp.linspace(0.0, 21.0, n, dtype=jnp.float32)
spec = ds.GridSweep({"rho": rhos})
model = ds.models.Lorenz()
kw = dict(t0=0.0, t1=1.0, save="final", rtol=1e-6, atol=1e-6)
one = lambda rho: ds.simulate(ds.models.Lorenz(rho=rho), throw=False, **kw).final
vmapped = jax.jit(jax.vmap(one))
work = {
    "sweep": lambda: ds.sweep(model, spec, progress=False, **kw)["x"].values,
    "vmap": lambda: jax.block_until_ready(vmapped(rhos)),
    "fit": lambda: lynx_hare_fit(),
}
data = xr.load_dataset(sys.argv[3])


def lynx_hare_fit():
    free = {k: ds.Positive() for k in ("alpha", "beta", "gamma", "delta")}
    free |= {"state.prey": ds.Positive(), "state.predator": ds.Positive()}
    res = ds.fit(ds.models.LotkaVolterra(), data, free=free, noise="lognormal",
                 observe={"hare": "prey", "lynx": "predator"}, rtol=1e-8, atol=1e-8)
    return res.loss


out = {"file": ds.__file__}
for name, fn in work.items():
    if name == "fit":  # float64, as in bench_fit.py; after the float32 workloads
        jax.config.update("jax_enable_x64", True)
    fn()  # compile
    wall, cpu = [], []
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    out[name] = dict(wall=sorted(wall)[len(wall) // 2], cpu=sorted(cpu)[len(cpu) // 2])
print(json.dumps(out))
"""


def stage(source: Path, target: Path) -> Path:
    """Lay `source` (a checkout) out as the installed package under `target`."""
    package = target / "difsim"
    shutil.copytree(source / "src" / "difsim", package)  # links followed: copies their files
    for name in ("models", "solvers"):
        if not (package / name).exists():  # trees from before src/difsim linked to them
            shutil.copytree(source / name, package / name)
    return target


def export(revision: str, target: Path) -> Path:
    """The tree of `revision`, unpacked under `target`."""
    target.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision to compare against")
    parser.add_argument("--n", type=int, default=10_000, help="trajectories per call")
    parser.add_argument("--rounds", type=int, default=6, help="worker pairs (A B / B A)")
    parser.add_argument("--repeats", type=int, default=7, help="timed calls per worker")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {
            "base": stage(export(args.base, tmp / "base-src"), tmp / "base"),
            "new": stage(ROOT, tmp / "new"),
        }
        print(f"load average at start: {os.getloadavg()}", flush=True)
        results: dict[str, list[dict]] = {"base": [], "new": []}
        start = time.perf_counter()
        for r in range(args.rounds):
            order = ("base", "new") if r % 2 == 0 else ("new", "base")
            for name in order:
                data = ROOT / "data" / "lynx_hare.nc"
                res = run_worker(trees[name], WORKER, args.n, args.repeats, data)
                assert res["file"].startswith(str(trees[name])), res["file"]
                results[name].append(res)
            print(f"round {r + 1}/{args.rounds} done ({time.perf_counter() - start:.0f} s)")
        print(f"load average at end: {os.getloadavg()}")
        report(results, args)


def report(results: dict[str, list[dict]], args) -> None:
    print(f"\nN = {args.n:,}, {args.rounds} rounds x {args.repeats} calls; medians over rounds")
    print("(ratios: median over rounds, with the lowest and highest round in brackets)")
    print("| workload | base CPU | new CPU | new/base CPU | base wall | new wall | new/base wall |")
    print("|---|---|---|---|---|---|---|")
    for work in ("sweep", "vmap", "fit"):
        row = [work]
        for key in ("cpu", "wall"):
            base = [r[work][key] for r in results["base"]]
            new = [r[work][key] for r in results["new"]]
            ratios = sorted(b / a for a, b in zip(base, new))
            ratio = f"{statistics.median(ratios):.3f} ({ratios[0]:.2f}–{ratios[-1]:.2f})"
            row += [
                f"{statistics.median(base) * 1e3:.1f} ms",
                f"{statistics.median(new) * 1e3:.1f} ms",
            ]
            row += [ratio]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
