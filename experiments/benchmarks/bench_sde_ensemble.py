"""Monte Carlo sweeps of a stochastic model on the ensemble engine against the diffrax engine.

The problem: the overdamped Langevin particle in the double well (`DoubleWellLangevin`,
D = 0.25), from x = -1 over t in [0, `--t1`], Euler–Maruyama with a fixed step of 0.01 and
the step-lattice Brownian path (`brownian="steps"`: what the ensemble engine integrates),
`N` paths of one parameter point. Two sweeps per engine:

- **statistics**: `keep=["x_mean", "x_var"]` over the paths at 11 save times, streamed
  chunk by chunk (`_monte_carlo`);
- **paths**: `keep="final"`, each path's final state (`PathSweep`).

`ds.sweep(..., engine="ensemble")` and `ds.sweep(..., engine="diffrax")` are timed
interleaved in one process (A B B A ...), after a warm-up call of each (compiles), by
process CPU time and wall time; medians over `--repeats`. Both engines integrate the same
paths, so the script also checks that their results agree.

```
python experiments/benchmarks/bench_sde_ensemble.py                  # 1e4 and 1e5 paths
python experiments/benchmarks/bench_sde_ensemble.py --paths 10000 --repeats 3   # quicker
```
"""

import argparse
import os

import jax
import numpy as np

import difsim as ds
from difsim.models import DoubleWellLangevin

jax.config.update("jax_enable_x64", True)

try:  # as a script (experiments/benchmarks on sys.path) or as a module
    from _common import Stats, interleaved, load_average, machine_info, today, versions
except ImportError:  # pragma: no cover
    from experiments.benchmarks._common import (
        Stats,
        interleaved,
        load_average,
        machine_info,
        today,
        versions,
    )

KEEPS = {"statistics": ["x_mean", "x_var"], "paths": "final"}


def sweep_fn(paths: int, keep, engine: str, t1: float):
    """A call that runs the sweep and returns its data as numpy arrays."""
    model = DoubleWellLangevin(D=0.25)
    kw = dict(t0=0.0, t1=t1, save=11 if keep != "final" else "final", solver="euler",
              dt0=0.01, brownian="steps", samples=paths, seed=0, keep=keep, engine=engine,
              progress=False)  # fmt: skip

    def run():
        out = ds.sweep(model, None, **kw)
        assert out.attrs["engine"] == engine
        return {k: np.asarray(v) for k, v in out.data_vars.items()}

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--t1", type=float, default=2.0, help="end time (steps: t1 / 0.01)")
    args = parser.parse_args()
    print(f"{today()}; {machine_info()}; {versions()}")
    print(f"load average before: {load_average()}; XLA_FLAGS={os.environ.get('XLA_FLAGS')}")
    steps = round(args.t1 / 0.01)
    print(f"double well, Euler–Maruyama, dt0 = 0.01, t1 = {args.t1:g} ({steps} steps), "
          f"float64; CPU/wall medians of {args.repeats}")  # fmt: skip
    header = f"{'paths':>8} {'kept':>10} {'ensemble CPU':>13} {'diffrax CPU':>12} {'ratio':>6}"
    print(header + f" {'ensemble wall':>14} {'diffrax wall':>13}  load")
    for n in args.paths:
        for what, keep in KEEPS.items():
            fns = {e: sweep_fn(n, keep, e, args.t1) for e in ("ensemble", "diffrax")}
            results = {e: fn() for e, fn in fns.items()}  # warm-up: compiles
            for name in results["ensemble"]:
                np.testing.assert_allclose(results["ensemble"][name], results["diffrax"][name],
                                           rtol=1e-10, atol=1e-12)  # fmt: skip
            wall, cpu = interleaved(fns, (), args.repeats)
            c = {e: Stats(v).median for e, v in cpu.items()}
            w = {e: Stats(v).median for e, v in wall.items()}
            print(f"{n:>8} {what:>10} {c['ensemble']:>12.3f}s {c['diffrax']:>11.3f}s "
                  f"{c['diffrax'] / c['ensemble']:>5.1f}x {w['ensemble']:>13.3f}s "
                  f"{w['diffrax']:>12.3f}s  {load_average()}")  # fmt: skip


if __name__ == "__main__":
    main()
