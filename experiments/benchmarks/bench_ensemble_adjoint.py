"""The ensemble engine's reverse modes on longer solves (issue 28.3): the discrete adjoint
against the checkpointed step loops and forward mode, with save times.

`bench_ensemble.py`'s gradient sections time short solves (Lorenz to t = 1 at 1e-6, ~20
steps), where a gradient's fixed costs weigh. Here: Lorenz sweeps over ρ in [20, 30], float64,
Tsit5 at `rtol = atol = 1e-8`, loss = sum of squares of every state at 21 save times,
gradient in (σ, β) and each lane's ρ (3 differentiated scalars: forward mode is cheap here,
and is the reference the reverse modes are checked against), for
two horizons (t = 1: ~130 steps; t = 6: ~470). Contenders are timed interleaved in one process
by process CPU time and wall time (medians of `--repeats` rounds); XLA's temporary memory of
each compiled gradient (`memory_analysis`) shows what the horizon does to it.

```
python experiments/benchmarks/bench_ensemble_adjoint.py                # ~2 minutes on 2 cores
python experiments/benchmarks/bench_ensemble_adjoint.py --markdown runs/bench_ensemble_adjoint.md
```
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _common import format_table, machine_info, versions  # noqa: E402

import difsim as ds  # noqa: E402

ADJOINTS = ("forward", "checkpoint", "discrete")
CASES = ((1024, 1.0), (256, 6.0))  # (lanes, horizon)


def problem(lanes: int, t1: float):
    """`(args, fns)`: the loss and each adjoint's gradient, compiled, for one case."""
    rhos = jnp.linspace(20.0, 30.0, lanes)
    ts = jnp.linspace(0.0, t1, 21)

    def loss(sb, rhos, adjoint):
        model = eqx.tree_at(lambda m: (m.sigma, m.beta), ds.models.Lorenz(), (sb[0], sb[1]))
        sol = ds.simulate_ensemble(model, {"rho": rhos}, t=ts, rtol=1e-8, atol=1e-8,
                                   adjoint=adjoint)  # fmt: skip
        return sum(jnp.sum(v**2) for v in sol.ys.values()), jnp.max(sol.num_steps)

    args = (jnp.array([10.0, 8.0 / 3.0]), rhos)
    fns = {"loss": jax.jit(lambda *a: loss(*a, "forward")[0]).lower(*args).compile()}
    for adjoint in ADJOINTS:
        grad = jax.grad(lambda *a, d=adjoint: loss(*a, d)[0], argnums=(0, 1))
        fns[adjoint] = jax.jit(grad).lower(*args).compile()
    steps = int(jax.jit(lambda *a: loss(*a, "forward")[1])(*args))
    return args, fns, steps


def run(repeats: int) -> list[list[str]]:
    rows = []
    for lanes, t1 in CASES:
        args, fns, steps = problem(lanes, t1)
        cpu = {k: [] for k in fns}
        wall = {k: [] for k in fns}
        load = os.getloadavg()
        for r in range(repeats):
            order = list(fns)[r % len(fns) :] + list(fns)[: r % len(fns)]
            for k in order:
                c, w = time.process_time(), time.perf_counter()
                jax.block_until_ready(fns[k](*args))
                cpu[k].append(time.process_time() - c)
                wall[k].append(time.perf_counter() - w)
        base = statistics.median(cpu["loss"])
        ref = fns["forward"](*args)
        for k in ADJOINTS:
            g = fns[k](*args)
            diff = max(float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
                       for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(ref)))  # fmt: skip
            mib = fns[k].memory_analysis().temp_size_in_bytes / 2**20
            c, w = statistics.median(cpu[k]), statistics.median(wall[k])
            rows.append([f"{lanes:,} lanes, t1 = {t1:g} ({steps} steps)", k,
                         f"{base * 1e3:.1f} ms", f"{c * 1e3:.1f} ms", f"{c / base:.2f}",
                         f"{w / statistics.median(wall['loss']):.2f}", f"{mib:.1f}",
                         f"{diff:.1e}", f"{load[0]:.1f}/{os.getloadavg()[0]:.1f}"])  # fmt: skip
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args()
    head = ["case", "adjoint", "loss CPU", "gradient CPU", "gradient / loss, CPU",
            "wall", "XLA temp MiB", "rel. diff vs forward mode", "load before/after"]  # fmt: skip
    rows = run(args.repeats)
    m, v = machine_info(), versions()
    header = (f"- machine: {m['cpu']}, {m['nproc']} cores; versions: "
              + ", ".join(f"{k} {x}" for k, x in v.items()))  # fmt: skip
    print(header + "\n\n" + format_table(head, rows, False))
    if args.markdown:
        args.markdown.write_text(header + "\n\n" + format_table(head, rows, True) + "\n")


if __name__ == "__main__":
    main()
