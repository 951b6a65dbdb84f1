"""The analytical parts of `bench_ensemble.py`: gradient contenders, FLOPs of one engine
step, the machine's vector peak, and an opcode census of compiled step loops.

These reach into the engine's private modules (`difsim._ensemble._field`, `_methods`,
`_control`) to build one step on its own; `tests/test_benchmarks.py` imports this file so
a move there is caught.
"""

import collections
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _common import _computations
from _ensemble_problems import (
    ATOL,
    LORENZ,
    MAX_STEPS,
    RTOL,
    T0,
    T1,
    Problem,
    diffrax_final,
    engine_fn,
)

import difsim as ds
from difsim._ensemble import Tsit5, simulate_ensemble
from difsim._ensemble._control import Controller, next_interval, scaled_error
from difsim._ensemble._field import BatchField, BlockRHS

# ------------------------------------------------------------------ gradients
ADJOINTS = ("forward", "checkpoint", "discrete", "auto")


def _lorenz_args(t, y, args):
    sigma, beta, rho = args
    x, v, z = y
    return jnp.stack([sigma * (v - x), x * (rho - z) - v, x * v - beta * z])


def _engine_states(model, key, values, adjoint="auto"):
    return simulate_ensemble(
        model, {key: values}, t0=T0, t1=T1, save="final", solver="tsit5", rtol=RTOL,
        atol=ATOL, max_steps=MAX_STEPS, adjoint=adjoint,
    ).ys  # fmt: skip


def _engine_loss(model, key, values, adjoint="auto"):
    return sum(jnp.sum(v**2) for v in _engine_states(model, key, values, adjoint).values())


def _lorenz_diffrax(sigma, beta, rhos):
    finals = jax.vmap(lambda r: diffrax_final(_lorenz_args, LORENZ.y0, (sigma, beta, r)))(rhos)
    return jnp.sum(finals**2)


class ForcedLorenz96(ds.Model):
    """Lorenz-96 with its own forcing per variable (`F`, 40 values: 40 parameters to
    differentiate) and the advection scaled by `c` (swept)."""

    F: jax.Array
    c: float = 1.0
    state = ds.State(x=ds.Var(np.r_[8.01, np.full(39, 8.0)]))

    def rhs(self, t, s):
        x = s.x
        return dict(x=self.c * (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + self.F)


def _l96_diffrax(F, cs):
    def field(t, x, c):
        return c * (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + F

    y0 = np.r_[8.01, np.full(39, 8.0)]
    return jnp.sum(jax.vmap(lambda c: diffrax_final(field, y0, c))(cs) ** 2)


def grad_cases(n: int, n_l96: int) -> list[dict]:
    """Gradients of `sum(final state²)`: each case `{name, scalars, args, fns, diffrax}`
    with jitted `fns` — the engine's forward loss and its gradient with each adjoint —
    and diffrax vmap's gradient (its default `RecursiveCheckpointAdjoint`) of the same
    loss, `None` where there is no such case. `scalars`: the differentiated scalars."""
    lorenz = ds.models.Lorenz()
    rhos = jnp.asarray(LORENZ.values(n))
    shared = lambda f: lambda s, b, r, a="auto": f(ds.models.Lorenz(sigma=s, beta=b), "rho", r, a)  # noqa: E731
    whole = lambda f: lambda m, r, a="auto": f(m, "rho", r, a)  # noqa: E731
    F0 = jnp.linspace(7.0, 9.0, 40, dtype=jnp.float32)
    cs = jnp.linspace(0.8, 1.2, n_l96, dtype=jnp.float32)
    l96 = lambda f: lambda F, c, a="auto": f(ForcedLorenz96(F=F), "c", c, a)  # noqa: E731
    sb = (jnp.float32(10.0), jnp.float32(8.0 / 3.0), rhos)
    cases = [
        dict(name="Lorenz, shared (sigma, beta)", scalars=2, n=n, args=sb, wrap=shared,
             argnums=(0, 1), diffrax=(_lorenz_diffrax, (0, 1))),
        dict(name="Lorenz, each lane's rho", scalars=1, n=n, args=sb, wrap=shared,
             argnums=2, diffrax=(_lorenz_diffrax, 2)),
        dict(name="Lorenz, whole model + each lane's rho", scalars=6, n=n,
             args=(lorenz, rhos), wrap=whole, argnums=(0, 1), diffrax=None),
        dict(name="Lorenz-96, forcing F (40 values)", scalars=40, n=n_l96, args=(F0, cs),
             wrap=l96, argnums=0, diffrax=(_l96_diffrax, 0)),
    ]  # fmt: skip
    for case in cases:
        wrap, argnums = case.pop("wrap"), case.pop("argnums")
        loss = wrap(_engine_loss)
        # The loss, and the same solve returning its states: XLA:CPU may run the first on
        # its thread pool at 2-3x the CPU time of the second (docs/benchmarks.md,
        # "2026-11-28, late"), so a gradient is set against both.
        fns = {"forward": jax.jit(loss), "forward, states": jax.jit(wrap(_engine_states))}
        for adjoint in ADJOINTS:
            grad = jax.grad(lambda *a, d=adjoint, f=loss: f(*a, d), argnums=argnums)
            fns[f"grad {adjoint}"] = jax.jit(grad)
        ref = case.pop("diffrax")
        if ref is not None:
            fns["diffrax forward"] = jax.jit(ref[0])
            fns["diffrax grad"] = jax.jit(jax.grad(ref[0], argnums=ref[1]))
        case["fns"] = fns
    return cases


class LorenzExtra(ds.Model):
    """Lorenz (σ = 10, β = 8/3) with `p`, any number of parameters, summed into dx/dt:
    a Lorenz sweep with as many differentiated scalars as `p` has."""

    p: jax.Array
    rho: float = 28.0
    state = ds.State(x=ds.Var(1.0), y=ds.Var(0.0), z=ds.Var(0.0))

    def rhs(self, t, s):
        return dict(x=10.0 * (s.y - s.x) + jnp.sum(self.p), y=s.x * (self.rho - s.z) - s.y,
                    z=s.x * s.y - 8.0 / 3.0 * s.z)  # fmt: skip


class L96Partly(ds.Model):
    """Lorenz-96 whose first `len(F)` forcings are free parameters, the rest 8."""

    F: jax.Array
    c: float = 1.0
    state = ds.State(x=ds.Var(np.r_[8.01, np.full(39, 8.0)]))

    def rhs(self, t, s):
        x, k = s.x, self.F.shape[0]
        forcing = jnp.concatenate([self.F, jnp.full((40 - k,), 8.0, x.dtype)])
        return dict(x=self.c * (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + forcing)


def crossover_cases(counts: list[int], n: int, n_l96: int) -> list[dict]:
    """Gradients of `sum(final state²)` with respect to `P` shared parameters for each `P`
    in `counts`, forward mode against reverse mode (where `auto` should switch): each case
    `{name, scalars, n, args, fns}` with jitted `fns` — the forward loss and the gradient
    with `adjoint="forward"`, `"checkpoint"` and `"discrete"`."""
    rhos = jnp.asarray(LORENZ.values(n))
    cs = jnp.linspace(0.8, 1.2, n_l96, dtype=jnp.float32)
    # (name, model of P parameters, swept key, values, parameters' value, most parameters)
    models = [("Lorenz + P parameters", lambda p: LorenzExtra(p=p), "rho", rhos, 0.0, None),
              ("Lorenz-96, P forcings", lambda p: L96Partly(F=p), "c", cs, 8.0, 40)]  # fmt: skip
    cases = []
    for name, make, key, values, start, most in models:
        for count in counts:
            if most is not None and count > most:
                continue

            def loss(p, adjoint, make=make, key=key, values=values):
                return _engine_loss(make(p), key, values, adjoint)

            fns = {"forward": jax.jit(lambda p, f=loss: f(p, "auto"))}
            for adjoint in ("forward", "checkpoint", "discrete"):
                fns[f"grad {adjoint}"] = jax.jit(jax.grad(lambda p, a=adjoint, f=loss: f(p, a)))
            args = (jnp.full((count,), start, jnp.float32),)
            cases.append(dict(name=name, scalars=count, n=len(values), args=args, fns=fns))
    return cases


def grad_agreement(case: dict) -> dict:
    """Max |difference| / max |reference| between the engine's gradients (each adjoint)
    and diffrax's, and between the engine's two modes."""

    def flat(g):
        return np.concatenate([np.ravel(np.asarray(x, np.float64))
                               for x in jax.tree.leaves(g)])  # fmt: skip

    grads = {k: flat(f(*case["args"])) for k, f in case["fns"].items() if "grad" in k}
    out = {}
    ref = grads.get("diffrax grad", grads["grad forward"])
    for k, g in grads.items():
        if k != "diffrax grad":
            out[f"{k} vs {'diffrax' if 'diffrax grad' in grads else 'forward'}"] = float(
                np.max(np.abs(g - ref)) / np.max(np.abs(ref))
            )
    return out


# ------------------------------------------------------------------ FLOPs and peak
def _flops(fn, *args) -> float:
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list | tuple) else cost
    return float(cost.get("flops", float("nan")))


def step_flops(problem: Problem, lanes: int = 1024) -> dict:
    """XLA's FLOP count per lane of one engine step (Tsit5: six right-hand sides, the
    stage combinations, error estimate and norm, the controller, the accept selects), and
    of one right-hand side alone."""
    state = problem.model.initial_state()
    shapes = tuple(np.shape(v) for v in state.values.values())
    field = BatchField(problem.model, state.info, shapes, jnp.float32)
    method, ctrl = Tsit5(), Controller(RTOL, ATOL, float(Tsit5.error_order))
    y = {k: jnp.ones((*s, lanes), jnp.float32) for k, s in zip(state.values, shapes)}
    t, p = jnp.zeros(lanes, jnp.float32), jnp.ones(lanes, jnp.float32)

    def rhs(t, y, p):
        return BlockRHS(field, {problem.key: p})(t, y)

    def step(t, y, f0, p):
        h = jnp.full_like(t, 1e-2)
        out = method.step(BlockRHS(field, {problem.key: p}), t, y, h, f0)
        err = scaled_error(y, out.y1, out.y_err, ctrl.rtol, ctrl.atol)
        accept, factor = ctrl.decide(err, jnp.isfinite(err))
        tprev, tnext = next_interval(t, t + h, accept, factor, T1, T1)
        keep = lambda a, b: jnp.where(accept, a, b)  # noqa: E731
        return jax.tree.map(keep, out.y1, y), jax.tree.map(keep, out.f1, f0), tprev, tnext

    per_rhs = _flops(rhs, t, y, p) / lanes
    size = sum(int(np.prod(s, dtype=int)) for s in shapes)
    return dict(rhs=per_rhs, step=_flops(step, t, y, y, p) / lanes,
                arithmetic=rk_arithmetic(method.solver.tableau, per_rhs, size))  # fmt: skip


def rk_arithmetic(tableau, rhs: float, size: int) -> float:
    """The arithmetic an explicit RK step cannot avoid, per lane: `stages - 1` right-hand
    sides (FSAL), each stage's `y + h Σ a_j k_j` (`2m + 1` FLOPs per state entry for `m`
    nonzero coefficients), the error estimate `h Σ e_j k_j` (`2m`) and the error norm's
    `(e / (atol + rtol max(|y0|, |y1|)))²` summed (8 per entry)."""
    rows = [*tableau.a_lower[:-1], tableau.b_sol]
    combos = sum(2 * int(np.count_nonzero(r)) + 1 for r in rows)
    error = 2 * int(np.count_nonzero(tableau.b_error))
    return len(tableau.c) * rhs + size * (combos + error + 8)


def _cpuinfo() -> dict[str, str]:
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return fields


def vector_peak(fma_units: int = 2, vector_bits: int | None = None) -> dict:
    """Peak float32 FLOP rate: `vector lanes × FMA units × 2 × clock`, per core and for
    the usable cores. The width defaults to 256 bits with AVX2 (what XLA's CPU backend
    emits by default even where AVX-512 exists), 128 without."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    bits = vector_bits or (256 if "avx2" in flags else 128)
    clock = float(info.get("cpu MHz", "nan")) * 1e6
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    per_core = bits / 32 * fma_units * 2 * clock
    return dict(clock_hz=clock, vector_bits=bits, fma_units=fma_units, cores=cores,
                per_core_flops=per_core, machine_flops=per_core * cores,
                avx512="avx512f" in flags)  # fmt: skip


# ------------------------------------------------------------------ compiled step loops
CENSUS = ("fusion", "transpose", "copy", "gather", "scatter", "dynamic-slice",
          "dynamic-update-slice", "select", "power", "divide", "is-finite", "while")  # fmt: skip


def loop_census(hlo: str) -> dict:
    """Opcodes of the largest `while` body of optimised HLO text, fused computations and
    nested loops included; `passes`: the body's own top-level instructions that touch
    memory (fusions and unfused ops: each is a pass over its operands)."""
    comps = _computations(hlo)
    bodies = re.findall(r"while\(.*?body=%([\w.\-]+)", hlo)

    def walk(name: str, seen: set, counter: collections.Counter) -> None:
        if name in seen or name not in comps:
            return
        seen.add(name)
        for line in comps[name]:
            op = re.search(r" = [^ ]+ ([a-z][\w\-]*)\(", line)
            if op:
                counter[op.group(1)] += 1
            for callee in re.findall(r"(?:calls|to_apply|body|condition)=%([\w.\-]+)", line):
                walk(callee, seen, counter)

    censuses = []
    for body in bodies:
        counter: collections.Counter = collections.Counter()
        walk(body, set(), counter)
        censuses.append((sum(counter.values()), body, counter))
    if not censuses:
        return {}
    size, body, counter = max(censuses)
    trivial = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}
    passes = sum(
        1 for line in comps[body]
        if (op := re.search(r" = [^ ]+ ([a-z][\w\-]*)\(", line)) and op.group(1) not in trivial
    )  # fmt: skip
    return dict(instructions=size, passes=passes, ops={k: counter.get(k, 0) for k in CENSUS})


def hlo_census(n: int) -> dict:
    """The census of the step loop of the engine and of diffrax vmap at `N = n`."""
    values = jnp.asarray(LORENZ.values(n))
    engine = engine_fn(LORENZ).solution
    out = {"engine": loop_census(engine.lower(values).compile().as_text())}
    solve = jax.jit(jax.vmap(lambda p: diffrax_final(LORENZ.vector_field, LORENZ.y0, p)))
    out["diffrax vmap"] = loop_census(solve.lower(values).compile().as_text())
    return out
