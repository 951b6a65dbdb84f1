"""Benchmark the ensemble engine's stiff method (Rodas5P) on a Robertson ensemble.

The problem (issue 11): Robertson's reactions (`ds.models.Robertson`, `k2 = 3e7`,
`k3 = 1e4`) with `k1 = linspace(0.02, 0.06, N)`, `t` in `[0, 1e4]`, final state only,
float64, PID control at `rtol = 1e-6`, `atol = 1e-10` (y2 stays below 4e-5). Contenders,
timed interleaved in one process (CPU-time medians; the machine is shared):

- `ensemble rodas5p`: `difsim._ensemble.simulate_ensemble(model, {"k1": ...},
  solver="rodas5p")` — the ensemble engine (structure-of-arrays lanes, unrolled LU);
- `vmap kvaerno5`: `jax.jit(jax.vmap(ds.simulate(..., solver="kvaerno5")))` — diffrax's
  ESDIRK 5(4) (difsim's default stiff solver), one trajectory per lane;
- `vmap rodas5p`: the same diffrax vmap with difsim's diffrax Rodas5P (the method alone,
  without the engine).

Each one's error: the largest over lanes and variables of `|y - ref| / (|ref| + 1e-10)` (so
relative on y1, y3 and on y2's ~1e-7 level) against scipy `solve_ivp(method="Radau",
rtol=1e-12, atol=1e-14)` on an evenly spaced subset of lanes. A second Rodas5P tolerance
(`--match-rtol`) lets the speed be read at matched error when the two methods' errors at
the same tolerance differ.

Part three (`--lu-engine`, `_stiff_lu_engine.py`) times whole ensembles (HIRES and a stiff
chain of n species) with each of the two, which is what sets the threshold between them.

Part two times the per-lane linear solves alone (`--lu`): factorising `(n, n, lanes)`
matrices `I - γ h J` once and solving 8 right-hand sides, (a) lanes moved first and
`jax.scipy.linalg.lu_factor`/`lu_solve` (LAPACK-style, batched) against (b) the unrolled
structure-of-arrays LU with partial pivoting of `difsim._ensemble._rosenbrock`.

```
python experiments/benchmarks/bench_stiff_ensemble.py                # a few minutes on 2 cores
python experiments/benchmarks/bench_stiff_ensemble.py --sizes 1000 --repeats 3 --lu
python experiments/benchmarks/bench_stiff_ensemble.py --skip-robertson --lu-engine --repeats 3
```
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _common import (
    Stats,
    command_line,
    format_table,
    interleaved,
    load_average,
    machine_info,
    seconds,
    today,
    versions,
)
from _stiff_lu_engine import lu_in_engine, render_lu_engine
from scipy.integrate import solve_ivp

import difsim as ds
from difsim._ensemble import _rosenbrock as ens_rosenbrock, simulate_ensemble

T1 = 1e4
RTOL, ATOL = 1e-6, 1e-10
K1_RANGE = (0.02, 0.06)
FLOOR = 1e-10  # added to |ref| in the relative error: y2 is ~1e-7 at t = 1e4
VARS = ("y1", "y2", "y3")
# A lane that fails stops at this many steps (it keeps its vmap batch busy until then).
MAX_STEPS = 16_384


def k1_values(n: int) -> np.ndarray:
    return np.linspace(*K1_RANGE, n)


# ------------------------------------------------------------------ contenders
def ensemble_fn(rtol: float):
    model = ds.models.Robertson()

    @jax.jit
    def run(k1):
        sol = simulate_ensemble(
            model, {"k1": k1}, t0=0.0, t1=T1, save="final", solver="rodas5p",
            rtol=rtol, atol=ATOL, max_steps=MAX_STEPS,
        )  # fmt: skip
        return jnp.stack([sol.ys[v][:, -1] for v in VARS], axis=1), sol.num_steps, sol.status

    return run


def vmap_fn(solver: str, rtol: float, chunk: int | None = None):
    """`jit(vmap(simulate))`; with `chunk`, `lax.map` over chunks of that many lanes (N
    must be a multiple): raw vmap Kvaerno5 slows down far more than linearly in N (at
    N = 1e4 one call ran > 4 min where N = 1e3 takes 0.23 s)."""

    def one(k1):
        sol = ds.simulate(
            ds.models.Robertson(k1=k1), t0=0.0, t1=T1, save="final", solver=solver,
            rtol=rtol, atol=ATOL, max_steps=MAX_STEPS, throw=False,
        )  # fmt: skip
        return jnp.stack([sol.final[v] for v in VARS]), sol.num_steps, sol.status

    if chunk is None:
        return jax.jit(jax.vmap(one))

    def chunked(k1):
        y, steps, status = jax.lax.map(jax.vmap(one), k1.reshape(-1, chunk))
        return y.reshape(-1, len(VARS)), steps.reshape(-1), status.reshape(-1)

    return jax.jit(chunked)


def scipy_reference(k1: np.ndarray) -> np.ndarray:
    """`(len(k1), 3)` finals from scipy Radau at rtol 1e-12, atol 1e-14."""
    out = []
    r = ds.models.Robertson()
    k2, k3 = float(r.k2), float(r.k3)  # Python floats: scipy calls f many times
    for k in k1:
        k = float(k)

        def f(t, y, k=k):
            a, b, c = k * y[0], k3 * y[1] * y[2], k2 * y[1] ** 2
            return [-a + b, a - b - c, c]

        def jac(t, y, k=k):
            return [[-k, k3 * y[2], k3 * y[1]],
                    [k, -k3 * y[2] - 2 * k2 * y[1], -k3 * y[1]],
                    [0.0, 2 * k2 * y[1], 0.0]]  # fmt: skip

        sol = solve_ivp(f, (0.0, T1), [1.0, 0.0, 0.0], "Radau", rtol=1e-12, atol=1e-14, jac=jac)
        out.append(sol.y[:, -1])
    return np.array(out)


def max_error(y: np.ndarray, ref: np.ndarray) -> float:
    """Over the lanes that finished (failed lanes are counted apart)."""
    return float(np.nanmax(np.abs(y - ref) / (np.abs(ref) + FLOOR)))


# ------------------------------------------------------------------ the Robertson ensemble
def robertson(n: int, repeats: int, match_rtol: float | None, ref_lanes: int) -> dict:
    k1 = jnp.asarray(k1_values(n))
    chunk = None if n <= 1000 else 1000
    fns = {
        "ensemble rodas5p": ensemble_fn(RTOL),
        "vmap kvaerno5": vmap_fn("kvaerno5", RTOL, chunk),
        "vmap rodas5p": vmap_fn("rodas5p", RTOL, chunk),
    }
    if match_rtol is not None:
        fns[f"ensemble rodas5p rtol {match_rtol:g}"] = ensemble_fn(match_rtol)
    idx = np.linspace(0, n - 1, min(ref_lanes, n)).astype(int)
    ref = scipy_reference(np.asarray(k1)[idx])
    rows = {}
    for name, fn in fns.items():
        start = time.perf_counter()
        y, steps, status = jax.block_until_ready(fn(k1))
        failed = np.flatnonzero(np.asarray(status) != 0)
        rows[name] = dict(
            compile_s=time.perf_counter() - start,
            failed=len(failed),
            failed_k1=[float(k1[i]) for i in failed[:5]],
            error=max_error(np.asarray(y)[idx], ref),
            mean_steps=float(np.mean(steps)),
            max_steps=int(np.max(steps)),
            useful=useful_share(np.asarray(steps), 256 if "ensemble" in name else chunk or n),
        )
        print(f"  N={n} {name}: first call {rows[name]['compile_s']:.1f} s", flush=True)
    _, cpu = interleaved({k: (lambda f=f: f(k1)) for k, f in fns.items()}, (), repeats)
    for name in fns:
        rows[name]["cpu"] = Stats(cpu[name]).as_dict()
    return dict(n=n, rows=rows, loadavg=load_average())


def useful_share(steps: np.ndarray, block: int) -> float:
    """Steps the lanes needed over the steps their blocks ran (a block of lanes, or a vmap
    batch, runs until its slowest lane is done)."""
    block = min(block, len(steps))
    per = np.r_[steps, np.repeat(steps[-1:], -len(steps) % block)].reshape(-1, block)
    return float(steps.sum() / (per.max(axis=1).sum() * block))


def render_robertson(r: dict) -> str:
    base = r["rows"]["vmap kvaerno5"]["cpu"]["median"]
    head = ["contender", "CPU median", "min", "CPU per lane", "x kvaerno5", "max error",
            "steps (mean/max)", "useful lane-steps", "failed lanes"]  # fmt: skip
    rows = [
        [name, seconds(v["cpu"]["median"]), seconds(v["cpu"]["min"]),
         seconds(v["cpu"]["median"] / r["n"]), f"{base / v['cpu']['median']:.1f}",
         f"{v['error']:.1e}", f"{v['mean_steps']:.0f} / {v['max_steps']}",
         f"{100 * v['useful']:.0f} %", f"{v['failed']} {v['failed_k1'] or ''}"]
        for name, v in r["rows"].items()
    ]  # fmt: skip
    vmap = "vmap" if r["n"] <= 1000 else "vmap in lax.map chunks of 1000"
    return f"N = {r['n']:,}, {vmap} (load average {r['loadavg']})\n" + format_table(
        head, rows, False
    )


# ------------------------------------------------------------------ the linear solves
def lu_fns(n: int):
    """`(unrolled, batched)`: factorise `(n, n, lanes)` once, solve 8 right-hand sides."""

    def run(factor, solve):
        def go(a, b):
            f = factor(a)
            x = b
            for _ in range(8):  # as the 8 stages: each solve depends on the one before
                x = solve(f, b + 0.1 * x)
            return x

        return jax.jit(go)

    return (
        run(ens_rosenbrock.lu_unrolled, ens_rosenbrock.solve_unrolled),
        run(ens_rosenbrock.lu_batched, ens_rosenbrock.solve_batched),
    )


def linear_solves(sizes: list[int], lanes: int, repeats: int) -> list[dict]:
    out = []
    key = jax.random.key(0)
    for n in sizes:
        ka, kb = jax.random.split(jax.random.fold_in(key, n))
        a = jnp.eye(n)[..., None] + 0.3 * jax.random.normal(ka, (n, n, lanes))
        b = jax.random.normal(kb, (n, lanes))
        unrolled, batched = lu_fns(n)
        x = batched(a, b)
        gap = float(jnp.max(jnp.abs(unrolled(a, b) - x) / (jnp.abs(x) + 1)))
        _, cpu = interleaved({"unrolled": unrolled, "batched": batched}, (a, b), repeats)
        out.append(
            dict(n=n, lanes=lanes, agree=gap, **{k: Stats(v).as_dict() for k, v in cpu.items()})
        )
    return out


def render_lu(rows: list[dict]) -> str:
    head = [
        "n",
        "lanes",
        "unrolled SoA",
        "lanes-first lu_factor",
        "batched/unrolled",
        "max rel diff",
    ]
    cells = [
        [r["n"], r["lanes"], seconds(r["unrolled"]["median"]), seconds(r["batched"]["median"]),
         f"{r['batched']['median'] / r['unrolled']['median']:.1f}", f"{r['agree']:.0e}"]
        for r in rows
    ]  # fmt: skip
    return "Factorise once + 8 solves, CPU-time medians\n" + format_table(head, cells, False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--match-rtol", type=float, default=None)
    parser.add_argument("--ref-lanes", type=int, default=25)
    parser.add_argument("--lu", action="store_true", help="also time the linear solves alone")
    parser.add_argument("--lu-sizes", type=int, nargs="+", default=[2, 3, 5, 8, 10, 16])
    parser.add_argument(
        "--lu-engine",
        action="store_true",
        help="also time whole ensembles with the LU unrolled and batched",
    )
    parser.add_argument("--lu-engine-sizes", type=int, nargs="+", default=[4, 6, 8, 10, 12])
    parser.add_argument("--lu-engine-lanes", type=int, default=1000)
    parser.add_argument("--skip-robertson", action="store_true")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    m = machine_info()
    print(f"{today()}  {m['cpu']}, {m['nproc']} cores, load {m['loadavg']}")
    print("versions:", versions())
    print("command:", command_line())
    if args.lu:
        print(render_lu(linear_solves(args.lu_sizes, 1024, args.repeats)))
    if args.lu_engine:
        rows = lu_in_engine(args.lu_engine_sizes, args.lu_engine_lanes, args.repeats)
        print(render_lu_engine(rows))
    if not args.skip_robertson:
        for n in args.sizes:
            print(render_robertson(robertson(n, args.repeats, args.match_rtol, args.ref_lanes)))


if __name__ == "__main__":
    main()
