"""Robustness of `ds.fit`: how often each optimizer reaches the global optimum from random
starts, and at what cost; difsim's optimizers against scipy's MINPACK LM and TRF (issue 14,
point 9).

Problems (each solved at rtol = atol = 1e-10):

- `lv-positive`, `lv-identity`, `lv-bounded`: Lotka–Volterra on the lynx–hare pelts
  (`data/lynx_hare.nc`, lognormal noise), the four rates and both initial populations free
  (6 parameters), with `Positive`, `Identity` and `Bounded(opt / 30, 30 opt)` transforms;
- `lorenz`: Lorenz (sigma, rho, beta free, `Positive`) on x, y, z at 21 times in [0, 1]
  from the default solution with Gaussian noise 0.1 (seed 0);
- `sir`: SIR on the 1978 boarding-school influenza (`data/influenza.nc`), beta and gamma;
- `fhn`: FitzHugh–Nagumo's neuron (Ramsay et al. 2007: a = b = 0.2, c = 3, V0 = -1,
  R0 = 1), V and R at 41 times in [0, 20], Gaussian noise 0.05 (seed 0), a, b, c free.

Starts: each free value `opt * exp(U(-log F, log F))` (seeded), `opt` the optimum's
neighbourhood (the published fits for real data, the truth for synthetic data), F = 3 (LV,
FHN), 2.5 (Lorenz), 10 (SIR). Every contender sees the same unconstrained problem (the
transforms included): difsim's through `ds.fit`, scipy's `least_squares` through the same
compiled residuals and forward-mode Jacobian (`difsim._fit.prepare_fit`), at the same
tolerances (1e-8). A start succeeds when its final loss is within 1e-6 (relative) of the
best loss any contender found on that problem. Costs: residual and Jacobian evaluations,
and median CPU time per start after compilation.

Contenders (`--contenders`, default the first six): difsim's `trust_region` (the default),
`minpack`, `levenberg_marquardt` (optimistix), `dogleg` (optimistix); scipy's `lm`
(MINPACK) and `trf`; and on request `difsim indirect lm` (optimistix's
`IndirectLevenbergMarquardt`), `difsim trf scaled` (`trust_region` with MINPACK's
Jacobian scaling) and `scipy lm x_scale=jac`.

```
python experiments/benchmarks/bench_fit_robustness.py --starts 30
python experiments/benchmarks/bench_fit_robustness.py --problems sir --starts 5
```
"""

import argparse
import statistics
import time
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optimistix as optx  # noqa: E402
import xarray as xr  # noqa: E402
from _common import command_line, format_table, machine_info, today, versions  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

import difsim as ds  # noqa: E402
from difsim._fit._drivers import forward_jacobian  # noqa: E402
from difsim._fit._fit import prepare_fit  # noqa: E402
from difsim._fit._lm import TrustRegionLM  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-8
SUCCESS = 1e-6  # relative excess loss over the best found


class FitzHughNagumoNeuron(ds.Model):
    r"""FitzHugh–Nagumo neuron: $\dot V = c(V - V^3/3 + R)$, $\dot R = -(V - a + bR)/c$."""

    a: float = ds.param(0.2)
    b: float = ds.param(0.2)
    c: float = ds.param(3.0)
    state = ds.State(V=-1.0, R=1.0)

    def rhs(self, t, s):
        return dict(V=self.c * (s.V - s.V**3 / 3 + s.R), R=-(s.V - self.a + self.b * s.R) / self.c)


def _synthetic(model, names, t, noise, seed=0) -> xr.Dataset:
    """Data from scipy's DOP853 solution of `model` at `t` with Gaussian noise (seeded)."""
    state = model.initial_state()

    def rhs(_, y):
        out = model.rhs(0.0, state.replace(**dict(zip(state.names, y))))
        return [float(out[k]) for k in state.names]

    y0 = [float(v) for _, v in state.items()]
    sol = solve_ivp(rhs, (0.0, t[-1]), y0, t_eval=t, method="DOP853", rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(seed)
    cols = {k: sol.y[i] + noise * rng.standard_normal(t.size) for i, k in enumerate(state.names)}
    return xr.Dataset({k: ("time", cols[k]) for k in names}, coords={"time": t})


def problems() -> dict:
    """`{name: (model, data, {free: transform}, fit keywords, centre of starts, F)}`."""
    lv_opt = dict(alpha=0.54, beta=0.0272, gamma=0.796, delta=0.0237,
                  **{"state.prey": 34.6, "state.predator": 5.84})  # fmt: skip
    lynx = xr.open_dataset(ROOT / "data" / "lynx_hare.nc")
    lv_kw = dict(observe={"hare": "prey", "lynx": "predator"}, noise="lognormal")
    lv = ds.models.LotkaVolterra()
    out = {}
    for kind, make in (("positive", lambda v: ds.Positive()), ("identity", lambda v: ds.Identity()),
                       ("bounded", lambda v: ds.Bounded(v / 30, 30 * v))):  # fmt: skip
        out[f"lv-{kind}"] = (lv, lynx, {k: make(v) for k, v in lv_opt.items()}, lv_kw, lv_opt, 3.0)
    lorenz = ds.models.Lorenz()
    t = np.linspace(0.0, 1.0, 21)
    lorenz_opt = dict(sigma=10.0, rho=28.0, beta=8.0 / 3.0)
    out["lorenz"] = (lorenz, _synthetic(lorenz, ("x", "y", "z"), t, 0.1),
                     {k: ds.Positive() for k in lorenz_opt}, {}, lorenz_opt, 2.5)  # fmt: skip
    sir_opt = dict(beta=1.669, gamma=0.4435)
    flu = xr.open_dataset(ROOT / "data" / "influenza.nc")
    out["sir"] = (ds.models.SIR(), flu, {k: ds.Positive() for k in sir_opt},
                  dict(observe={"confined_to_bed": "I"}, t0=0.0), sir_opt, 10.0)  # fmt: skip
    fhn = FitzHughNagumoNeuron()
    fhn_opt = dict(a=0.2, b=0.2, c=3.0)
    out["fhn"] = (fhn, _synthetic(fhn, ("V", "R"), np.linspace(0.0, 20.0, 41), 0.05),
                  {k: ds.Positive() for k in fhn_opt}, {}, fhn_opt, 3.0)  # fmt: skip
    return out


def starts(centre: dict, factor: float, n: int, seed: int = 1) -> list[dict]:
    rng = np.random.default_rng(seed)
    log_f = np.log(factor)
    return [{k: v * float(np.exp(rng.uniform(-log_f, log_f))) for k, v in centre.items()}
            for _ in range(n)]  # fmt: skip


DIFSIM = {  # label: optimizer given to ds.fit
    "difsim trust_region": "trust_region",
    "difsim minpack": "minpack",
    "difsim levenberg_marquardt": "levenberg_marquardt",
    "difsim dogleg": "dogleg",
    "difsim indirect lm": optx.IndirectLevenbergMarquardt(rtol=TOL, atol=TOL),
    "difsim trf scaled": TrustRegionLM(rtol=TOL, atol=TOL, factor=1.0, policy="trf"),
}
SCIPY = {"scipy lm": dict(method="lm"), "scipy trf": dict(method="trf"),
         "scipy lm x_scale=jac": dict(method="lm", x_scale="jac")}  # fmt: skip
DEFAULT = ("difsim trust_region", "difsim minpack", "difsim levenberg_marquardt", "difsim dogleg",
           "scipy lm", "scipy trf")  # fmt: skip


def run_difsim(model, data, free, kw, start, optimizer):
    guess = model.replace(**start)
    t = time.process_time()
    res = ds.fit(guess, data, free, optimizer=optimizer, rtol=1e-10, atol=1e-10, **kw)
    cpu = time.process_time() - t
    return float(res.loss), cpu, int(res.num_steps), int(res.num_steps)


def scipy_runner(model, data, free, kw):
    setup = prepare_fit(model, data, free, optimizer="trust_region", rtol=1e-10, atol=1e-10, **kw)
    problem = setup.problem
    res = eqx.filter_jit(lambda prob, u: prob.residuals(u))
    jac = eqx.filter_jit(lambda prob, u: forward_jacobian(prob, u)[1])
    transforms = list(free.values())

    def fun(u):
        r = np.asarray(res(problem, jnp.asarray(u)))
        return np.where(np.isfinite(r), r, 1e10)  # MINPACK cannot take NaN

    def run(start, options):
        u0 = np.array([float(tr.inverse(start[k])) for k, tr in zip(free, transforms)])
        t = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sol = least_squares(fun, u0, jac=lambda u: np.asarray(jac(problem, jnp.asarray(u))),
                                xtol=TOL, ftol=TOL, gtol=TOL, max_nfev=2000, **options)  # fmt: skip
        cpu = time.process_time() - t
        return 0.5 * float(np.sum(sol.fun**2)), cpu, int(sol.nfev), int(sol.njev or 0)

    return run


def measure(name, spec, n_starts, chosen) -> dict:
    model, data, free, kw, centre, factor = spec
    points = starts(centre, factor, n_starts)
    runs: dict[str, list] = {}
    scipy_run = scipy_runner(model, data, free, kw)
    for label in chosen:
        if label in DIFSIM:
            run_difsim(model, data, free, kw, centre, DIFSIM[label])  # compile
            runs[label] = [run_difsim(model, data, free, kw, p, DIFSIM[label]) for p in points]
        elif label in SCIPY:
            scipy_run(centre, SCIPY[label])
            runs[label] = [scipy_run(p, SCIPY[label]) for p in points]
        print(f"  {name} {label}: done", flush=True)
    best = min(r[0] for rows in runs.values() for r in rows if np.isfinite(r[0]))
    summary = {}
    for label, rows in runs.items():
        ok = [np.isfinite(r[0]) and r[0] <= best * (1 + SUCCESS) + 1e-12 for r in rows]
        summary[label] = dict(
            success=sum(ok) / len(ok),
            fev=statistics.median(r[2] for r in rows),
            jev=statistics.median(r[3] for r in rows),
            cpu=statistics.median(r[1] for r in rows),
            losses=[r[0] for r in rows],
        )
    return dict(best=best, summary=summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=30)
    parser.add_argument("--problems", default="lv-positive,lv-identity,lv-bounded,lorenz,sir,fhn")
    parser.add_argument("--contenders", default=",".join(DEFAULT))
    args = parser.parse_args()
    chosen = args.contenders.split(",")
    print(f"# bench_fit_robustness {today()}\n`{command_line()}`\n")
    print(f"machine: {machine_info()}\nversions: {versions()}\n", flush=True)
    specs = problems()
    rows = []
    for name in args.problems.split(","):
        out = measure(name, specs[name], args.starts, chosen)
        for label, s in out["summary"].items():
            rows.append([name, label, f"{100 * s['success']:.0f} %", f"{s['fev']:.0f}",
                         f"{s['jev']:.0f}", f"{1e3 * s['cpu']:.0f}"])  # fmt: skip
        print(f"  {name}: best loss {out['best']:.10g}", flush=True)
        for label, s in out["summary"].items():
            print(f"    {label}: " + " ".join(f"{x:.8g}" for x in s["losses"]), flush=True)
    headers = ["problem", "optimizer", "success", "f evals", "J evals", "CPU ms / start"]
    print("\n" + format_table(headers, rows, markdown=True))
    print(f"\nload average at the end: {machine_info()['loadavg']}")


if __name__ == "__main__":
    main()
