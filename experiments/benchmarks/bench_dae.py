"""Work–precision of difsim's DAE solve against SUNDIALS IDA and scipy (issue 29, point 7).

Problem: Robertson's kinetics as a DAE (the zoo's `RobertsonDAE`: two rate equations and
mass conservation, `y3` algebraic) to t = 1e11, measured against the IVP test set's
published reference values (data/stiff_test_set.toml). For rtol = 1e-4 ... 1e-10 (atol =
1e-8 rtol, the test set's scale of y2), every contender solves the problem; the error is
the largest relative error over the three components at t1, the cost the median process
CPU time (and wall time) of `--repeats` interleaved runs, each contender compiled or
warmed up beforehand (difsim's tolerances are traced arguments: one compile).

Contenders:

- `difsim rodas5p`: `ds.simulate(RobertsonDAE(), ...)`, Rodas5P with the singular mass
  matrix, consistent initialisation included (one compiled call per solve);
- `difsim radau5`: the same with `solver="radau5"` (Radau IIA of order 5);
- `IDA (scikit-sundae)`: SUNDIALS IDA, variable-order BDF for the residual form
  `F(t, y, y') = 0`, dense linear solver, finite-difference Jacobian, NumPy residual;
- `scipy Radau`, `scipy BDF` on Robertson's ODE form (the same solution) with a NumPy
  right-hand side and an analytic Jacobian.

Then an ensemble: `--lanes` members (k1 spread over ±20 %) solved to t = 40 by
`ds.simulate_ensemble` (the ensemble engine's Rodas5P with the mass matrix) against a loop
of IDA solves, at rtol = 1e-6, with the largest difference between the two.

```
python experiments/benchmarks/bench_dae.py --repeats 5
python experiments/benchmarks/bench_dae.py --rtols 1e-6 --repeats 1 --lanes 100
```
"""

import argparse
import time
import tomllib
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
ROBER = tomllib.loads((ROOT / "data" / "stiff_test_set.toml").read_text())["robertson"]
T1, REF, ATOL_RATIO = ROBER["t1"], np.array(ROBER["y"]), ROBER["atol_ratio"]
K = (0.04, 3e7, 1e4)


def _residual(k1):
    def res(t, y, yp, out):
        out[0] = yp[0] - (-k1 * y[0] + K[2] * y[1] * y[2])
        out[1] = yp[1] - (k1 * y[0] - K[2] * y[1] * y[2] - K[1] * y[1] ** 2)
        out[2] = y[0] + y[1] + y[2] - 1.0

    return res


def ida_final(rtol, atol, k1=K[0], t1=T1):
    from sksundae.ida import IDA  # the bench extra: imported when IDA runs

    solver = IDA(_residual(k1), rtol=rtol, atol=atol, algebraic_idx=[2], max_num_steps=100000)
    y0, yp0 = np.array([1.0, 0.0, 0.0]), np.array([-k1, k1, 0.0])
    sol = solver.solve(np.array([0.0, t1]), y0, yp0)
    assert sol.success, sol.message
    return sol.y[-1]


def _rober(t, y):
    return [-0.04 * y[0] + 1e4 * y[1] * y[2], 0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2]  # fmt: skip


def _rober_jac(t, y):
    return [[-0.04, 1e4 * y[2], 1e4 * y[1]],
            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
            [0.0, 6e7 * y[1], 0.0]]  # fmt: skip


def scipy_final(method):
    def run(rtol, atol):
        sol = solve_ivp(_rober, (0.0, T1), [1.0, 0.0, 0.0], method=method, rtol=rtol,
                        atol=atol, jac=_rober_jac)  # fmt: skip
        assert sol.success, sol.message
        return sol.y[:, -1]

    return run


def difsim_final(solver):
    def run(rtol, atol):
        sol = ds.simulate(ds.models.RobertsonDAE(), t0=0.0, t1=T1, save="final", rtol=rtol,
                          atol=atol, max_steps=100000, solver=solver)  # fmt: skip
        return np.array([float(sol.ys[k][-1]) for k in ("y1", "y2", "y3")])

    return run


CONTENDERS = {
    "difsim rodas5p": difsim_final("rodas5p"),
    "difsim radau5": difsim_final("radau5"),
    "IDA (scikit-sundae)": ida_final,
    "scipy Radau": scipy_final("Radau"),
    "scipy BDF": scipy_final("BDF"),
}


def work_precision(rtols, repeats: int) -> list[list]:
    rows = []
    for rtol in rtols:
        atol = ATOL_RATIO * rtol
        errors, failed = {}, {}
        for name, fn in CONTENDERS.items():  # warm-up (difsim: the one compile)
            try:
                y = fn(rtol, atol)
            except (AssertionError, RuntimeError) as error:  # a solver that gave up
                failed[name] = str(error).split(";")[0][:60]
                continue
            errors[name] = float(np.max(np.abs(y - REF) / np.abs(REF)))
        calls = {n: (lambda fn=fn: fn(rtol, atol)) for n, fn in CONTENDERS.items() if n in errors}
        wall, cpu = interleaved(calls, (), repeats)
        base = Stats(cpu["difsim rodas5p"]).median
        for name in CONTENDERS:
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

    def loop():
        return np.stack([ida_final(rtol, atol, k, t1) for k in k1])

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
    args = parser.parse_args()
    rtols = [float(r) for r in args.rtols.split(",")]
    start = time.time()
    print(f"# bench_dae.py, {today()}: {command_line()}")
    print(f"machine: {machine_info()}\nversions: {versions((*VERSIONS,))}")
    print(f"load average before: {load_average()}\n")
    headers = ["rtol", "contender", "max rel. error", "CPU ms", "wall ms", "CPU / difsim"]
    print(format_table(headers, work_precision(rtols, args.repeats), markdown=True), "\n")
    headers = ["ensemble at rtol 1e-6, t1 = 40", "CPU s", "wall s", "loop / engine (CPU)"]
    print(format_table(headers, ensemble(args.lanes, args.repeats), markdown=True))
    print(f"\nload average after: {load_average()}; {time.time() - start:.0f} s in all")


VERSIONS = ("jax", "jaxlib", "diffrax", "equinox", "numpy", "scipy", "scikit-sundae", "difsim")

if __name__ == "__main__":
    main()
