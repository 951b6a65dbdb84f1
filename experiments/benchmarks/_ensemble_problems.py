"""Problems and contenders of `bench_ensemble.py`: the Lorenz sweep of issue 11, a
Lorenz-96 ring (a larger non-stiff model), and one callable per way of solving them.

Every contender maps the swept values (`(N,)`, float32) to the final states as a host
`(N, D)` float64 array (NaN where a lane failed), so each is timed with its copy to the
host, as `ds.sweep`'s result is.
"""

import dataclasses
import inspect
import time
from collections.abc import Callable

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

import difsim as ds
from difsim._ensemble import simulate_ensemble

RTOL = ATOL = 1e-6
T0, T1 = 0.0, 1.0
MAX_STEPS = 16_384  # difsim's default, used by every contender
REF_TOL = 1e-12  # the float64 DOP853 reference


class Lorenz96(ds.Model):
    r"""Lorenz (1996) model: `L96_DIM` variables on a ring driven by a forcing `F`,
    $\dot x_i = (x_{i+1} - x_{i-2})\,x_{i-1} - x_i + F$ (indices modulo the ring)."""

    F: float = 8.0
    state = ds.State(x=np.r_[8.01, np.full(39, 8.0)])

    def rhs(self, t, s):
        x = s.x
        return dict(x=(jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + self.F)


def _lorenz_jax(t, y, p):
    x, v, z = y
    return jnp.stack([10.0 * (v - x), x * (p - z) - v, x * v - 8.0 / 3.0 * z])


def _lorenz_numpy(t, y, p):
    x, v, z = y
    return [10.0 * (v - x), x * (p - z) - v, x * v - 8.0 / 3.0 * z]


def _l96_jax(t, x, p):
    return (jnp.roll(x, -1) - jnp.roll(x, 2)) * jnp.roll(x, 1) - x + p


def _l96_numpy(t, x, p):
    return (np.roll(x, -1) - np.roll(x, 2)) * np.roll(x, 1) - x + p


@dataclasses.dataclass(frozen=True)
class Problem:
    """A sweep of one scalar parameter `key` over `linspace(lo, hi, N)`, final state only.
    `vector_field(t, y, p)` / `numpy_rhs(t, y, p)`: the same model on a flat state `(D,)`,
    for diffrax and scipy."""

    name: str
    model: ds.Model
    key: str
    lo: float
    hi: float
    y0: tuple[float, ...]
    vector_field: Callable
    numpy_rhs: Callable

    def values(self, n: int) -> np.ndarray:
        return np.asarray(jnp.linspace(self.lo, self.hi, n, dtype=jnp.float32))

    @property
    def size(self) -> int:
        """Entries of one trajectory's state."""
        return len(self.y0)


LORENZ = Problem("lorenz", ds.models.Lorenz(), "rho", 0.0, 21.0, (1.0, 0.0, 0.0),
                 _lorenz_jax, _lorenz_numpy)  # fmt: skip
L96 = Problem("lorenz96", Lorenz96(), "F", 4.0, 12.0, (8.01,) + (8.0,) * 39, _l96_jax, _l96_numpy)


def _stack(ys: dict) -> np.ndarray:
    """`{var: (N, ...)}` of final values (one saved time) as `(N, D)` float64."""
    return np.concatenate(
        [np.asarray(v, np.float64).reshape(v.shape[0], -1) for v in ys.values()], axis=1
    )


# ------------------------------------------------------------------ contenders
def _engine(problem: Problem, model: ds.Model, v, block_size: int | None = None):
    """The ensemble engine's solution of the benchmark problem for `model` at values `v`."""
    return simulate_ensemble(
        model, {problem.key: v}, t0=T0, t1=T1, save="final", solver="tsit5", rtol=RTOL,
        atol=ATOL, max_steps=MAX_STEPS, block_size=block_size,
    )  # fmt: skip


def engine_fn(problem: Problem, block_size: int | None = None) -> Callable:
    """(a) the ensemble engine called directly, jitted."""
    solve = jax.jit(lambda v: _engine(problem, problem.model, v, block_size))
    run = lambda v: _stack(solve(v).ys)  # noqa: E731
    run.solution = solve  # for step counts
    return run


def engine_arg_fn(problem: Problem) -> Callable:
    """(a2) the engine called directly with the model as an argument of the jitted
    function (what a sweep compiles, once for all model values), where (a) closes over it
    and lets XLA fold its fixed values into the program."""
    solve = jax.jit(lambda m, v: _engine(problem, m, v).ys)
    return lambda v: _stack(solve(problem.model, v))


def engine_status_fn(problem: Problem) -> Callable:
    """(a3) (a2) returning what a sweep returns besides the states: each lane's status and
    step count (what `ds.sweep` is held to: ≤ 5 % over the engine called directly)."""

    def solve(m, v):
        sol = _engine(problem, m, v)
        return sol.ys, sol.status, sol.num_steps

    solve = jax.jit(solve)

    def run(v):
        ys, status, steps = solve(problem.model, v)
        run.status = np.asarray(status), np.asarray(steps)
        return _stack(ys)

    return run


def sweep_engine_available() -> bool:
    return "engine" in inspect.signature(ds.sweep).parameters


def sweep_fn(problem: Problem, engine: str) -> Callable | None:
    """(b)/(c) `ds.sweep(engine=...)` in memory (no file); `None` before the engine
    choice exists on `ds.sweep`."""
    if not sweep_engine_available():
        return None
    # Outside the timed call: what the sweep is timed against does no such work either.
    names = tuple(problem.model.initial_state().values)

    def run(v):
        out = ds.sweep(
            problem.model, ds.GridSweep({problem.key: v}), t0=T0, t1=T1, save="final",
            solver="tsit5", rtol=RTOL, atol=ATOL, max_steps=MAX_STEPS, progress=False,
            engine=engine,
        )  # fmt: skip
        if run.used is None:  # bookkeeping of the benchmark, once: not the sweep's cost
            run.used = out.attrs.get("engine"), out.attrs.get("engine_fallback")
        # The arrays as the engine's contenders get theirs: `out[k]` would build a DataArray
        # (coordinates gathered), which is the reading's cost, not the sweep's.
        variables = out.variables
        return _stack({k: variables[k].values for k in names})

    run.used = None
    return run


def diffrax_final(vector_field: Callable, y0, args):
    """One trajectory's final state by `diffrax.diffeqsolve` (Tsit5, PID, `throw=False`)."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field), diffrax.Tsit5(), T0, T1, None,
        jnp.asarray(y0, jnp.float32), args=args,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
        max_steps=MAX_STEPS, throw=False,
    )  # fmt: skip
    return sol.ys[-1]


def vmap_fn(problem: Problem) -> Callable:
    """(d) raw `jax.jit(jax.vmap(diffrax.diffeqsolve))`, Tsit5, all lanes at once."""
    solve = jax.jit(jax.vmap(lambda p: diffrax_final(problem.vector_field, problem.y0, p)))
    return lambda v: np.asarray(solve(v), np.float64)


def chunked_fn(problem: Problem, chunk: int) -> Callable:
    """(e) the same diffrax solve, `lax.map` over chunks of `chunk` lanes (vmapped)."""
    one = lambda p: diffrax_final(problem.vector_field, problem.y0, p)  # noqa: E731
    solve = jax.jit(lambda v: jax.lax.map(one, v, batch_size=chunk))
    return lambda v: np.asarray(solve(v), np.float64)


# ------------------------------------------------------------------ scipy
def subset(n: int, lanes: int) -> np.ndarray:
    """Indices of `lanes` evenly spaced lanes out of `n`."""
    return np.unique(np.linspace(0, n - 1, min(lanes, n)).round().astype(int))


def scipy_loop(problem: Problem, values: np.ndarray, method: str, tol: float) -> dict:
    """`solve_ivp` (float64) lane by lane: `{"finals": (n, D), "per_lane_s", "cpu_per_lane_s"}`."""
    from scipy.integrate import solve_ivp

    finals = []
    wall, cpu = time.perf_counter(), time.process_time()
    for p in values:
        sol = solve_ivp(problem.numpy_rhs, (T0, T1), np.asarray(problem.y0, np.float64),
                        method=method, rtol=tol, atol=tol, args=(float(p),))  # fmt: skip
        finals.append(sol.y[:, -1] if sol.success else np.full(len(problem.y0), np.nan))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return dict(finals=np.array(finals), per_lane_s=wall / len(values),
                cpu_per_lane_s=cpu / len(values))  # fmt: skip


def reference(problem: Problem, values: np.ndarray) -> np.ndarray:
    """Final states by float64 DOP853 at `rtol = atol = 1e-12`."""
    return scipy_loop(problem, values.astype(np.float64), "DOP853", REF_TOL)["finals"]


def errors(out: np.ndarray, ref: np.ndarray) -> dict:
    """Max and median over lanes of each lane's largest absolute error, and how many lanes
    are not finite."""
    per_lane = np.max(np.abs(out - ref), axis=1)
    finite = np.isfinite(per_lane)
    return dict(
        max=float(per_lane[finite].max()) if finite.any() else float("nan"),
        median=float(np.median(per_lane[finite])) if finite.any() else float("nan"),
        nonfinite=int((~finite).sum()),
    )
