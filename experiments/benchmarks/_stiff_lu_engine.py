"""The `--lu-engine` part of `bench_stiff_ensemble.py`: the ensemble engine's Rodas5P with
its per-lane linear algebra unrolled (structure-of-arrays LU) against lanes-first batched
`jax.scipy.linalg.lu_factor`, inside whole ensemble solves: what sets
`difsim._ensemble._rosenbrock.UNROLLED_MAX`.

Problems (float64, rtol = atol = 1e-6, final state, 1,000 lanes by default):

- HIRES (`ds.models.Hires`, 8 species) to t = 321.8122 over `k10` in [200, 360];
- a stiff chain of `m` species, `dx_i/dt = -λ_i x_i + a λ_i x_{i-1} (1 + 0.1 x_i)` with
  `λ = logspace(0, 4, m)`, to t = 2 over `a` in [0.5, 1] (a dense `m × m` Jacobian for the
  engine, whatever its band).

Each problem is compiled twice, the threshold patched when each is traced (0: always
batched; 64: always unrolled), timed interleaved by CPU time; compile time is the wall
time of tracing and compiling each.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import Stats, format_table, interleaved, seconds

import difsim as ds
from difsim._ensemble import _rosenbrock as ens_rosenbrock, simulate_ensemble


def stiff_chain(m: int) -> ds.Model:
    """The stiff chain of `m` species (see the module docstring)."""

    class Chain(ds.Model):
        a: float = 1.0
        state = ds.State(x=ds.Var(np.r_[1.0, np.zeros(m - 1)]))

        def rhs(self, t, s):
            x, lam = s.x, jnp.logspace(0.0, 4.0, m)
            feed = jnp.concatenate([jnp.zeros(1, x.dtype), x[:-1]])
            return dict(x=-lam * x + self.a * lam * feed * (1 + 0.1 * x))

    Chain.__name__ = f"Chain{m}"
    return Chain()


def _problems(sizes: list[int], lanes: int) -> list[tuple]:
    out = [("HIRES", 8, ds.models.Hires(), "k10", np.linspace(200.0, 360.0, lanes), 321.8122)]
    for m in sizes:
        out.append((f"chain of {m}", m, stiff_chain(m), "a", np.linspace(0.5, 1.0, lanes), 2.0))
    return out


def _compiled(model, key, t1, values, unrolled_max: int):
    """`(executable, seconds to trace and compile it)` of the ensemble solve, traced with
    the threshold at `unrolled_max`. Compiled ahead of time, after clearing JAX's caches:
    the engine's inner `jit` would otherwise hand the second variant the first one's trace.
    """
    fn = jax.jit(lambda v: simulate_ensemble(
        model, {key: v}, t0=0.0, t1=t1, save="final", solver="rodas5p", rtol=1e-6, atol=1e-6,
    ).ys)  # fmt: skip
    saved = ens_rosenbrock.UNROLLED_MAX
    ens_rosenbrock.UNROLLED_MAX = unrolled_max
    jax.clear_caches()
    try:
        start = time.perf_counter()
        compiled = fn.lower(values).compile()
        return compiled, time.perf_counter() - start
    finally:
        ens_rosenbrock.UNROLLED_MAX = saved


def lu_in_engine(sizes: list[int], lanes: int, repeats: int) -> list[dict]:
    rows = []
    for name, n, model, key, values, t1 in _problems(sizes, lanes):
        print(f"  {name} ...", flush=True)
        v = jnp.asarray(values)
        fns, build = {}, {}
        for label, cap in (("batched", 0), ("unrolled", 64)):
            fns[label], build[label] = _compiled(model, key, t1, v, cap)
        outs = {label: jax.block_until_ready(fn(v)) for label, fn in fns.items()}
        b, u = outs["batched"], outs["unrolled"]
        gap = max(float(np.max(np.abs(u[k] - b[k]) / (np.abs(b[k]) + 1e-12))) for k in b)
        _, cpu = interleaved(fns, (v,), repeats)
        stats = {k: Stats(c) for k, c in cpu.items()}
        rows.append(dict(
            problem=name, n=n, lanes=lanes, agree=gap,
            cpu={k: s.as_dict() for k, s in stats.items()},
            compile=build,
        ))  # fmt: skip
    return rows


def render_lu_engine(rows: list[dict]) -> str:
    head = ["problem", "n", "lanes", "batched LU", "unrolled LU", "unrolled / batched",
            "compile batched", "compile unrolled", "max rel. difference"]  # fmt: skip
    cells = []
    for r in rows:
        b, u = r["cpu"]["batched"]["median"], r["cpu"]["unrolled"]["median"]
        cells.append([r["problem"], str(r["n"]), f"{r['lanes']:,}", seconds(b), seconds(u),
                      f"{u / b:.2f}", f"{r['compile']['batched']:.1f} s",
                      f"{r['compile']['unrolled']:.1f} s", f"{r['agree']:.1e}"])  # fmt: skip
    return (
        "Rodas5P ensembles, LU unrolled against batched inside the engine, CPU-time medians\n"
        + format_table(head, cells, False)
    )
