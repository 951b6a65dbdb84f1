r"""Fit problems on time series: the map from unconstrained free variables to residuals.

Single shooting integrates the model once from `t0` over all data. Multiple shooting cuts
the series into segments, each integrated from its own initial state (extra free
variables), and adds continuity residuals
$\sqrt{\lambda}\,(x_{j-1}(\tau_j) - s_j)/\mathrm{scale}$ that tie the segments together at
the optimum. It keeps a long or chaotic series from making the loss landscape rugged: each
segment is short, so small parameter changes cannot move it far.
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from difsim._core import Model, state_key
from difsim._fit._data import FitData, observe_states, residuals
from difsim._fit._problem import AbstractProblem, SimOptions
from difsim._fit._transforms import AbstractTransform, Identity


def _save_times(t0: float, times: np.ndarray) -> tuple[np.ndarray, bool]:
    """Solve grid: the data times, with `t0` in front when it comes first."""
    prepend = bool(t0 < times[0])
    grid = np.concatenate([[t0], times]) if prepend else times
    if grid.shape[0] < 2:
        raise ValueError(
            "a time series needs at least two time points: give data at two or more times, "
            "or t0 before the first data time"
        )
    return grid, prepend


class SingleShooting(AbstractProblem):
    """One solve from `t0` through all data times."""

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple[AbstractTransform, ...]
    data: FitData
    noise: str = eqx.field(static=True)
    sim: SimOptions
    t0: Float[Array, ""]
    prepend: bool = eqx.field(static=True)

    def residuals(self, u):
        model = self.model_from(u)
        predicted, ok = self._observe(model, self.data.times)
        r = residuals(predicted, self.data, self.noise)
        return jnp.where(ok, r, jnp.nan)

    def _observe(self, model, times):
        ts = jnp.concatenate([self.t0[None], times]) if self.prepend else times
        sol = self.sim.simulate(model, ts)
        ys = {k: v[1:] if self.prepend else v for k, v in sol.ys.items()}
        return observe_states(ys, sol.var_info, self.data.targets), sol.ok

    def predict(self, model, coords):
        return self._observe(model, coords)[0]


def single_shooting(model, free, transforms, data, noise, sim, t0) -> SingleShooting:
    _, prepend = _save_times(t0, np.asarray(data.times))
    return SingleShooting(
        model,
        tuple(free),
        tuple(transforms),
        data,
        noise,
        sim,
        jnp.asarray(t0, data.times.dtype),
        prepend,
    )


class MultipleShooting(eqx.Module):
    r"""Multiple shooting: fit `segments` pieces of the time series, each from its own
    initial state, tied together by a continuity penalty.

    **Arguments:**

    - `segments`: number of segments (at least 2; each spans at least one data interval).
    - `penalty`: weight $\lambda$ of the continuity residuals, which are scaled by each
      state variable's typical magnitude (a 1 % mismatch costs like a residual of
      $0.01\sqrt{\lambda}$). Small values keep the segments loosely coupled, which is
      what makes multiple shooting robust far from the optimum, but let them jump to fit
      noise; large ones pull the optimum onto the single-shooting one and lose that
      robustness. Default `10`; polish with a single-shooting fit from the result when the
      exact single-shooting estimate is wanted.

    **Example:**

    ```python
    import numpy as np
    import xarray as xr
    import difsim as ds

    # Each of 3 segments starts from its own fitted state; the penalty ties them together.
    t = np.linspace(0.0, 6.0, 31)
    data = xr.Dataset({"y": ("time", np.exp(-0.7 * t))}, coords={"time": t})
    result = ds.fit(ds.models.ExponentialDecay(k=0.2), data, free={"k": ds.Positive()},
                    multiple_shooting=ds.MultipleShooting(3))
    assert abs(result.parameters["k"] - 0.7) < 1e-4  # the data's exp(-0.7 t)
    ```
    """

    segments: int = eqx.field(static=True)
    penalty: float = eqx.field(default=10.0, static=True)

    def __check_init__(self):
        if not isinstance(self.segments, int) or isinstance(self.segments, bool):
            raise TypeError(
                f"multiple_shooting: segments must be an integer, got {self.segments!r}"
            )
        if self.segments < 2:
            raise ValueError(f"multiple_shooting needs at least 2 segments, got {self.segments}")
        if not self.penalty > 0:
            raise ValueError(f"multiple_shooting penalty must be positive, got {self.penalty}")


class MultipleShootingProblem(AbstractProblem):
    """The residuals of a [`MultipleShooting`][] fit (see the module docstring)."""

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple[AbstractTransform, ...]
    data: FitData
    noise: str = eqx.field(static=True)
    sim: SimOptions
    t0: Float[Array, ""]
    prepend: bool = eqx.field(static=True)
    seg_times: Float[Array, "S L"]
    owner: tuple[int, ...] = eqx.field(static=True)  # (N,) segment of each grid point
    position: tuple[int, ...] = eqx.field(static=True)  # (N,) its index in that segment
    state_names: tuple[str, ...] = eqx.field(static=True)
    extra_transforms: tuple[AbstractTransform, ...]
    scale: Float[Array, " v"]
    penalty: float = eqx.field(static=True)

    @property
    def extra_names(self):
        S = self.seg_times.shape[0]
        return tuple(f"segment{j}.{v}" for j in range(1, S) for v in self.state_names)

    def all_transforms(self):
        return self.transforms + self.extra_transforms

    def num_residuals(self):
        segments = self.seg_times.shape[0]
        return int(np.prod(self.data.values.shape)) + (segments - 1) * len(self.state_names)

    def segment_states(self, u) -> Float[Array, "S v"]:
        model = self.model_from(u)
        first = jnp.stack([model.initial_state()[v] for v in self.state_names])
        x = self.natural(u)[self.num_free() :]
        return jnp.concatenate([first[None], x.reshape(-1, len(self.state_names))])

    def residuals(self, u):
        model = self.model_from(u)
        starts = self.segment_states(u)

        def solve(start, ts):
            seg = model.replace(**{state_key(v): start[i] for i, v in enumerate(self.state_names)})
            sol = self.sim.simulate(seg, ts)
            return sol.ys, sol.ok

        ys, ok = jax.vmap(solve)(starts, self.seg_times)
        owner, position = np.asarray(self.owner), np.asarray(self.position)
        grid = {k: v[owner, position] for k, v in ys.items()}
        if self.prepend:
            grid = {k: v[1:] for k, v in grid.items()}
        info = model.initial_state().info
        r_data = residuals(observe_states(grid, info, self.data.targets), self.data, self.noise)
        ends = jnp.stack([ys[v][:-1, -1] for v in self.state_names], axis=1)  # (S-1, v)
        gap = (ends - starts[1:]) / self.scale[None, :]
        r = jnp.concatenate([r_data, jnp.sqrt(self.penalty) * gap.reshape(-1)])
        return jnp.where(jnp.all(ok), r, jnp.nan)

    def predict(self, model, coords):
        ts = jnp.concatenate([self.t0[None], coords]) if self.prepend else coords
        sol = self.sim.simulate(model, ts)
        ys = {k: v[1:] if self.prepend else v for k, v in sol.ys.items()}
        return observe_states(ys, sol.var_info, self.data.targets)


def _pad(times: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """`times` padded to `length` points by splitting the widest gaps; returns the padded
    times and the positions of the original ones (first and last stay at the ends)."""
    points = [(float(t), True) for t in times]
    while len(points) < length:
        gaps = [points[i + 1][0] - points[i][0] for i in range(len(points) - 1)]
        i = int(np.argmax(gaps))
        points.insert(i + 1, (0.5 * (points[i][0] + points[i + 1][0]), False))
    padded = np.array([t for t, _ in points])
    return padded, np.array([i for i, (_, real) in enumerate(points) if real])


def _segments(grid: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut the solve grid `(N,)` at `bounds` (`S + 1` grid indices) into `S` segments.

    **Returns:** `(seg_times, owner, position)`: each segment's times padded to one length
    `(S, L)`, and for every grid point the segment that owns it and its index there, `(N,)`.
    """
    S, N = bounds.shape[0] - 1, grid.shape[0]
    length = int(np.max(np.diff(bounds))) + 1
    seg_times, owner, position = [], np.zeros(N, int), np.zeros(N, int)
    for j in range(S):
        idx = np.arange(bounds[j], bounds[j + 1] + 1)
        padded, where = _pad(grid[idx], length)
        seg_times.append(padded)
        own = idx if j == S - 1 else idx[:-1]  # a boundary point belongs to the later segment
        owner[own] = j
        position[own] = where[: len(own)]
    return np.stack(seg_times), owner, position


def _segment_starts(names, bounds, data: FitData, guess, offset: int) -> np.ndarray:
    """Initial states `(S - 1, v)` of segments 1, 2, …: the data where a state variable is
    observed directly there, else the guess trajectory. `offset`: grid index of the first
    data point (1 when `t0` is prepended)."""
    values, mask = np.asarray(data.values), np.asarray(data.mask)
    starts = np.zeros((bounds.shape[0] - 2, len(names)))
    for j in range(1, bounds.shape[0] - 1):
        i = bounds[j]
        for k, v in enumerate(names):
            starts[j - 1, k] = guess[v][i]
            for col, target in enumerate(data.targets):
                if target == v and mask[i - offset, col]:
                    starts[j - 1, k] = values[i - offset, col]
    return starts


def multiple_shooting(
    spec: MultipleShooting,
    model: Model,
    free: Sequence[str],
    transforms: Sequence[AbstractTransform],
    all_transforms: dict[str, AbstractTransform],
    data: FitData,
    noise: str,
    sim: SimOptions,
    t0: float,
    guess: dict[str, np.ndarray],
) -> tuple[MultipleShootingProblem, np.ndarray]:
    """Build the problem and the initial values (natural units) of the segment states.

    `guess[v]` is state variable `v` of the initial-guess trajectory on the solve grid;
    observed variables start from the data instead where the data are available.
    """
    grid, prepend = _save_times(t0, np.asarray(data.times, dtype=np.float64))
    N, S = grid.shape[0], spec.segments
    if S > N - 1:
        raise ValueError(
            f"multiple_shooting={S} segments need at least {S + 1} time points; there are {N}"
        )
    state = model.initial_state()
    names = tuple(state.names)
    for v in names:
        if jnp.ndim(state[v]) != 0:
            raise ValueError(f"multiple shooting needs scalar state variables; {v!r} is not")
    bounds = np.round(np.linspace(0, N - 1, S + 1)).astype(int)
    seg_times, owner, position = _segments(grid, bounds)
    starts = _segment_starts(names, bounds, data, guess, 1 if prepend else 0)
    if not np.all(np.isfinite(starts)):
        raise ValueError(
            "multiple shooting: the initial guess fails to solve and the data cannot give "
            "every segment's initial state; start from a guess that solves"
        )
    extra = tuple(all_transforms.get(state_key(v), Identity()) for v in names) * (S - 1)
    for j in range(1, S):
        for k, v in enumerate(names):
            if not bool(extra[k].contains(starts[j - 1, k])):
                raise ValueError(
                    f"multiple shooting: initial value {starts[j - 1, k]:g} of segment {j}'s "
                    f"{v!r} lies outside the range of its transform {extra[k].describe()}"
                )
    typical = np.array([np.nanmean(np.abs(guess[v])) for v in names])
    scale = np.where(np.isfinite(typical) & (typical > 0), typical, 1.0)
    dtype = data.times.dtype
    problem = MultipleShootingProblem(
        model,
        tuple(free),
        tuple(transforms),
        data,
        noise,
        sim,
        jnp.asarray(t0, dtype),
        prepend,
        jnp.asarray(seg_times, dtype),
        tuple(owner.tolist()),
        tuple(position.tolist()),
        names,
        extra,
        jnp.asarray(scale, dtype),
        float(spec.penalty),
    )
    return problem, starts.reshape(-1)
