"""Benchmark fit checkpoints: writing and reading them, the current format against an older
revision's `_fit/_checkpoint.py` (by default `9ee3a23`, before equinox serialised the
history too).

A real loop state comes from a short Lotka–Volterra fit (`ds.fit`, Levenberg–Marquardt by
default, a multistart of `--starts`); the history is padded to `--steps` rows, as a long
fit's would be. Each revision's `save_checkpoint` + `load_checkpoint` runs interleaved
with the other's, in this one process; medians and minima of wall and CPU time are printed.

```
python experiments/benchmarks/bench_checkpoint.py                 # ~1 minute
python experiments/benchmarks/bench_checkpoint.py --steps 1000 100000 --starts 8
```
"""

import argparse
import importlib.util
import subprocess
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
from _common import command_line, format_table, load_average, seconds, today, versions  # noqa: E402

import difsim as ds  # noqa: E402
from difsim._fit import _checkpoint as current, _loop  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _module_at(rev: str):
    """The checkpoint module as revision `rev` wrote it, imported from a temp file."""
    text = subprocess.run(
        ["git", "show", f"{rev}:src/difsim/_fit/_checkpoint.py"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / f"checkpoint_{rev}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"checkpoint_{rev}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _real_state(folder: Path, starts: int, optimizer: str):
    """`(header, history, carry)` as a real multistart fit hands them to its checkpoint."""
    seen = {}

    def capture(path, header, history, carry):
        seen.update(header=header, history=history, carry=carry)
        return current.save_checkpoint(path, header, history, carry)

    _loop.save_checkpoint = capture  # the loop's own call, observed
    model = ds.models.LotkaVolterra()
    data = ds.simulate(model, t0=0.0, t1=10.0, save=21).to_xarray()[["prey", "predator"]]
    ds.fit(
        model.replace(alpha=1.3), data, ["alpha", "beta"], optimizer=optimizer, steps=60,
        multistart=starts, checkpoint=folder / "real.ckpt", progress=False,
    )  # fmt: skip
    return seen["header"], seen["history"], seen["carry"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 100_000])
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--optimizer", default="levenberg_marquardt")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--baseline", default="9ee3a23", help="git revision to compare with")
    args = parser.parse_args()
    print(f"# {command_line()}\n# {today()}, load {load_average()}, {versions()}")
    old = _module_at(args.baseline)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        header, history, carry = _real_state(folder, args.starts, args.optimizer)
        rows = []
        for steps in args.steps:
            padded = np.resize(history, (steps, *history.shape[1:]))
            modules = {"current": current, args.baseline: old}
            rows += _compare(folder, header, padded, carry, modules, args.repeats)
    print(format_table(["steps", "revision", "save+load wall", "(min)", "CPU", "file"], rows,
                       markdown=args.markdown))  # fmt: skip


def _compare(folder, header, history, carry, modules, repeats):
    wall = {name: [] for name in modules}
    cpu = {name: [] for name in modules}
    sizes = {}
    for r in range(repeats):
        names = list(modules)[r % 2 :] + list(modules)[: r % 2]
        for name in names:
            module, path = modules[name], folder / f"{name}.ckpt"
            w, c = time.perf_counter(), time.process_time()
            module.save_checkpoint(path, header, history, carry)
            back, state = module.load_checkpoint(path, header, carry)
            jax.block_until_ready(state)
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
            np.testing.assert_array_equal(back, history)
            sizes[name] = path.stat().st_size
    return [
        (
            history.shape[0],
            name,
            seconds(np.median(wall[name])),
            seconds(min(wall[name])),
            seconds(np.median(cpu[name])),
            f"{sizes[name] / 1e6:.2f} MB",
        )  # fmt: skip
        for name in modules
    ]


if __name__ == "__main__":
    main()
