"""Benchmark fit checkpoints of many parameters: difsim's format (equinox
`tree_serialise_leaves` behind a JSON header and a SHA-256 checksum, one file written
atomically, `difsim._fit._checkpoint`) against Orbax (`orbax.checkpoint.StandardCheckpointer`,
a directory of TensorStore/OCDBT files, written to a temporary directory and renamed).

The state is what a fit with `--params` free values saves after a block of Adam steps: the
loop's own `Carry` (iterate, last good and best iterates, optax's Adam moments, counters) in
float64 and the history of `--steps` steps. Each repeat saves and restores with both, in
alternating order, in this one process; save (to a durable file: Orbax's asynchronous
commit is waited for) and restore are timed apart, wall and CPU time, medians and minima;
the restored state is checked bit for bit.

Orbax is not a difsim dependency: install it beside the environment to measure, e.g.
`pip install --target /tmp/orbax_site orbax-checkpoint` and `PYTHONPATH=/tmp/orbax_site`.

```
python experiments/benchmarks/bench_checkpoint_orbax.py                  # 10^5 and 10^6
python experiments/benchmarks/bench_checkpoint_orbax.py --params 1000000 --repeats 11
```
"""

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from _common import command_line, format_table, load_average, seconds, today, versions  # noqa: E402

from difsim._fit import _checkpoint  # noqa: E402
from difsim._fit._loop import Carry  # noqa: E402


def fit_state(params: int, steps: int):
    """`(header, history, carry)` shaped as a fit of `params` free values saves them."""
    rng = np.random.default_rng(0)
    u = jnp.asarray(rng.standard_normal(params))
    state = optax.adam(1e-3).init(u)
    # Moments as after training (incompressible, as the iterates are), not their zeros.
    state = jax.tree.map(lambda x: jnp.abs(jnp.asarray(rng.standard_normal(x.shape))) * 1e-3
                         if x.ndim else x, state)  # fmt: skip
    zero = jnp.zeros((), jnp.int32)
    carry = Carry(u, state, zero + 50, u * 0.99, u * 0.98, jnp.asarray(0.25), zero,
                  jnp.zeros((), bool), zero, zero)  # fmt: skip
    history = rng.standard_normal((steps, 3))
    header = dict(free=["net"], optimizer="adam", shape=[params], problem="sha256:bench")
    return header, history, carry


class Difsim:
    name = "difsim (equinox + checksum)"

    def __init__(self, folder: Path):
        self.path = folder / "fit.ckpt"

    def save(self, header, history, carry) -> None:
        _checkpoint.save_checkpoint(self.path, header, history, carry)

    def restore(self, header, like):
        return _checkpoint.load_checkpoint(self.path, header, like[1])

    def size(self) -> int:
        return self.path.stat().st_size


class Orbax:
    name = "orbax StandardCheckpointer"

    def __init__(self, folder: Path):
        import orbax.checkpoint as ocp

        self.ocp, self.folder = ocp, folder
        self.checkpointer = ocp.StandardCheckpointer()
        self.path = folder / "orbax"

    def save(self, header, history, carry) -> None:
        if self.path.exists():
            shutil.rmtree(self.path)  # (difsim replaces its file; orbax refuses by default)
        self.checkpointer.save(self.path, {"history": history, "carry": carry})
        self.checkpointer.wait_until_finished()  # durable, as difsim's fsync

    def restore(self, header, like):
        target = jax.tree.map(
            self.ocp.utils.to_shape_dtype_struct, {"history": like[0], "carry": like[1]}
        )
        out = self.checkpointer.restore(self.path, target)
        return np.asarray(out["history"]), out["carry"]

    def size(self) -> int:
        return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())


def compare(folder: Path, params: int, steps: int, repeats: int) -> list[tuple]:
    header, history, carry = fit_state(params, steps)
    formats = [Difsim(folder), Orbax(folder)]
    times = {(f.name, what): [] for f in formats for what in ("save", "restore", "cpu")}
    for r in range(repeats):
        for f in formats[r % 2 :] + formats[: r % 2]:  # alternate who goes first
            w, c = time.perf_counter(), time.process_time()
            f.save(header, history, carry)
            saved, saved_cpu = time.perf_counter() - w, time.process_time() - c
            w = time.perf_counter()
            back_history, back = f.restore(header, (history, carry))
            jax.block_until_ready(back)
            times[f.name, "save"].append(saved)
            times[f.name, "restore"].append(time.perf_counter() - w)
            times[f.name, "cpu"].append(time.process_time() - c - saved_cpu)
            np.testing.assert_array_equal(back_history, history)
            for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(carry)):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    rows = []
    for f in formats:
        save, restore, cpu = (times[f.name, what] for what in ("save", "restore", "cpu"))
        rows.append((f"{params:.0e}", f.name, seconds(np.median(save)), seconds(min(save)),
                     seconds(np.median(restore)), seconds(min(restore)),
                     seconds(np.median(cpu)), f"{f.size() / 1e6:.1f} MB"))  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--steps", type=int, default=10_000, help="rows of loss history")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    import orbax.checkpoint as ocp

    print(f"# {command_line()}\n# {today()}, load {load_average()}, {versions()}, "
          f"orbax-checkpoint {ocp.__version__}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for params in args.params:
            rows += compare(Path(tmp), params, args.steps, args.repeats)
    heads = ["P", "format", "save (median)", "(min)", "restore (median)", "(min)",
             "restore CPU", "on disk"]  # fmt: skip
    print(format_table(heads, rows, markdown=args.markdown))


if __name__ == "__main__":
    main()
