"""Where does `difsim.simulate` cost more than the same solve written with diffrax by hand?

Compiles the benchmark's Lorenz sweep (see `bench_simulate.py`) four ways and compares
runtime, compile time and compiled-program size:

- **diffrax**: the hand-written solve;
- **difsim**: `ds.simulate` as installed;
- **+ static unpack**: `Layout.unpack` reading variable `i` with a static slice
  (`lax.index_in_dim`) instead of `jnp.take`, whose default out-of-bounds mode ("fill")
  adds a NaN-select per variable to every right-hand-side evaluation;
- **+ status table**: additionally, `status_from_result` as one lookup in a constant table
  instead of a chain of 13 compare/select pairs (which XLA copies into every output).

The two candidate fixes are applied by patching difsim *while tracing* (nothing on disk
changes), with JAX's caches cleared before each compile. Once a fix is in the library its
row matches the "difsim" row.

```
python experiments/benchmarks/diagnose_overhead.py --size 1000 --repeats 41
```
"""

import argparse
import contextlib
import statistics
import sys

import jax

jax.config.update("jax_enable_x64", False)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    aot_phases,
    format_table,
    hlo_op_histogram,
    hlo_while_bodies,
    interleaved,
    machine_info,
    versions,
)
from bench_simulate import (  # noqa: E402
    MAX_STEPS,
    RHO_MAX,
    as_states,
    diffrax_final,
    difsim_final,
    max_abs_diff,
)
from jax import lax  # noqa: E402

from difsim import _status  # noqa: E402
from difsim._core import _simulate, _vector_field  # noqa: E402


def static_unpack(self, y, axis: int = 0):
    if self.packed:
        return {
            name: lax.index_in_dim(y, i, axis=axis, keepdims=False)
            for i, name in enumerate(self.names)
        }
    return dict(y)


def _status_table() -> np.ndarray:
    table = np.full(len(dfx.RESULTS), int(_status.Status.INTERNAL), np.int32)
    for name, status in _status._FROM_DIFFRAX:
        member = getattr(dfx.RESULTS, name, None)
        if member is not None:
            table[int(member._value)] = int(status)
    return table


def table_status(result):
    return jnp.asarray(_status_table())[result._value]


@contextlib.contextmanager
def patched(unpack=None, status=None):
    saved = _vector_field.Layout.unpack, _simulate.status_from_result
    try:
        if unpack is not None:
            _vector_field.Layout.unpack = unpack
        if status is not None:
            _simulate.status_from_result = status
        yield
    finally:
        _vector_field.Layout.unpack, _simulate.status_from_result = saved


def variants() -> dict:
    """Name → (function of one `rho`, patches applied while tracing it)."""
    return {
        "diffrax": (lambda rho: diffrax_final(rho, MAX_STEPS), {}),
        "difsim": (lambda rho: difsim_final(rho, throw=False), {}),
        "+ static unpack": (
            lambda rho: difsim_final(rho, throw=False),
            dict(unpack=static_unpack),
        ),
        "+ static unpack + status table": (
            lambda rho: difsim_final(rho, throw=False),
            dict(unpack=static_unpack, status=table_status),
        ),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1_000, help="sweep size N")
    parser.add_argument("--repeats", type=int, default=41, help="interleaved timing repeats")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args(argv)
    rhos = jnp.linspace(0.0, RHO_MAX, args.size, dtype=jnp.float32)

    compiled, info = {}, {}
    for name, (fn, patches) in variants().items():
        jax.clear_caches()  # difsim's inner filter_jit would otherwise reuse an old trace
        with patched(**patches):
            wall, cpu, compiled[name] = aot_phases(jax.jit(jax.vmap(fn)), rhos)
        hlo = compiled[name].as_text()
        info[name] = dict(
            compile_cpu=sum(cpu.values()),
            instructions=sum(hlo_op_histogram(hlo).values()),
            loops=hlo_while_bodies(hlo),
            out=as_states(compiled[name](rhos)),
        )
    wall, cpu = interleaved(compiled, (rhos,), args.repeats)
    base_wall = statistics.median(wall["diffrax"])
    base_cpu = statistics.median(cpu["diffrax"])
    rows = []
    for name, v in info.items():
        med = statistics.median(wall[name])
        rows.append(
            [
                name,
                f"{med * 1e3:.3f} ms",
                f"{med / base_wall:.3f}",
                f"{statistics.median(cpu[name]) / base_cpu:.3f}",
                f"{v['compile_cpu']:.2f} s",
                v["instructions"],
                ", ".join(map(str, v["loops"])),
                f"{max_abs_diff(v['out'], info['diffrax']['out']):.1e}",
            ]
        )
    m = machine_info()
    print(f"N = {args.size:,}, {args.repeats} interleaved repeats; {m['cpu']}, {m['nproc']} cores,")
    print(f"load average {m['loadavg']}; " + ", ".join(f"{k} {x}" for k, x in versions().items()))
    print()
    head = ["variant", "wall median", "/ diffrax", "CPU / diffrax", "compile CPU",
            "HLO instructions", "while-loop bodies", "max abs diff"]  # fmt: skip
    print(format_table(head, rows, args.markdown))


if __name__ == "__main__":
    sys.exit(main())
