"""What a sweep's output store costs: the chunk-file store (a base revision) vs the zarr store.

For a Lorenz sweep of N trajectories (float32, rho = linspace(0, 21, N), t in [0, 1],
rtol = atol = 1e-6, final state, chunks of N / 10), each worker process times, after one
call to compile:

- `memory`: `ds.sweep` without an output (the computation alone);
- `disk`: the same sweep to a new netCDF path (store, checksums, assembly, cleanup);
- `resume all`: the run after a sweep stopped once its last chunk was stored: every chunk
  is checked and assembled, nothing is computed;
- `resume half`: the run after a sweep stopped after half of its chunks.

The store's overhead is `disk - memory`. Revisions run interleaved (base new, then new
base, ...), one fresh worker process per revision and round; figures are medians of process
CPU time and wall time over the rounds (each round's value the median of `--repeats`
calls). Every worker also reports the SHA-256 of its netCDF file: the base and the new
revision must write the same bytes.

```bash
python experiments/benchmarks/bench_sweep_store.py --base 9ee3a23 --sizes 1e4,1e5 --rounds 6
```
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from _common import run_worker
from compare_revisions import ROOT, export, stage

WORKER = r"""
import hashlib, json, sys, tempfile, time
from pathlib import Path
import jax.numpy as jnp
import difsim as ds
from difsim._sweep import run_sweep

n, repeats = int(sys.argv[1]), int(sys.argv[2])
spec = ds.GridSweep({"rho": jnp.linspace(0.0, 21.0, n, dtype=jnp.float32)})
kw = dict(t0=0.0, t1=1.0, save="final", rtol=1e-6, atol=1e-6, chunk_size=n // 10,
          progress=False)
model = ds.models.Lorenz()
folder = Path(tempfile.mkdtemp())
count = iter(range(10**6))


class Stop(Exception):
    pass


def stopped_after(last):
    path = folder / f"run{next(count)}.nc"

    def stop(i):
        if i == last:
            raise Stop

    try:
        run_sweep(model, spec, output=path, on_chunk=stop, **kw)
    except Stop:
        return path
    raise AssertionError("the sweep was not stopped")


def disk():
    path = folder / f"run{next(count)}.nc"
    run_sweep(model, spec, output=path, **kw)
    return path


work = {
    "memory": (lambda: None, lambda _: run_sweep(model, spec, **kw)),
    "disk": (lambda: None, lambda _: disk()),
    "resume all": (lambda: stopped_after(9), lambda p: run_sweep(model, spec, output=p, **kw)),
    "resume half": (lambda: stopped_after(4), lambda p: run_sweep(model, spec, output=p, **kw)),
}
out = {"file": ds.__file__, "sha256": hashlib.sha256(disk().read_bytes()).hexdigest()}
for name, (setup, fn) in work.items():
    fn(setup())  # compile, warm the caches
    wall, cpu = [], []
    for _ in range(repeats):
        arg = setup()
        w0, c0 = time.perf_counter(), time.process_time()
        fn(arg)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
    out[name] = dict(wall=sorted(wall)[len(wall) // 2], cpu=sorted(cpu)[len(cpu) // 2])
print(json.dumps(out))
"""

WORK = ("memory", "disk", "resume all", "resume half")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="git revision with the old store")
    parser.add_argument("--sizes", default="1e4,1e5", help="comma-separated N")
    parser.add_argument("--rounds", type=int, default=6, help="worker pairs (A B / B A)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per worker")
    args = parser.parse_args()
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {
            "base": stage(export(args.base, tmp / "base-src"), tmp / "base"),
            "new": stage(ROOT, tmp / "new"),
        }
        print(f"load average at start: {os.getloadavg()}", flush=True)
        results = {(name, n): [] for name in trees for n in sizes}
        start = time.perf_counter()
        for r in range(args.rounds):
            for n in sizes:
                for name in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    res = run_worker(trees[name], WORKER, n, args.repeats, one_device=True)
                    assert res["file"].startswith(str(trees[name])), res["file"]
                    results[name, n].append(res)
            print(f"round {r + 1}/{args.rounds} ({time.perf_counter() - start:.0f} s), "
                  f"load {os.getloadavg()}", flush=True)  # fmt: skip
        print(f"load average at end: {os.getloadavg()}")
    report(results, sizes, args)


def report(results: dict, sizes: list[int], args) -> None:
    print(f"\n{args.rounds} rounds x {args.repeats} calls; medians over rounds, ms")
    print("| N | work | base CPU | new CPU | base wall | new wall | new/base CPU |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        digests = {r["sha256"] for name in ("base", "new") for r in results[name, n]}
        for work in (*WORK, "disk - memory"):
            row = [f"{n:.0e}", work]
            cells, ratio = [], ""
            for key in ("cpu", "wall"):
                med = {}
                for name in ("base", "new"):
                    med[name] = statistics.median(_value(r, work, key) for r in results[name, n])
                    cells.append(f"{med[name] * 1e3:.0f}")
                if key == "cpu" and med["base"] > 0:
                    ratio = f"{med['new'] / med['base']:.2f}"
            print("| " + " | ".join(row + cells + [ratio]) + " |")
        same = "identical" if len(digests) == 1 else f"DIFFERENT ({len(digests)} digests)"
        print(f"N = {n:.0e}: netCDF files of base and new revision: {same}")


def _value(result: dict, work: str, key: str) -> float:
    if work == "disk - memory":
        return result["disk"][key] - result["memory"][key]
    return result[work][key]


if __name__ == "__main__":
    main()
