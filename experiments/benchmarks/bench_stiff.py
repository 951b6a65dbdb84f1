"""Work–precision of difsim's stiff solvers against scipy (issue 14, point 8).

Four problems of Hairer & Wanner's stiff test set, each measured against its published
reference solution at the end time (Mazzia & Iavernaro, *Test Set for IVP Solvers*): the
zoo's `Robertson` to t = 1e11, `Hires` to 321.8122, `Oregonator` to 360 and `VanDerPol(mu=1e3)`
to 2000 (the test set's VDPOL, eps = 1e-6, unscaled). For rtol = 1e-3 ... 1e-10 (atol a fixed
fraction of rtol per problem, as in `tests/test_stiff_work_precision.py`), every contender
solves each problem; the error is the largest relative error over the components, the cost
the median CPU time of `--repeats` interleaved runs (compiled once per problem and
contender beforehand: tolerances are traced arguments).

Contenders:

- `kvaerno5`: difsim's default stiff solver (`StageNewton` stage solves with
  root_tol = 0.01, PI step control); `kvaerno5 rt=0.1`, `kvaerno5 rt=0.001`: other root_tol;
- `kvaerno5 before`: the same method as difsim ran it before issue 14's point 8: optimistix
  `Chord` with Cauchy termination at the step's tolerances, integral step control;
- `kvaerno3`, `rodas5p` (difsim's Rosenbrock method), `radau5` (difsim's Radau IIA), `bdf`
  (difsim's variable-order BDF);
- scipy `Radau`, `BDF`, `LSODA` with NumPy right-hand sides and a compiled JAX Jacobian.

```
python experiments/benchmarks/bench_stiff.py --repeats 3 --figure docs/img/bench_stiff.png
python experiments/benchmarks/bench_stiff.py --problems hires --rtols 1e-4,1e-5 --repeats 1
```
"""

import argparse
import dataclasses
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optimistix as optx  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    format_table,
    interleaved,
    machine_info,
    today,
    versions,
)
from scipy.integrate import solve_ivp  # noqa: E402

import difsim as ds  # noqa: E402
from difsim.models import Hires, Oregonator, Robertson, VanDerPol  # noqa: E402

# A controller instance with traced tolerances sits in SolverSettings' static description.
warnings.filterwarnings("ignore", message="A JAX array is being set as static")


@dataclasses.dataclass(frozen=True)
class Problem:
    model: ds.Model
    t1: float
    atol_ratio: float  # atol = atol_ratio * rtol
    published: tuple[float, ...]
    rhs: Callable  # NumPy right-hand side for scipy, written out independently


def _rober(t, y):
    return [-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2]  # fmt: skip


def _hires(t, y):
    b = 280.0 * y[5] * y[7]
    return [-1.71 * y[0] + 0.43 * y[1] + 8.32 * y[2] + 7e-4, 1.71 * y[0] - 8.75 * y[1],
            -10.03 * y[2] + 0.43 * y[3] + 0.035 * y[4], 8.32 * y[1] + 1.71 * y[2] - 1.12 * y[3],
            -1.745 * y[4] + 0.43 * (y[5] + y[6]),
            -b + 0.69 * y[3] + 1.71 * y[4] - 0.43 * y[5] + 0.69 * y[6], b - 1.81 * y[6],
            -b + 1.81 * y[6]]  # fmt: skip


def _orego(t, y):
    return [77.27 * (y[1] + y[0] * (1 - 8.375e-6 * y[0] - y[1])),
            (y[2] - (1 + y[0]) * y[1]) / 77.27, 0.161 * (y[0] - y[2])]  # fmt: skip


def _vdp(t, y):
    return [y[1], 1e3 * (1 - y[0] ** 2) * y[1] - y[0]]


# The published references (data/stiff_test_set.toml) with each problem's model and rhs.
_SET = tomllib.loads((Path(__file__).parents[2] / "data" / "stiff_test_set.toml").read_text())
PROBLEMS = {
    name: Problem(model, _SET[name]["t1"], _SET[name]["atol_ratio"], tuple(_SET[name]["y"]), rhs)
    for name, model, rhs in [
        ("robertson", Robertson(), _rober),
        ("hires", Hires(), _hires),
        ("oregonator", Oregonator(), _orego),
        ("van_der_pol", VanDerPol(mu=1e3), _vdp),
    ]
}
DIFSIM = {  # label: (solver, root_tol or None, how it was run before point 8)
    "kvaerno5": ("kvaerno5", 1e-2, False),
    "kvaerno5 rt=0.1": ("kvaerno5", 0.1, False),
    "kvaerno5 rt=0.001": ("kvaerno5", 1e-3, False),
    "kvaerno5 before": ("kvaerno5", None, True),
    "kvaerno3": ("kvaerno3", 1e-2, False),
    "rodas5p": ("rodas5p", None, False),
    "radau5": ("radau5", 1e-2, False),
    "bdf": ("bdf", 1e-2, False),
}
SCIPY = ("Radau", "BDF", "LSODA")
MAX_STEPS = 100_000


def difsim_solve(problem: Problem, solver: str, root_tol, before: bool):
    """`(rtol, atol) -> (y(t1), status, accepted, rejected)`, compiled once."""
    names = problem.model.initial_state().names

    @jax.jit
    def run(rtol, atol):
        if before:
            kw = dict(
                solver=dfx.Kvaerno5(root_finder=dfx.with_stepsize_controller_tols(optx.Chord)()),
                controller=dfx.PIDController(rtol=rtol, atol=atol),
            )
        else:
            kw = dict(solver=solver, rtol=rtol, atol=atol, root_tol=root_tol)
        sol = ds.simulate(problem.model, t0=0.0, t1=problem.t1, save="final",
                          max_steps=MAX_STEPS, throw=False, **kw)  # fmt: skip
        y = jnp.stack([sol.final[k] for k in names])
        return y, sol.status, sol.num_accepted_steps, sol.num_rejected_steps

    return run


def scipy_solve(problem: Problem, method: str):
    names = problem.model.initial_state().names
    y0 = np.array([float(v) for _, v in problem.model.initial_state().items()])

    def field(y):
        state = problem.model.initial_state().replace(**dict(zip(names, y)))
        out = problem.model.rhs(0.0, state)
        return jnp.stack([out[k] for k in names])

    jac_jax = jax.jit(jax.jacfwd(field))
    jac = lambda t, y: np.asarray(jac_jax(y))  # noqa: E731

    def run(rtol, atol):
        sol = solve_ivp(problem.rhs, (0.0, problem.t1), y0, method=method, rtol=rtol,
                        atol=atol, jac=jac)  # fmt: skip
        ok = sol.status == 0
        return sol.y[:, -1], 0 if ok else 2, sol.nfev, sol.njev

    return run


def error_of(problem: Problem, y) -> float:
    ref = np.asarray(problem.published)
    return float(np.max(np.abs(np.asarray(y) - ref) / np.abs(ref)))


def measure(problem: Problem, contenders: dict, rtols, repeats: int) -> dict:
    """`{label: [{rtol, error, status, cpu, wall, counts}]}` with interleaved timing."""
    out: dict[str, list] = {label: [] for label in contenders}
    for fn in contenders.values():  # compile every difsim contender before any timing
        jax.block_until_ready(fn(1e-3, problem.atol_ratio * 1e-3))
    for rtol in rtols:
        atol = problem.atol_ratio * rtol
        calls = {label: (lambda f=fn: f(rtol, atol)) for label, fn in contenders.items()}
        wall, cpu = interleaved(calls, (), repeats)
        for label, fn in contenders.items():
            y, status, a, b = jax.block_until_ready(fn(rtol, atol))
            out[label].append(dict(
                rtol=rtol, error=error_of(problem, y), status=int(status),
                cpu=Stats(cpu[label]).median, wall=Stats(wall[label]).median,
                counts=(int(a), int(b)),
            ))  # fmt: skip
            row = out[label][-1]
            print(f"  {label:18s} rtol={rtol:.0e} status={row['status']} "
                  f"err={row['error']:.2e} cpu={row['cpu'] * 1e3:8.1f} ms "
                  f"counts={row['counts']}", flush=True)  # fmt: skip
    return out


def table(results: dict, rtols) -> str:
    labels = list(results)
    rows = []
    for i, rtol in enumerate(rtols):
        cells = [f"{rtol:.0e}"]
        for label in labels:
            r = results[label][i]
            cells.append("fail" if r["status"] else f"{r['error']:.1e} / {r['cpu'] * 1e3:.0f}")
        rows.append(cells)
    return format_table(["rtol", *labels], rows, markdown=True)


def figure(all_results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 8.5))
    for ax, (name, results) in zip(axes.flat, all_results.items()):
        for label, rows in results.items():
            ok = [r for r in rows if r["status"] == 0]
            style = "--" if label in SCIPY else "-"
            ax.loglog([r["cpu"] for r in ok], [r["error"] for r in ok], style, marker="o",
                      ms=3, label=label)  # fmt: skip
        ax.set(title=name, xlabel="CPU time per solve [s]", ylabel="max relative error")
        ax.grid(True, which="major", alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--rtols", default=",".join(f"1e-{k}" for k in range(3, 11)))
    parser.add_argument("--contenders", default=",".join([*DIFSIM, *SCIPY]))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--figure", type=Path, default=None)
    args = parser.parse_args()
    rtols = [float(r) for r in args.rtols.split(",")]
    chosen = args.contenders.split(",")
    print(f"# bench_stiff {today()}\n`{command_line()}`\n")
    print(f"machine: {machine_info()}\nversions: {versions()}\n")
    all_results = {}
    for name in args.problems.split(","):
        problem = PROBLEMS[name]
        contenders = {label: difsim_solve(problem, *DIFSIM[label]) for label in chosen
                      if label in DIFSIM}  # fmt: skip
        contenders |= {m: scipy_solve(problem, m) for m in chosen if m in SCIPY}
        print(f"## {name}", flush=True)
        all_results[name] = measure(problem, contenders, rtols, args.repeats)
        print("\nerror / CPU ms per solve\n\n" + table(all_results[name], rtols) + "\n")
    print(f"load average at the end: {machine_info()['loadavg']}")
    if args.figure is not None:
        figure(all_results, args.figure)


if __name__ == "__main__":
    main()
