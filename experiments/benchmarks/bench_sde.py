"""The fuller checks of the stochastic models: Kramers' escape rate at high barriers, by Monte
Carlo first-passage times, and the throughput of an SDE ensemble by Brownian path.

**Kramers.** An overdamped particle in the double well V(x) = x^4/4 - x^2/2 starts at
x = -1; its first time at x = +1 (the other well) is found by a terminating event. The
Monte Carlo mean over `--paths` paths is compared with the exact mean first-passage time
(the double integral, `DoubleWellLangevin.mean_first_passage_time`) and with Kramers'
1/k, for barriers ΔV/D = 2, 3, 4 (mean times 41, 107, 277; every path runs until the
last one arrives, about ln(paths) mean times: the high barriers are slow on a CPU). The
tests check ΔV/D = 1 cheaply (tests/test_sde_models.py); this script is the high-barrier
version, where the exact time and 1/k approach each other (T k = 1 + O(D/ΔV)).

**Throughput.** Euler–Maruyama on the double well, 1000 fixed steps, `--paths` paths, one
vmapped compiled call: paths per second with the virtual Brownian tree (the default: one
path for any steps) and with per-step draws (`brownian="steps"`), interleaved A B A B.

```
python experiments/benchmarks/bench_sde.py                          # long on a CPU
python experiments/benchmarks/bench_sde.py --barriers 2 3 --paths 1000   # quicker, noisier
```
"""

import argparse
import os
import statistics
import time

import jax
import numpy as np

import difsim as ds
from difsim.models import DoubleWellLangevin

ds.tune_xla()  # as `difsim run` does (the benchmarks' `_common` does the same)

jax.config.update("jax_enable_x64", True)


def first_passage_times(well: DoubleWellLangevin, paths: int, dt: float, seed: int = 0):
    """First times at x = +1 from x = -1 (`(paths,)`), and how many paths got there."""
    stop = ds.Event(lambda t, s, m: s.x - 1.0, direction=True)
    t1 = 12 * well.mean_first_passage_time()

    def one(key):
        sol = ds.simulate(well, t0=0.0, t1=t1, save="final", key=key, solver="euler", dt0=dt,
                          brownian="steps", event=stop, max_steps=int(t1 / dt) + 10)  # fmt: skip
        return sol.t_end, sol.status == ds.Status.EVENT

    keys = jax.random.split(jax.random.key(seed), paths)
    times, reached = jax.jit(jax.vmap(one))(keys)
    return np.asarray(times), int(np.sum(np.asarray(reached)))


def kramers(paths: int, barriers, dt: float) -> None:
    print("ΔV/D  exact T   1/k (Kramers)  T k     Monte Carlo T ± SE     (MC - T)/SE")
    for barrier in barriers:
        well = DoubleWellLangevin(D=0.25 / barrier)
        exact, rate = well.mean_first_passage_time(), float(well.kramers_rate())
        times, reached = first_passage_times(well, paths, dt=dt)
        se = times.std(ddof=1) / np.sqrt(paths)
        print(f"{barrier:4.0f}  {exact:8.2f}  {1 / rate:12.2f}  {exact * rate:6.3f}  "
              f"{times.mean():8.2f} ± {se:5.2f} ({reached}/{paths})  "
              f"{(times.mean() - exact) / se:+.2f}")  # fmt: skip


def throughput(paths: int, repeats: int = 3) -> None:
    well = DoubleWellLangevin(D=0.2)
    keys = jax.random.split(jax.random.key(0), paths)
    runs = {}
    for brownian in ("tree", "steps"):
        fn = jax.jit(jax.vmap(lambda k, b=brownian: ds.simulate(
            well, t0=0.0, t1=10.0, save="final", key=k, solver="euler", dt0=0.01, brownian=b
        ).final["x"]))  # fmt: skip
        fn(keys).block_until_ready()  # compile
        runs[brownian] = fn
    times = {b: [] for b in runs}
    for _ in range(repeats):  # interleaved: A B A B
        for brownian, fn in runs.items():
            start = time.process_time()
            fn(keys).block_until_ready()
            times[brownian].append(time.process_time() - start)
    print(f"\nEuler–Maruyama, 1000 steps, {paths} paths (process CPU time, median of {repeats})")
    for brownian, t in times.items():
        med = statistics.median(t)
        print(f"  brownian={brownian!r:8}  {med:7.2f} s   {paths / med:10.0f} paths/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paths", type=int, default=2000)
    parser.add_argument("--barriers", type=float, nargs="+", default=[2.0, 3.0, 4.0])
    parser.add_argument("--dt", type=float, default=0.01)
    args = parser.parse_args()
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    kramers(args.paths, args.barriers, args.dt)
    throughput(min(args.paths, 10_000))


if __name__ == "__main__":
    main()
