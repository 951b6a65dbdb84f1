"""The other libraries' side of `bench_pde.py`: exponax and py-pde set up for the same
problems as difsim, and a fresh-process runner that times each of them from a cold start.

Kept apart from `bench_pde.py` so that a fresh process timing exponax or py-pde imports
neither difsim nor the other library. Run as a script, it is that process:

```
python experiments/benchmarks/_pde_refs.py SPEC.json
```

where `SPEC.json` names the library (`"exponax"` or `"pypde"`), the problem and the files
for the initial field (`.npy`) and the result. The result (`.npy`) is written as soon as it
exists, so the parent can time "time to result"; then the process repeats the solve for a
steady-state time (py-pde: its compiled stepper is reused) and writes its own timings as
JSON next to the result.

Conventions shared with difsim: periodic grids with points `x_i = i L / n`, states as numpy
arrays (`(n,)` for Kuramoto–Sivashinsky, `(2, n, n)` = `(u, v)` for Gray–Scott), float64.
"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# ------------------------------------------------------------------ exponax


def exponax_ks(n: int, length: float, dt: float, steps: int, *, repeat: bool = False):
    """Kuramoto–Sivashinsky `u_t = -u u_x - u_xx - u_xxxx` with exponax, ETDRK4, `steps`
    steps of `dt`: a jitted function from the initial field `(n,)` to the final one.

    `exponax.stepper.KuramotoSivashinskyConservative` in 1-D is exactly this equation with
    its default scales (`b_1 = psi_1 = psi_2 = 1`, `uₜ + ½ (u²)ₓ + uₓₓ + uₓₓₓₓ = 0`) on the
    physical domain `[0, length)` (no rescaling: the wavenumbers are `2π m / length`), with
    the nonlinear term dealiased by the 2/3 rule, as difsim's model. `order=4` is ETDRK4
    (Cox–Matthews with Kassam–Trefethen's contour integrals).

    `repeat=False`: the loop runs in Fourier space (`stepper.step_fourier`), the fastest way
    to use exponax; `repeat=True`: `exponax.repeat(stepper, steps)` on physical fields, the
    documented way (one FFT pair more per step).
    """
    import exponax
    import jax
    import jax.numpy as jnp

    stepper = exponax.stepper.KuramotoSivashinskyConservative(1, length, n, dt, order=4)
    if repeat:
        rollout = exponax.repeat(stepper, steps)
        return jax.jit(lambda u0: rollout(u0[None])[0])

    def solve(u0):
        u_hat = jnp.fft.rfft(u0[None])
        u_hat = jax.lax.fori_loop(0, steps, lambda i, v: stepper.step_fourier(v), u_hat)
        return jnp.fft.irfft(u_hat, n=n)[0]

    return jax.jit(solve)


def exponax_gray_scott(n: int, length: float, dt: float, steps: int, params: dict):
    """Gray–Scott with exponax, ETDRK4 (`order=4`), `steps` steps of `dt`: a jitted
    function from the initial `(2, n, n)` state `(u, v)` to the final one.

    `exponax.stepper.reaction.GrayScott` is Pearson's system (`D_u ∇²u - u v² + F (1 - u)`,
    `D_v ∇²v + u v² - (F + k) v`) on `[0, length)²`, Fourier pseudo-spectral (the Laplacian
    exact on every mode, the cubic term dealiased by exponax's default 1/2 rule): a
    different spatial discretisation from difsim's and py-pde's 5-point Laplacian, so its
    error is measured against its own fine-step solution.
    """
    import exponax
    import jax
    import jax.numpy as jnp

    stepper = exponax.stepper.reaction.GrayScott(
        2,
        length,
        n,
        dt,
        diffusivity_1=params["Du"],
        diffusivity_2=params["Dv"],
        feed_rate=params["F"],
        kill_rate=params["k"],
        order=4,
    )

    def solve(y0):
        y_hat = jnp.fft.rfftn(y0, axes=(1, 2))
        y_hat = jax.lax.fori_loop(0, steps, lambda i, v: stepper.step_fourier(v), y_hat)
        return jnp.fft.irfftn(y_hat, s=(n, n), axes=(1, 2))

    return jax.jit(solve)


# ------------------------------------------------------------------ py-pde


def pypde_gray_scott(n: int, length: float, params: dict, y0: np.ndarray):
    """Gray–Scott as a py-pde `PDE` on a periodic `CartesianGrid`: `(pde, state)`.

    py-pde's `laplace` on a Cartesian grid is the 5-point stencil, the same as difsim's
    `ds.fd.laplacian(order=2)`, so both solve the same semi-discrete system. (py-pde's cells are
    centred at `(i + 1/2) L / n` rather than `i L / n`; on a periodic domain that shift
    changes nothing, since the initial values are passed as arrays.)
    """
    import pde

    grid = pde.CartesianGrid([[0.0, length], [0.0, length]], [n, n], periodic=True)
    f, k = params["F"], params["k"]
    eq = pde.PDE(
        {
            "u": f"{params['Du']} * laplace(u) - u * v**2 + {f} * (1 - u)",
            "v": f"{params['Dv']} * laplace(v) + u * v**2 - {f + k} * v",
        },
        bc="periodic",
    )
    state = pde.FieldCollection(
        [pde.ScalarField(grid, np.array(y0[0])), pde.ScalarField(grid, np.array(y0[1]))]
    )
    return eq, state


def pypde_solver(eq, scheme: str, tolerance: float | None):
    """py-pde's explicit solvers with the numba backend: `"rk4"` (its Runge–Kutta solver
    with a fixed step, classic RK4) or `"rk45"` (the same, adaptive: Runge–Kutta–Fehlberg
    with `tolerance`), or `"euler"`."""
    import pde

    if scheme == "rk4":
        return pde.RungeKuttaSolver(eq, backend="numba")
    if scheme == "rk45":
        return pde.RungeKuttaSolver(eq, backend="numba", adaptive=True, tolerance=tolerance)
    if scheme == "euler":
        return pde.EulerSolver(eq, backend="numba")
    raise ValueError(f"unknown py-pde scheme {scheme!r}")


# ------------------------------------------------------------------ fresh-process child


def _save_atomic(path: Path, array: np.ndarray) -> None:
    # The parent polls for `path`: write elsewhere, then rename, so it never reads half a file.
    tmp = path.with_name(path.stem + ".partial.npy")
    np.save(tmp, np.asarray(array))
    os.replace(tmp, path)


def _run_exponax(spec: dict, y0: np.ndarray, out: Path) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    steps = spec["steps"]
    start = time.perf_counter()
    if spec["case"] == "ks":
        fn = exponax_ks(spec["n"], spec["length"], spec["dt"], steps)
    else:
        fn = exponax_gray_scott(spec["n"], spec["length"], spec["dt"], steps, spec["params"])
    y0 = jnp.asarray(y0)
    setup = time.perf_counter() - start  # exponax builds its ETDRK4 coefficients eagerly
    start = time.perf_counter()
    result = np.asarray(fn(y0))
    first = time.perf_counter() - start
    _save_atomic(out, result)
    cpu = time.process_time()  # CPU seconds of this process until the result existed
    steady = []
    for _ in range(spec.get("repeats", 0)):
        start = time.perf_counter()
        jax.block_until_ready(fn(y0))
        steady.append(time.perf_counter() - start)
    return dict(setup_s=setup, first_call_s=first, steady_s=steady, cpu_at_result_s=cpu)


def _run_pypde(spec: dict, y0: np.ndarray, out: Path) -> dict:
    start = time.perf_counter()
    eq, state = pypde_gray_scott(spec["n"], spec["length"], spec["params"], y0)
    solver = pypde_solver(eq, spec.get("scheme", "rk4"), spec.get("tolerance"))
    setup = time.perf_counter() - start
    start = time.perf_counter()
    stepper = solver.make_stepper(state, dt=spec["dt"])
    make_s = time.perf_counter() - start
    field = state.copy()
    start = time.perf_counter()
    stepper(field, 0.0, spec["t1"])  # numba compiles the stepping loop on this first call
    first = time.perf_counter() - start
    _save_atomic(out, field.data)
    cpu = time.process_time()
    steps_first = solver.info.get("steps")
    steady = []
    for _ in range(spec.get("repeats", 0)):
        field = state.copy()
        start = time.perf_counter()
        stepper(field, 0.0, spec["t1"])
        steady.append(time.perf_counter() - start)
    return dict(
        setup_s=setup,
        make_stepper_s=make_s,
        first_call_s=first,
        steady_s=steady,
        cpu_at_result_s=cpu,
        steps=steps_first,
        numba_threads=_numba_threads(),
    )


def _numba_threads() -> int | None:
    try:
        import numba

        return int(numba.config.NUMBA_NUM_THREADS)
    except ImportError:  # pragma: no cover
        return None


def run_child(spec_path: str) -> None:
    """Run one library on one problem as described by the JSON file `spec_path`."""
    process_start = time.perf_counter()
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["result"])
    y0 = np.load(spec["initial"])
    start = time.perf_counter()
    if spec["lib"] == "exponax":
        import exponax  # noqa: F401  (timed as the import, not as the first call)
    elif spec["lib"] == "pypde":
        import pde  # noqa: F401
    else:
        raise ValueError(f"unknown library {spec['lib']!r}")
    import_s = time.perf_counter() - start
    runner = _run_exponax if spec["lib"] == "exponax" else _run_pypde
    timings = runner(spec, y0, out)
    timings.update(import_s=import_s, in_process_s=time.perf_counter() - process_start)
    out.with_suffix(".json").write_text(json.dumps(timings))


if __name__ == "__main__":
    run_child(sys.argv[1])
