"""Work–precision of difsim's DAE solves against SUNDIALS IDA and scipy (issue 29, point 7).

Problems, index-1 DAEs of the IVP test set with published reference values
(data/stiff_test_set.toml): Robertson's kinetics (the zoo's `RobertsonDAE`: two rate
equations and mass conservation, `y3` algebraic) to t = 1e11, and the chemical Akzo Nobel
problem (`AkzoNobel`: five rate equations and a fast equilibrium, `y6` algebraic) to t =
180. For rtol = 1e-4 ... 1e-10 (atol the test set's fraction of rtol per problem), every
contender solves each problem; the error is the largest relative error over the components
at t1, the cost the median process CPU time (and wall time) of `--repeats` interleaved runs,
each contender compiled or warmed up beforehand (difsim's tolerances are traced arguments:
one compile per solver and problem).

Contenders:

- `difsim rodas5p`: `ds.simulate(model, ...)`, Rodas5P with the singular mass matrix,
  consistent initialisation included (one compiled call per solve);
- `difsim radau5`: the same with `solver="radau5"` (Radau IIA of order 5);
- `difsim bdf`: the same with `solver="bdf"` (variable-order BDF/NDF, orders 1-5);
- `IDA (scikit-sundae)`: SUNDIALS IDA, variable-order BDF for the residual form
  `F(t, y, y') = 0`, dense linear solver, finite-difference Jacobian, NumPy residual;
- `scipy Radau`, `scipy BDF` on the ODE forms (the same solutions: Robertson's third rate
  equation, Akzo Nobel's y6 eliminated through its equilibrium) with NumPy right-hand sides
  and Jacobians (Robertson's analytic, Akzo Nobel's by difference quotients).

Then an ensemble: `--lanes` members (k1 spread over ±20 %) solved to t = 40 by
`ds.simulate_ensemble` (the ensemble engine's Rodas5P with the mass matrix) against a loop
of IDA solves, at rtol = 1e-6, with the largest difference between the two.

```
python experiments/benchmarks/bench_dae.py --repeats 5
python experiments/benchmarks/bench_dae.py --problems akzo_nobel --rtols 1e-6 --repeats 1
```
"""

import argparse
import dataclasses
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    Stats,
    command_line,
    format_table,
    interleaved,
    load_average,
    machine_info,
    today,
    versions,
)
from scipy.integrate import solve_ivp  # noqa: E402

import difsim as ds  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEST_SET = tomllib.loads((ROOT / "data" / "stiff_test_set.toml").read_text())
K = (0.04, 3e7, 1e4)
AKZO = dict(k1=18.7, k2=0.58, k3=0.09, k4=0.42, K=34.4, klA=3.3, Ks=115.83, p=0.9, H=737.0)


@dataclasses.dataclass(frozen=True)
class Problem:
    """A DAE of the test set as each contender takes it: the zoo model (difsim), the
    residual form with consistent `y0`, `yp0` (IDA), and an ODE form in the differential
    variables (scipy), from which `complete` rebuilds the full state."""

    model: ds.Model
    names: tuple[str, ...]
    entry: str  # the section of data/stiff_test_set.toml
    residual: Callable
    y0: np.ndarray
    yp0: np.ndarray
    algebraic: list[int]
    ode: Callable
    x0: np.ndarray  # the ODE form's initial state
    complete: Callable
    jac: Callable | None = None  # the ODE form's Jacobian (else difference quotients)

    @property
    def t1(self) -> float:
        return TEST_SET[self.entry]["t1"]

    @property
    def ref(self) -> np.ndarray:
        return np.array(TEST_SET[self.entry]["y"])

    @property
    def atol_ratio(self) -> float:
        return TEST_SET[self.entry]["atol_ratio"]


def _rober_residual(k1):
    def res(t, y, yp, out):
        out[0] = yp[0] - (-k1 * y[0] + K[2] * y[1] * y[2])
        out[1] = yp[1] - (k1 * y[0] - K[2] * y[1] * y[2] - K[1] * y[1] ** 2)
        out[2] = y[0] + y[1] + y[2] - 1.0

    return res


def _rober(t, y):
    return [-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2]  # fmt: skip


def _rober_jac(t, y):
    return [[-0.04, 1e4 * y[2], 1e4 * y[1]],
            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
            [0.0, 6e7 * y[1], 0.0]]  # fmt: skip


def _akzo_rates(y, y6):
    c, root = AKZO, np.sqrt(y[1])
    r = (c["k1"] * y[0] ** 4 * root, c["k2"] * y[2] * y[3], c["k2"] / c["K"] * y[0] * y[4],
         c["k3"] * y[0] * y[3] ** 2, c["k4"] * y6**2 * root)  # fmt: skip
    inflow = c["klA"] * (c["p"] / c["H"] - y[1])
    return [-2 * r[0] + r[1] - r[2] - r[3], -r[0] / 2 - r[3] - r[4] / 2 + inflow,
            r[0] - r[1] + r[2], -r[1] + r[2] - 2 * r[3], r[1] - r[2] + r[4]]  # fmt: skip


def _akzo_residual(t, y, yp, out):
    f = _akzo_rates(y, y[5])
    for i in range(5):
        out[i] = yp[i] - f[i]
    out[5] = AKZO["Ks"] * y[0] * y[3] - y[5]


def _akzo_y0():
    y = np.array([0.444, 0.00123, 0.0, 0.007, 0.0, 0.0])
    y[5] = AKZO["Ks"] * y[0] * y[3]
    return y


PROBLEMS = {
    "robertson": Problem(
        model=ds.models.RobertsonDAE(),
        names=("y1", "y2", "y3"),
        entry="robertson",
        residual=_rober_residual(K[0]),
        y0=np.array([1.0, 0.0, 0.0]),
        yp0=np.array([-K[0], K[0], 0.0]),
        algebraic=[2],
        ode=_rober,
        x0=np.array([1.0, 0.0, 0.0]),  # the ODE form: y3 differential
        complete=lambda x: x,
        jac=_rober_jac,
    ),
    "akzo_nobel": Problem(
        model=ds.models.AkzoNobel(),
        names=tuple(f"y{i}" for i in range(1, 7)),
        entry="chemakzo",
        residual=_akzo_residual,
        y0=_akzo_y0(),
        yp0=np.array([*_akzo_rates(_akzo_y0(), _akzo_y0()[5]), 0.0]),
        algebraic=[5],
        # The ODE form: y6 eliminated through its equilibrium.
        ode=lambda t, x: _akzo_rates(x, AKZO["Ks"] * x[0] * x[3]),
        x0=_akzo_y0()[:5],
        complete=lambda x: np.append(x, AKZO["Ks"] * x[0] * x[3]),
    ),
}


def ida_final(problem: Problem):
    def run(rtol, atol, residual=problem.residual, t1=None, y0=problem.y0, yp0=problem.yp0):
        from sksundae.ida import IDA  # the bench extra: imported when IDA runs

        solver = IDA(residual, rtol=rtol, atol=atol, algebraic_idx=problem.algebraic,
                     max_num_steps=100000)  # fmt: skip
        sol = solver.solve(np.array([0.0, problem.t1 if t1 is None else t1]), y0, yp0)
        assert sol.success, sol.message
        return sol.y[-1]

    return run


def scipy_final(problem: Problem, method: str):
    def run(rtol, atol):
        sol = solve_ivp(problem.ode, (0.0, problem.t1), problem.x0, method=method, rtol=rtol,
                        atol=atol, jac=problem.jac)  # fmt: skip
        assert sol.success, sol.message
        return problem.complete(sol.y[:, -1])

    return run


def difsim_final(problem: Problem, solver: str):
    def run(rtol, atol):
        sol = ds.simulate(problem.model, t0=0.0, t1=problem.t1, save="final", rtol=rtol,
                          atol=atol, max_steps=100000, solver=solver)  # fmt: skip
        return np.array([float(sol.ys[k][-1]) for k in problem.names])

    return run


def contenders(problem: Problem) -> dict[str, Callable]:
    return {
        "difsim rodas5p": difsim_final(problem, "rodas5p"),
        "difsim radau5": difsim_final(problem, "radau5"),
        "difsim bdf": difsim_final(problem, "bdf"),
        "IDA (scikit-sundae)": ida_final(problem),
        "scipy Radau": scipy_final(problem, "Radau"),
        "scipy BDF": scipy_final(problem, "BDF"),
    }


def work_precision(problem: Problem, rtols, repeats: int) -> list[list]:
    rows, chosen = [], contenders(problem)
    for rtol in rtols:
        atol = problem.atol_ratio * rtol
        errors, failed = {}, {}
        for name, fn in chosen.items():  # warm-up (difsim: the one compile)
            try:
                y = fn(rtol, atol)
            except (AssertionError, RuntimeError) as error:  # a solver that gave up
                failed[name] = str(error).split(";")[0][:60]
                continue
            errors[name] = float(np.max(np.abs(y - problem.ref) / np.abs(problem.ref)))
        calls = {n: (lambda fn=fn: fn(rtol, atol)) for n, fn in chosen.items() if n in errors}
        wall, cpu = interleaved(calls, (), repeats)
        base = Stats(cpu["difsim rodas5p"]).median
        for name in chosen:
            if name in failed:
                rows.append([f"{rtol:.0e}", name, f"failed: {failed[name]}", "", "", ""])
                continue
            c, w = Stats(cpu[name]).median, Stats(wall[name]).median
            rows.append([f"{rtol:.0e}", name, f"{errors[name]:.1e}", f"{c * 1e3:.1f}",
                         f"{w * 1e3:.1f}", f"{c / base:.2f}"])  # fmt: skip
    return rows


def ensemble(lanes: int, repeats: int) -> list[list]:
    rtol, atol, t1 = 1e-6, 1e-14, 40.0
    k1 = np.linspace(0.8, 1.2, lanes) * K[0]

    def engine():
        sol = ds.simulate_ensemble(ds.models.RobertsonDAE(), {"k1": jnp.asarray(k1)}, t0=0.0,
                                   t1=t1, save="final", rtol=rtol, atol=atol)  # fmt: skip
        return np.stack([np.asarray(sol.ys[k][:, -1]) for k in ("y1", "y2", "y3")], -1)

    rober = PROBLEMS["robertson"]

    def loop():
        return np.stack([ida_final(rober)(rtol, atol, _rober_residual(k), t1, rober.y0,
                                          np.array([-k, k, 0.0])) for k in k1])  # fmt: skip

    a, b = engine(), loop()
    diff = float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-12)))
    wall, cpu = interleaved({"engine": engine, "loop": loop}, (), repeats)
    c_e, c_l = Stats(cpu["engine"]).median, Stats(cpu["loop"]).median
    w_e, w_l = Stats(wall["engine"]).median, Stats(wall["loop"]).median
    return [
        [f"difsim simulate_ensemble ({lanes} lanes)", f"{c_e:.3f}", f"{w_e:.3f}", "1.00"],
        [f"loop of IDA ({lanes} solves)", f"{c_l:.3f}", f"{w_l:.3f}", f"{c_l / c_e:.1f}"],
        [f"largest relative difference: {diff:.1e}", "", "", ""],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtols", default="1e-4,1e-6,1e-8,1e-10")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lanes", type=int, default=1000)
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    args = parser.parse_args()
    rtols = [float(r) for r in args.rtols.split(",")]
    start = time.time()
    print(f"# bench_dae.py, {today()}: {command_line()}")
    print(f"machine: {machine_info()}\nversions: {versions((*VERSIONS,))}")
    print(f"load average before: {load_average()}\n")
    headers = ["rtol", "contender", "max rel. error", "CPU ms", "wall ms", "CPU / rodas5p"]
    for name in args.problems.split(","):
        print(f"## {name}\n")
        rows = work_precision(PROBLEMS[name], rtols, args.repeats)
        print(format_table(headers, rows, markdown=True), "\n", flush=True)
    headers = ["ensemble at rtol 1e-6, t1 = 40", "CPU s", "wall s", "loop / engine (CPU)"]
    print(format_table(headers, ensemble(args.lanes, args.repeats), markdown=True))
    print(f"\nload average after: {load_average()}; {time.time() - start:.0f} s in all")


VERSIONS = ("jax", "jaxlib", "diffrax", "equinox", "numpy", "scipy", "scikit-sundae", "difsim")

if __name__ == "__main__":
    main()
