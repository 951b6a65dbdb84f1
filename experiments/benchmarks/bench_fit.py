"""Benchmark `difsim.fit` on the lynx–hare data against the same fit written by hand with
diffrax + optax (and diffrax + optimistix).

The problem (one run, side by side): Lotka–Volterra, the Hudson's Bay pelts 1900–1920
(`data/lynx_hare.csv`), lognormal noise (residuals of log values), six free variables (the
four rates and both initial populations, optimised as logarithms), Tsit5 with a PID
controller at `rtol = atol = 1e-8`, `max_steps = 4096`, float64, starting from
`alpha, beta, gamma, delta = 0.8, 0.04, 0.6, 0.02` and the 1900 counts. Contenders:

- **difsim LM**: `ds.fit(...)` with its default Levenberg–Marquardt (optimistix) and
  forward-mode Jacobians;
- **hand LM**: `optimistix.least_squares(LevenbergMarquardt)` on a hand-written diffrax
  residual function (`ForwardMode` adjoint, as optimistix's forward Jacobian needs);
- **difsim adam**: `ds.fit(..., optimizer="adam", learning_rate=1e-2, steps=3000)`
  (reverse mode through the checkpointed solve);
- **hand adam, Python loop**: a `jax.jit`-compiled `value_and_grad` + `optax.adam` step
  called 3000 times from Python — how such loops are usually written;
- **hand adam, lax.scan**: the same 3000 steps inside one compiled `lax.scan`, with
  diffrax's default `throw=True` (an error check per solve) and with `throw=False` (no
  check: like difsim inside a fit, which reads the solve's status instead).

"first call" includes compilation (JAX's caches cleared before it); "repeat" is the median
of the repeats. A second table gives the cost of one loss evaluation and of its gradient
(difsim's loss vs the hand-written one; reverse and forward mode), and their ratio.

```
python experiments/benchmarks/bench_fit.py                 # ~2 minutes
python experiments/benchmarks/bench_fit.py --quick         # fewer repeats, 600 adam steps
python experiments/benchmarks/bench_fit.py --markdown runs/bench_fit.md --json runs/bench_fit.json
```
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import optimistix as optx  # noqa: E402
from _common import (  # noqa: E402
    command_line,
    format_table,
    interleaved,
    machine_info,
    seconds,
    today,
    versions,
)

import difsim as ds  # noqa: E402
from difsim._fit._drivers import value_and_grad  # noqa: E402
from difsim._fit._fit import fit  # noqa: E402
from difsim._fit._transforms import Positive  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data/lynx_hare.csv"
RTOL = ATOL = 1e-8
MAX_STEPS = 4096
START = dict(alpha=0.8, beta=0.04, gamma=0.6, delta=0.02, prey=30.0, predator=4.0)
NAMES = ("alpha", "beta", "gamma", "delta", "state.prey", "state.predator")


# ------------------------------------------------------------------ difsim
def difsim_fit(optimizer: str, steps: int | None):
    model = ds.models.LotkaVolterra(
        alpha=START["alpha"], beta=START["beta"], gamma=START["gamma"], delta=START["delta"]
    ).replace(**{"state.prey": START["prey"], "state.predator": START["predator"]})
    return fit(
        model,
        DATA,
        {name: Positive() for name in NAMES},
        observe={"hare": "prey", "lynx": "predator"},
        noise="lognormal",
        optimizer=optimizer,
        learning_rate=1e-2,
        steps=steps,
        rtol=RTOL,
        atol=ATOL,
        max_steps=MAX_STEPS,
        progress=False,
    )


# ------------------------------------------------------------------ by hand
def hand_problem(adjoint: diffrax.AbstractAdjoint, throw: bool = True):
    raw = np.loadtxt(DATA, delimiter=",", skiprows=1)
    ts = jnp.asarray(raw[:, 0])
    log_obs = jnp.log(jnp.asarray(raw[:, 1:]))

    def vector_field(t, y, p):
        a, b, g, d = p
        return jnp.stack([(a - b * y[1]) * y[0], (-g + d * y[0]) * y[1]])

    term = diffrax.ODETerm(vector_field)

    def residuals(log_p, args=None):
        p = jnp.exp(log_p)
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            ts[0],
            ts[-1],
            None,
            p[4:],
            args=p[:4],
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
            max_steps=MAX_STEPS,
            adjoint=adjoint,
            throw=throw,
        )
        return (jnp.log(sol.ys) - log_obs).reshape(-1)

    def loss(log_p):
        r = residuals(log_p)
        return 0.5 * jnp.sum(r * r)

    x0 = jnp.log(jnp.array([START[k] for k in ("alpha", "beta", "gamma", "delta")]))
    y0 = jnp.log(jnp.array([START["prey"], START["predator"]]))
    return residuals, loss, jnp.concatenate([x0, y0])


# Each `hand_*` builds its compiled functions once and returns `run() -> (loss, steps)`,
# so repeats time the fit alone, as for difsim (whose compiled code is cached).
def hand_lm():
    residuals, _, u0 = hand_problem(diffrax.ForwardMode())
    solver = optx.LevenbergMarquardt(rtol=1e-8, atol=1e-8)

    @jax.jit
    def solve(u0):
        sol = optx.least_squares(residuals, solver, u0, max_steps=256, throw=False)
        r = residuals(sol.value)
        return 0.5 * jnp.sum(r * r), sol.stats["num_steps"]

    def run():
        loss, steps = solve(u0)
        return float(loss), int(steps)

    return run


def hand_adam_loop(steps: int):
    _, loss, u0 = hand_problem(diffrax.RecursiveCheckpointAdjoint())
    opt = optax.adam(1e-2)

    @jax.jit
    def step(u, state):
        value, grad = jax.value_and_grad(loss)(u)
        updates, state = opt.update(grad, state, u)
        return optax.apply_updates(u, updates), state, value

    final_loss = jax.jit(loss)

    def run():
        u, state = u0, opt.init(u0)
        for _ in range(steps):
            u, state, _ = step(u, state)
        return float(final_loss(u)), steps

    return run


def hand_adam_scan(steps: int, throw: bool = True):
    _, loss, u0 = hand_problem(diffrax.RecursiveCheckpointAdjoint(), throw)
    opt = optax.adam(1e-2)

    @jax.jit
    def solve(u):
        def body(carry, _):
            u, state = carry
            value, grad = jax.value_and_grad(loss)(u)
            updates, state = opt.update(grad, state, u)
            return (optax.apply_updates(u, updates), state), value

        (u, _), _ = jax.lax.scan(body, (u, opt.init(u)), None, length=steps)
        return loss(u)

    def run():
        return float(solve(u0)), steps

    return run


# ------------------------------------------------------------------ measurements
def time_fit(name: str, build, repeats: int) -> dict:
    """Time `build()()` (first call: building + compiling + running) and then repeats of
    the built `run()`: wall and CPU seconds (CPU time hardly grows when other processes
    compete for the cores, so it is the steadier figure on a shared machine)."""
    jax.clear_caches()
    start = time.perf_counter()
    fn = build()
    loss, steps = fn()
    first = time.perf_counter() - start
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    repeat, repeat_cpu = statistics.median(walls), statistics.median(cpus)
    print(
        f"  {name}: first {first:.2f} s, repeat {repeat:.3f} s (cpu {repeat_cpu:.3f} s), "
        f"{steps} steps, loss {loss:.6g}"
    )
    return dict(
        name=name,
        first_s=first,
        repeat_s=repeat,
        min_s=min(walls),
        cpu_s=repeat_cpu,
        steps=steps,
        loss=loss,
    )


def fit_contenders(adam_steps: int, repeats: int) -> list[dict]:
    def d(optimizer, steps):
        def run():
            res = difsim_fit(optimizer, steps)
            return res.loss, res.num_steps

        return lambda: run  # nothing to build: fit() caches its compiled code itself

    return [
        time_fit("difsim LM", d("levenberg_marquardt", None), repeats),
        time_fit("hand LM (optimistix)", hand_lm, repeats),
        time_fit("difsim adam", d("adam", adam_steps), repeats),
        time_fit("hand adam, Python loop", lambda: hand_adam_loop(adam_steps), repeats),
        time_fit("hand adam, lax.scan", lambda: hand_adam_scan(adam_steps), repeats),
        time_fit(
            "hand adam, lax.scan, throw=False",
            lambda: hand_adam_scan(adam_steps, throw=False),
            repeats,
        ),
    ]


BURST = 20


def _burst(fn, n: int):
    def run(u):
        for _ in range(n - 1):
            fn(u)
        return fn(u)

    return run


def loss_costs(repeats: int) -> list[dict]:
    # The difsim loss is the fit's own objective (problem.loss), built by a 0-step fit.
    problem = difsim_fit("adam", 0).problem
    u = jnp.asarray(difsim_fit("adam", 0).u)
    forward_problem = problem.with_adjoint("forward")
    _, hand_loss, hu = hand_problem(diffrax.RecursiveCheckpointAdjoint())
    _, hand_loss_fwd, _ = hand_problem(diffrax.ForwardMode())
    basis = jnp.eye(hu.shape[0])

    def hand_fwd_grad(u):
        values, tangents = jax.vmap(lambda e: jax.jvp(hand_loss_fwd, (u,), (e,)))(basis)
        return values[0], tangents

    def difsim_grad(problem, adjoint):
        return eqx.filter_jit(lambda u: value_and_grad(problem, u, adjoint))

    fns = {
        "difsim loss": eqx.filter_jit(lambda u: problem.loss(u)),
        "difsim grad (checkpoint)": difsim_grad(problem, "checkpoint"),
        "difsim grad (forward)": difsim_grad(forward_problem, "forward"),
        "hand loss": jax.jit(hand_loss),
        "hand grad (checkpoint)": jax.jit(jax.value_and_grad(hand_loss)),
        "hand grad (forward)": jax.jit(hand_fwd_grad),
    }
    for fn in fns.values():
        jax.block_until_ready(fn(u))  # compile
    # Bursts of calls: one call of a sub-millisecond function is mostly dispatch noise.
    fns = {k: _burst(fn, BURST) for k, fn in fns.items()}
    assert np.allclose(np.asarray(u), np.asarray(hu), rtol=1e-15, atol=0)  # same point
    assert abs(float(fns["difsim loss"](u)) - float(fns["hand loss"](u))) < 1e-9
    wall, _ = interleaved(fns, (u,), repeats)
    med = {k: statistics.median(v) / BURST for k, v in wall.items()}
    rows = []
    for who in ("difsim", "hand"):
        for mode in ("checkpoint", "forward"):
            grad = med[f"{who} grad ({mode})"]
            rows.append(
                dict(
                    name=f"{who} ({mode})",
                    loss_s=med[f"{who} loss"],
                    grad_s=grad,
                    ratio=grad / med[f"{who} loss"],
                )
            )
    return rows


def tables(fits: list[dict], costs: list[dict], markdown: bool) -> str:
    hand = {"difsim LM": "hand LM (optimistix)", "difsim adam": "hand adam, Python loop"}
    by_name = {r["name"]: r for r in fits}
    rows = []
    for r in fits:
        ref = by_name.get(hand.get(r["name"], ""))
        ratio = f"{r['repeat_s'] / ref['repeat_s']:.2f}" if ref else ""
        rows.append(
            [
                r["name"],
                str(r["steps"]),
                seconds(r["first_s"]),
                f"{seconds(r['repeat_s'])} ({seconds(r['min_s'])})",
                seconds(r["cpu_s"]),
                seconds(r["repeat_s"] / max(r["steps"], 1)),
                f"{r['loss']:.6g}",
                ratio,
            ]
        )
    head = [
        "contender",
        "steps",
        "first call",
        "repeat (min)",
        "repeat CPU",
        "per step",
        "final loss",
        "vs hand",
    ]
    out = [format_table(head, rows, markdown), ""]
    rows = [
        [c["name"], seconds(c["loss_s"]), seconds(c["grad_s"]), f"{c['ratio']:.2f}"] for c in costs
    ]
    out.append(format_table(["loss of", "loss", "loss + gradient", "ratio"], rows, markdown))
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 repeats, 600 adam steps")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--adam-steps", type=int, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    repeats = args.repeats or (2 if args.quick else 5)
    adam_steps = args.adam_steps or (600 if args.quick else 3000)
    print(f"bench_fit: {repeats} repeats, {adam_steps} adam steps")
    fits = fit_contenders(adam_steps, repeats)
    costs = loss_costs(max(10, 4 * repeats))
    print()
    print(tables(fits, costs, markdown=False))
    info = dict(
        date=today(),
        command=command_line(),
        machine=machine_info(),
        versions=versions(),
        repeats=repeats,
        adam_steps=adam_steps,
        fits=fits,
        costs=costs,
    )
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        header = f"{info['date']}, `{info['command']}`, {info['machine']['cpu']}\n\n"
        args.markdown.write_text(header + tables(fits, costs, markdown=True) + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(info, indent=2, default=str))


if __name__ == "__main__":
    main()
