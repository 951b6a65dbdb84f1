"""The contenders of bench_sweep.py on the DiffEqGPU Lorenz problem: `ds.sweep` and the
same solve written by hand, `jax.jit(jax.vmap(diffrax.diffeqsolve))`, each `rhos → (N, 3)`
final states on the host. Imported by bench_sweep.py after it has set float32."""

import jax
import jax.numpy as jnp
import numpy as np
from bench_simulate import ATOL, RHO_MAX, RTOL, T0, T1, diffrax_final

import difsim as ds

MAX_STEPS = 16_384


def rho_values(n: int) -> np.ndarray:
    return np.asarray(jnp.linspace(0.0, RHO_MAX, n, dtype=jnp.float32))


def sweep_fn(memory_budget: int | None = None, chunk_size: int | None = None):
    """`rhos → (N, 3)` final states through `ds.sweep` (in memory, no file)."""
    model = ds.models.Lorenz()

    def run(rhos):
        out = ds.sweep(
            model,
            ds.GridSweep({"rho": rhos}),
            t0=T0,
            t1=T1,
            save="final",
            solver="tsit5",
            rtol=RTOL,
            atol=ATOL,
            max_steps=MAX_STEPS,
            chunk_size=chunk_size,
            memory_budget=memory_budget,
            progress=False,
        )
        return np.stack([np.asarray(out[k]).reshape(-1) for k in ("x", "y", "z")], axis=-1)

    return run


def raw_fn():
    """`rhos → (N, 3)` final states by `jit(vmap(diffeqsolve))`, copied to the host."""
    solve = jax.jit(jax.vmap(lambda rho: diffrax_final(rho, MAX_STEPS)))

    def run(rhos):
        return np.asarray(solve(jnp.asarray(rhos)))[:, -1, :]

    return run
