r"""A learned closure (issue 28, point 5c): a small convolutional network that corrects
viscous Burgers on a coarse grid, trained with the solver in the loop on fine-grid data.

    truth:   u_t + (u^2/2)_x = nu u_xx  on [0, 2 pi), periodic, nu = 0.1, Fourier
             pseudo-spectral on 256 points (2/3 dealiasing, Tsit5 at rtol 1e-8), then
             averaged over each cell of the coarse grid (a box filter of width 2 pi / 32)
    coarse:  difsim's `Burgers` on 32 cells (8x coarser): MUSCL (van Leer) fluxes with
             Lax-Friedrichs splitting, the second-order Laplacian, Bosh3 at a fixed 0.05
    closed:  the coarse right-hand side minus (F_{i+1/2} - F_{i-1/2}) / dx, with the face
             flux F = CNN(u, u^2): three `eqx.nn.Conv1d` layers (kernel 5, circular padding,
             16 channels, GELU), 1,553 weights, the last layer started at zero

The correction is a flux difference, so the closed model conserves the mean of u exactly,
as the filtered equation does. Initial fields are random smooth waves,
u0 = sum_{k=1..3} (a_k cos kx + b_k sin kx) with a_k, b_k ~ N(0, (0.6/k)^2): the coarse
model starts from their exact box average (each mode times the filter's transfer function),
so the error at t = 0 is zero and everything after it is the coarse solver's.

Training is `ds.fit` (Adam, a cosine schedule, gradient clipping, minibatches over
experiments): the data hold one experiment per initial field, its six coefficients as
each experiment's own parameters, the coarse-cell averages at t = 0.1 ... 2 as 32 observed
variables (`u00` ... `u31`, each observed by `observe=` as one cell of the state). Held-out
initial fields come from another seed. The metric: the RMS error over the trajectory
(every cell, every saved time) against the filtered fine solution, with and without the
closure.

Measured (the full run, `main()`: 32 training and 16 held-out fields, 600 Adam steps in
minibatches of 8): the closure cuts the RMS error on the held-out fields 5.9x (1.21e-2 to
2.04e-3; training fields 9.9x); with the network's seed 1 and 2, 5.5x and 6.0x. Training
takes 100-110 s of CPU (165-250 s on 2 shared cores). `tests/test_burgers_closure.py` runs
a smaller one (6 fields, 40 steps: 1.5x held out).

Run: `python experiments/burgers_closure.py [--plot [PNG]]` (the figure: by default
`docs/img/burgers_closure.png`).
"""

import argparse
import dataclasses
import math
import time
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

import difsim as ds
from difsim.models import Burgers

jax.config.update("jax_enable_x64", True)

L, NU = 2 * math.pi, 0.1  # domain length, viscosity (dimensionless)
COARSE, RATIO = 32, 8  # coarse cells, fine points per coarse cell
MODES = 3  # Fourier modes of the initial fields
AMPLITUDE = 0.6  # standard deviation of mode k's coefficients: AMPLITUDE / k
TIMES = np.round(np.arange(1, 21) * 0.1, 10)  # observation times, t0 = 0
NAMES = tuple(f"{c}{k}" for c in "ab" for k in range(1, MODES + 1))  # a1 a2 a3 b1 b2 b3
CELLS = tuple(f"u{i:02d}" for i in range(COARSE))
# The box filter of one coarse cell on the fine grid: the trapezoid rule over its 9 points.
WINDOW = np.r_[0.5, np.ones(RATIO - 1), 0.5] / RATIO
OFFSETS = np.arange(-RATIO // 2, RATIO // 2 + 1)


def transfer(k: int) -> float:
    """The filter's factor on the mode $\\cos kx$ (and $\\sin kx$): exact for the window."""
    return float(np.sum(WINDOW * np.cos(k * OFFSETS * L / (COARSE * RATIO))))


def fourier_field(coefficients, x, factors=None):
    r"""$\sum_k f_k (a_k \cos kx + b_k \sin kx)$ from `coefficients` `{"a1": ..., ...}`
    (numbers, or arrays `(n,)` for `n` fields `(n, len(x))`), `f_k` the `factors` (or 1)."""
    u = 0.0
    for k in range(1, MODES + 1):
        f = 1.0 if factors is None else factors[k - 1]
        a, b = (jnp.asarray(coefficients[f"{c}{k}"]) for c in "ab")
        wave = jnp.tensordot(a, jnp.cos(k * x), axes=0) + jnp.tensordot(b, jnp.sin(k * x), axes=0)
        u = u + f * wave
    return u


class SpectralBurgers(ds.Model):
    """Viscous Burgers, Fourier pseudo-spectral (2/3-rule dealiased): the fine-grid truth."""

    nu: float = ds.param(NU, description="viscosity")
    grid: ds.Grid = ds.param(ds.Grid.periodic(COARSE * RATIO, L), description="fine grid")
    state = ds.State(u=ds.Var(jnp.zeros(COARSE * RATIO), description="velocity"))
    solver_defaults: ClassVar[dict[str, Any]] = {"solver": "tsit5", "controller": "pid"}

    def rhs_nonstiff(self, t, s):
        derivative = ds.spectral.derivative_symbol(self.grid, "x", dtype=s.u.dtype)
        multiplier = jnp.where(ds.spectral.dealias_mask(self.grid), -0.5 * derivative, 0)
        return dict(
            u=ds.spectral.irfftn(multiplier * ds.spectral.rfftn(s.u**2, self.grid), self.grid)
        )

    def rhs_stiff(self, t, s):
        return dict(u=self.nu * ds.spectral.laplacian(s.u, self.grid))


class Closure(eqx.Module):
    """`u -> F`, the learned flux at the faces $i + 1/2$ of a periodic 1-D grid."""

    layers: tuple[eqx.nn.Conv1d, ...]

    def __init__(self, width: int = 16, kernel: int = 5, *, key):
        keys = jax.random.split(key, 3)

        def conv(n_in, n_out, k):
            return eqx.nn.Conv1d(n_in, n_out, kernel, padding=kernel // 2,
                                 padding_mode="CIRCULAR", key=k)  # fmt: skip

        last = conv(width, 1, keys[2])  # started at zero: the untrained closure adds nothing
        last = eqx.tree_at(lambda c: (c.weight, c.bias), last,
                           (jnp.zeros_like(last.weight), jnp.zeros_like(last.bias)))  # fmt: skip
        self.layers = (conv(2, width, keys[0]), conv(width, width, keys[1]), last)

    def __call__(self, u):
        h = jnp.stack([u, u * u])
        for layer in self.layers[:-1]:
            h = jax.nn.gelu(layer(h))
        return self.layers[-1](h)[0]


class ClosedBurgers(Burgers):
    """`Burgers` on a coarse periodic grid plus a learned flux (none: the plain scheme),
    started from the box average of the Fourier series `a1 ... b3`."""

    a1: float = 0.0
    a2: float = 0.0
    a3: float = 0.0
    b1: float = 0.0
    b2: float = 0.0
    b3: float = 0.0
    closure: Closure | None = None
    solver_defaults: ClassVar[dict[str, Any]] = {
        "solver": "bosh3",
        "dt0": 0.05,
        "controller": "constant",
    }

    def initial_state(self) -> ds.State:
        factors = [transfer(k) for k in range(1, MODES + 1)]
        coefficients = {name: getattr(self, name) for name in NAMES}
        u = fourier_field(coefficients, self.grid.x, factors)
        return self.state.with_values({"u": jnp.broadcast_to(u, self.grid.shape)})

    def rhs_nonstiff(self, t, s):
        du = Burgers.rhs_nonstiff(self, t, s)["u"]
        if self.closure is None:
            return dict(u=du)
        flux = self.closure(s.u)
        return dict(u=du - (flux - jnp.roll(flux, 1)) / self.grid.dx[0])


def coarse_model(closure: Closure | None = None) -> ClosedBurgers:
    grid = ds.Grid.periodic(COARSE, L)
    return ClosedBurgers(nu=NU, grid=grid, scheme="muscl", closure=closure)


def initial_fields(seed: int, n: int) -> dict[str, np.ndarray]:
    """`n` random initial fields: `{coefficient: (n,)}`."""
    scale = np.tile(AMPLITUDE / np.arange(1, MODES + 1), 2)
    draws = np.random.default_rng(seed).standard_normal((n, 2 * MODES)) * scale
    return {name: draws[:, j] for j, name in enumerate(NAMES)}


def restrict(u_fine):
    """Average a fine periodic field (last axis) over each coarse cell."""
    half = RATIO // 2
    padded = np.concatenate([u_fine[..., -half:], u_fine, u_fine[..., :half]], axis=-1)
    return np.stack(
        [padded[..., RATIO * j : RATIO * j + RATIO + 1] @ WINDOW for j in range(COARSE)], -1
    )


def fine_start(fields: dict) -> np.ndarray:
    """`(n, 256)`: the initial fields on the fine grid."""
    return np.asarray(fourier_field(fields, SpectralBurgers().grid.x))


def fine_solution(u0: np.ndarray, times=TIMES) -> np.ndarray:
    """`(n, time, 256)`: the fine solution from each initial field `u0[i]` at `times`."""
    t = np.concatenate([[0.0], times])
    sol = ds.simulate_ensemble(SpectralBurgers(), {"state.u": jnp.asarray(u0)}, t=t,
                               rtol=1e-8, atol=1e-8, max_steps=100_000)  # fmt: skip
    return np.asarray(sol.ys["u"])[:, 1:]


def reference(fields: dict, times=TIMES) -> np.ndarray:
    """`(n, time, cell)`: the fine solution of each initial field, averaged onto the coarse
    cells, at `times`."""
    return restrict(fine_solution(fine_start(fields), times))


def dataset(fields: dict, truth: np.ndarray) -> xr.Dataset:
    """Experiments for `ds.fit`: each cell an observed variable, each field's coefficients
    its own parameters."""
    dims = ("experiment", "time")
    data = {cell: (dims, truth[:, :, i]) for i, cell in enumerate(CELLS)}
    data |= {name: ("experiment", values) for name, values in fields.items()}
    labels = [f"ic{i}" for i in range(truth.shape[0])]
    return xr.Dataset(data, coords={"time": TIMES, "experiment": labels})


def train(data: xr.Dataset, *, steps: int, batch_size: int | None, seed: int = 0,
          learning_rate: float = 1e-2, progress: bool = False) -> ds.FitResult:  # fmt: skip
    """Fit the closure's weights by Adam through the coarse solver."""
    model = coarse_model(Closure(key=jax.random.key(seed)))
    observe = {cell: (lambda s, i=i: s.u[i]) for i, cell in enumerate(CELLS)}
    schedule = optax.cosine_decay_schedule(learning_rate, steps, alpha=0.05)
    return ds.fit(model, data, ["closure"], observe=observe, t0=0.0, optimizer="adam",
                  learning_rate=schedule, clip=1.0, steps=steps, batch_size=batch_size,
                  seed=seed, progress=progress)  # fmt: skip


@eqx.filter_jit
def trajectories(model: ClosedBurgers, fields: dict, times) -> jax.Array:
    """`(n, time, cell)`: the coarse model from each initial field."""

    def one(point):
        m = dataclasses.replace(model, **dict(zip(NAMES, point, strict=True)))
        return ds.simulate(m, jnp.concatenate([jnp.zeros(1), times])).ys["u"][1:]

    return jax.vmap(one)(tuple(jnp.asarray(fields[n]) for n in NAMES))


def mean_squares(model, fields, truth, times=TIMES) -> np.ndarray:
    """`(n,)`: each field's mean square error over every time and cell against `truth`."""
    predicted = trajectories(model, fields, jnp.asarray(times))
    return np.asarray(jnp.mean((predicted - truth) ** 2, axis=(1, 2)))


def rms(squares) -> float:
    return float(np.sqrt(np.mean(squares)))


def main(n_train: int = 32, n_test: int = 16, steps: int = 600, batch_size: int = 8,
         seed: int = 0, plot: str | None = None):  # fmt: skip
    start = time.perf_counter()
    train_fields, test_fields = initial_fields(0, n_train), initial_fields(1, n_test)
    fields = {k: np.r_[train_fields[k], test_fields[k]] for k in NAMES}
    both = reference(fields)  # one compiled ensemble for both sets
    train_truth, test_truth = both[:n_train], both[n_train:]
    print(f"fine reference ({n_train} + {n_test} fields, {COARSE * RATIO} points): "
          f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    start, cpu = time.perf_counter(), time.process_time()
    data = dataset(train_fields, train_truth)
    result = train(data, steps=steps, batch_size=batch_size, seed=seed)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(result.summary())
    print(f"training: {steps} Adam steps, batches of {batch_size}, seed {seed}: {seconds:.1f} s "
          f"({cpu:.1f} s CPU)")  # fmt: skip
    plain, closed = coarse_model(Closure(key=jax.random.key(0))), result.model  # same shapes
    before, after = (mean_squares(m, fields, both) for m in (plain, closed))
    print("RMS error over t = 0.1 ... 2 against the filtered fine solution:")
    for label, part in (("training", slice(0, n_train)), ("held-out", slice(n_train, None))):
        b, a = rms(before[part]), rms(after[part])
        print(f"  {label:8s}  coarse {b:.3e}  closed {a:.3e}  ratio {b / a:.2f}")
    if plot:
        figure(plain, closed, test_fields, test_truth, plot)
    return result


def figure(plain, closed, fields, truth, path, case: int = 0):
    """One held-out field at t = 1 (filtered truth, coarse, closed), the two models' errors
    along x at t = 0.5 and 1, and the RMS error over time of all held-out fields."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    times = jnp.asarray(TIMES)
    coarse, fixed = (np.asarray(trajectories(m, fields, times)) for m in (plain, closed))
    x = np.asarray(ds.Grid.periodic(COARSE, L).x)
    at = {t: int(np.argmin(np.abs(TIMES - t))) for t in (0.5, 1.0)}
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.4), constrained_layout=True)
    i = at[1.0]
    axes[0].plot(x, truth[case, i], "k-", lw=3, alpha=0.35, label="fine, cell averages")
    axes[0].plot(x, coarse[case, i], "C3.--", label=f"coarse ({COARSE} cells)")
    axes[0].plot(x, fixed[case, i], "C0.-", lw=1, label="coarse + learned closure")
    axes[0].set(title=f"held-out field {case}, t = 1", xlabel="x", ylabel="u")
    axes[0].legend(fontsize=8)
    for ax, (t, i) in zip(axes[1:3], at.items(), strict=True):
        ax.axhline(0.0, color="k", lw=0.5)
        ax.plot(x, coarse[case, i] - truth[case, i], "C3.--", label="coarse")
        ax.plot(x, fixed[case, i] - truth[case, i], "C0.-", label="closed")
        ax.set(title=f"error against the fine solution, t = {t:g}", xlabel="x")
        ax.legend(fontsize=8)
    for label, u, style in (("coarse", coarse, "C3--"), ("closed", fixed, "C0-")):
        axes[3].plot(TIMES, np.sqrt(np.mean((u - truth) ** 2, axis=(0, 2))), style, label=label)
    axes[3].set(title=f"RMS error, {truth.shape[0]} held-out fields", xlabel="t",
                yscale="log")  # fmt: skip
    axes[3].legend(fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--train", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0, help="the network's and batches' seed")
    parser.add_argument("--plot", nargs="?", const="docs/img/burgers_closure.png")
    args = parser.parse_args()
    main(n_train=args.train, steps=args.steps, seed=args.seed, plot=args.plot)
