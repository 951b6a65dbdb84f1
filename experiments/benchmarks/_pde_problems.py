"""The PDE problems of bench_pde.py, difsim's side: the Kuramoto–Sivashinsky and Gray–Scott
models, their jitted fixed-step solves and the error measure. Imported by bench_pde.py
(also in its fresh `--child` processes) after it has enabled float64."""

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import difsim as ds

KS_LENGTH = 32 * math.pi
KS_T1 = 20.0
GS_LENGTH = 2.5


def ks_model(n: int) -> ds.Model:
    return ds.models.KuramotoSivashinsky(grid=ds.Grid.periodic(n, KS_LENGTH))


def gs_model(n: int) -> ds.Model:
    return ds.models.GrayScott(grid=ds.Grid.periodic((n, n), (GS_LENGTH, GS_LENGTH)))


def gs_params(model) -> dict:
    return {name: float(getattr(model, name)) for name in ("Du", "Dv", "F", "k")}


def steps_of(t1: float, dt: float) -> int:
    steps = round(t1 / dt)
    if not math.isclose(steps * dt, t1):
        raise ValueError(f"dt = {dt} does not divide t1 = {t1}")
    return steps


def difsim_solve(case: str, solver: str, dt: float, t1: float) -> Callable:
    """`jax.jit` of the model → final field (KS: `u`; Gray–Scott: the stacked `(u, v)`)."""
    max_steps = max(16_384, steps_of(t1, dt) + 1)
    options = {} if solver == "default" else dict(solver=solver, controller="constant")

    def solve(model):
        sol = ds.simulate(model, t0=0.0, t1=t1, save="final", dt0=dt, max_steps=max_steps,
                          **options)  # fmt: skip
        final = sol.final
        return final["u"] if case == "ks" else jnp.stack([final["u"], final["v"]])

    return jax.jit(solve)


def max_error(result, ref, case: str) -> float:
    result, ref = np.asarray(result), np.asarray(ref)
    if case == "gs":  # the error of v
        result, ref = result[1], ref[1]
    return float(np.max(np.abs(result - ref)))
