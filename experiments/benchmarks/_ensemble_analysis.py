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
def _lorenz_args(t, y, args):
    sigma, beta, rho = args
    x, v, z = y
    return jnp.stack([sigma * (v - x), x * (rho - z) - v, x * v - beta * z])


def _engine_loss(sigma, beta, rhos):
    model = ds.models.Lorenz(sigma=sigma, beta=beta)
    ys = simulate_ensemble(model, {"rho": rhos}, t0=T0, t1=T1, save="final", solver="tsit5",
                           rtol=RTOL, atol=ATOL, max_steps=MAX_STEPS).ys  # fmt: skip
    return sum(jnp.sum(v**2) for v in ys.values())


def _diffrax_loss(sigma, beta, rhos):
    finals = jax.vmap(lambda r: diffrax_final(_lorenz_args, LORENZ.y0, (sigma, beta, r)))(rhos)
    return jnp.sum(finals**2)


def grad_fns(n: int):
    """`(fns, check)`: jitted forward losses and gradients of `(sigma, beta, rhos)` —
    w.r.t. the shared `(sigma, beta)` and w.r.t. every lane's `rho` — for the engine and
    for diffrax vmap (its default `RecursiveCheckpointAdjoint`); `check` compares the
    engine's gradients with diffrax's (relative differences)."""
    fns = {}
    for who, loss in (("engine", _engine_loss), ("diffrax", _diffrax_loss)):
        fns[f"{who} forward"] = jax.jit(loss)
        fns[f"{who} grad (sigma, beta)"] = jax.jit(jax.grad(loss, argnums=(0, 1)))
        fns[f"{who} grad rho (per lane)"] = jax.jit(jax.grad(loss, argnums=2))

    def check(sigma, beta, rhos):
        out = {}
        for what in ("grad (sigma, beta)", "grad rho (per lane)"):
            e = np.ravel(np.asarray(fns[f"engine {what}"](sigma, beta, rhos), np.float64))
            d = np.ravel(np.asarray(fns[f"diffrax {what}"](sigma, beta, rhos), np.float64))
            out[what] = float(np.max(np.abs(e - d)) / np.max(np.abs(d)))
        return out

    return fns, check


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
