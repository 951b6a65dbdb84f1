"""Benchmark the cost of progress reported from inside a compiled solve (`progress=True`).

`ds.simulate(..., progress=True)` compiles diffrax's progress-meter protocol into the solve:
a host callback every `refresh_steps` steps, chosen from the state size
(`difsim._core._progress_meter.refresh_steps`, ~20 ms of steps between callbacks). This
times each problem with and without it, interleaved in one process (compiled once before
timing; the display writes log lines, as in a batch job), and also with a callback every
step, to give the cost of one callback.

```
python experiments/benchmarks/bench_progress.py            # ~1 minute
python experiments/benchmarks/bench_progress.py --repeats 9 --markdown runs/bench_progress.md
```
"""

import argparse
import os
import statistics

import jax

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("DIFSIM_PROGRESS_INTERVAL", "1e9")  # the display's host work, no lines

from _common import (  # noqa: E402
    command_line,
    format_table,
    interleaved,
    load_average,
    machine_info,
    seconds,
    today,
    versions,
)

import difsim as ds  # noqa: E402
from difsim._core import _progress_meter  # noqa: E402
from difsim.models import GrayScott, Lorenz  # noqa: E402


def _problems():
    fixed = dict(save="final", dt0=1.0, controller="constant")
    return {
        "Lorenz, 0..500 (adaptive, ~45k steps)": (
            Lorenz(), dict(t0=0.0, t1=500.0, save=11, rtol=1e-8, atol=1e-8, max_steps=10**6)
        ),
        "Gray-Scott 64x64, 2000 steps": (
            GrayScott(grid=ds.Grid(shape=(64, 64), extent=(0.625, 0.625))),
            dict(t0=0.0, t1=2000.0, **fixed),
        ),
        "Gray-Scott 128x128, 1000 steps": (
            GrayScott(grid=ds.Grid(shape=(128, 128), extent=(1.25, 1.25))),
            dict(t0=0.0, t1=1000.0, **fixed),
        ),
    }  # fmt: skip


def _solve(model, kw, progress: bool, budget: float):
    def run(_):
        _progress_meter._BUDGET = budget
        try:
            return ds.simulate(model, progress=progress, **kw).status
        finally:
            _progress_meter._BUDGET = default

    default = _progress_meter._BUDGET
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()
    rows = []
    for name, (model, kw) in _problems().items():
        n_state = sum(v.size for v in model.initial_state().values.values())
        fns = {
            "off": _solve(model, kw, False, 0.02),
            "on": _solve(model, kw, True, 0.02),
            "every step": _solve(model, kw, True, 1e-12),
        }
        for fn in fns.values():
            fn(None)  # compile
        steps = int(ds.simulate(model, **kw).num_steps)
        wall, cpu = interleaved(fns, (None,), args.repeats)
        off = statistics.median(cpu["off"])
        on = statistics.median(cpu["on"])
        every = statistics.median(cpu["every step"])
        refresh = _progress_meter.refresh_steps(n_state)
        per_callback = (every - off) / steps
        rows.append((
            name, f"{n_state:,}", f"{steps:,}", f"{refresh:,}", seconds(off), seconds(on),
            f"{100 * (on / off - 1):+.1f} %", seconds(every), seconds(per_callback),
        ))  # fmt: skip
    headers = ["problem", "state", "steps", "steps/callback", "off (CPU)", "on (CPU)",
               "on vs off", "every step (CPU)", "per callback"]  # fmt: skip
    print(f"# {command_line()}\n# {today()}, load {load_average()}, {versions()}")
    print(f"# {machine_info()['cpu']}, {machine_info()['nproc']} cores")
    text = format_table(headers, rows, markdown=bool(args.markdown))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
