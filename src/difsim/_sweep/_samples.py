"""Monte Carlo paths of a stochastic model: `samples` paths at every point of a sweep spec.

Path `s` of point `p` has the global index `g = p · samples + s`, and its PRNG key is
`jax.random.fold_in(jax.random.key(seed), g)`: a function of the seed and the index alone,
so a path is the same however the sweep is chunked, on however many devices, and after a
resume. [`PathSweep`][] is the spec of a sweep that keeps each path (dims of the spec, then
`path`); a sweep that keeps statistics over the paths runs in `_monte_carlo`.
"""

import functools
import hashlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import (
    KEYS,
    Layout,
    Model,
    SaveSpec,
    check_saves,
    check_seed,
    sde_solver_settings,
)
from difsim._resources import ResourceError
from difsim._sweep._options import SolverChoice, SweepOptions
from difsim._sweep._spec import AbstractSweep

PATH_DIM = "path"
# The entry of a point that carries its path's key data (popped before the point is put
# into the model): a name no parameter can have.
KEY_ENTRY = "__key__"
MAX_PATHS = 2**32  # fold_in takes a 32-bit index: the most paths one sweep can tell apart


def check_samples(samples: Any, seed: Any) -> tuple[int, int]:
    """`(samples, seed)` checked: a positive number of paths, a seed in `[0, 2**63)`.

    **Raises:** `ValueError` naming the argument.
    """
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
        raise ValueError(f"samples must be a positive number of paths, got {samples!r}")
    return int(samples), check_seed(seed)


def check_paths(samples: int, points: int) -> None:
    """Refuse, before any work, a Monte Carlo sweep of more paths than their keys can tell
    apart: path `g` has the key `fold_in(key(seed), g)`, whose `g` is a 32-bit integer, so
    a sweep holds at most `MAX_PATHS` (2**32) paths over all its points. (Memory is not the
    bound of a sweep that keeps statistics: they stream, chunk by chunk.)

    **Raises:** `ResourceError` (a `ValueError`) under `samples`, with the count and the
    limit.
    """
    total = samples * points
    if total <= MAX_PATHS:
        return
    where = "" if points == 1 else f" ({points:,} points x {samples:,} samples)"
    raise ResourceError(
        f"samples: a Monte Carlo sweep of {total:,} paths{where} is more than one sweep can "
        f"tell apart, {MAX_PATHS:,} (2**32: path g's key is fold_in(key(seed), g), with a "
        "32-bit g); use fewer samples, or run the paths as several sweeps with different "
        "seeds",
        "samples",
        total,
        MAX_PATHS,
    )


@functools.lru_cache(maxsize=4)
def _key_data_fn():
    def one(base, index):
        return jax.random.key_data(jax.random.fold_in(base, index))

    return jax.jit(jax.vmap(one, in_axes=(None, 0)))


def path_keys(seed: int, start: int, stop: int) -> np.ndarray:
    """Key data `(stop - start, *key_shape)` (uint32) of the paths with global indices
    `start ≤ g < stop`: `key_data(fold_in(key(seed), g))`."""
    return path_keys_at(seed, np.arange(start, stop))


def path_keys_at(seed: int, index: np.ndarray) -> np.ndarray:
    """Key data of the paths with global indices `index` (any order; compiled once per
    length)."""
    if index.size and int(np.max(index)) >= MAX_PATHS:
        raise ValueError(f"a Monte Carlo sweep holds at most 2**32 paths, got {np.max(index)}")
    index = jnp.asarray(np.asarray(index, np.uint32))
    return np.asarray(_key_data_fn()(jax.random.key(seed), index))


def as_key(data) -> jax.Array:
    """The typed key of one path's key data (as `path_keys` gives it)."""
    return jax.random.wrap_key_data(data)


class PathSweep(AbstractSweep):
    """Every point of `base` with `samples` paths each: dims `(*base.dims, "path")`.

    **Arguments:** `base` (the parameter spec, or `None` for the model as it is),
    `samples` (paths per point), `seed` (of the paths' keys; see the module docstring).
    """

    def __init__(self, base: AbstractSweep | None, samples: int, seed: int = 0):
        self.base = base
        self.samples, self.seed = check_samples(samples, seed)
        check_paths(self.samples, 1 if base is None else base.size)  # before any work
        if base is not None and PATH_DIM in base.dims:
            raise ValueError(f"the parameter spec has a dimension {PATH_DIM!r}; rename it (dim=)")

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "paths" if self.base is None else self.base.kind

    keys = property(lambda self: () if self.base is None else self.base.keys)
    dims = property(lambda self: (*self.base_dims, PATH_DIM))
    shape = property(lambda self: (*self.base_shape, self.samples))
    base_dims = property(lambda self: () if self.base is None else self.base.dims)
    base_shape = property(lambda self: () if self.base is None else self.base.shape)

    @property
    def n_points(self) -> int:
        """Number of parameter points (1 without a base spec)."""
        return 1 if self.base is None else self.base.size

    def base_points(self, index: np.ndarray, dtype: Any) -> dict[str, np.ndarray]:
        """`{key: values}` of the parameter points with flat indices `index`."""
        if self.base is None or index.size == 0:
            return {}
        lo, hi = int(index.min()), int(index.max()) + 1
        values = self.base.points(lo, hi, dtype)
        return {k: v[index - lo] for k, v in values.items()}

    def points(self, start, stop, dtype):
        index = np.arange(start, stop)
        out = self.base_points(index // self.samples, dtype)
        out[KEY_ENTRY] = path_keys(self.seed, start, stop)
        return out

    def coords(self, dtype):
        return {} if self.base is None else self.base.coords(dtype)

    def describe(self):
        base = {} if self.base is None else self.base.describe()
        return {**base, "kind": self.kind, "samples": self.samples, "seed": self.seed,
                "path_dim": PATH_DIM}  # fmt: skip

    def fingerprint(self, dtype: Any) -> str:
        inner = "none" if self.base is None else self.base.fingerprint(dtype)
        text = f"{inner}:paths={self.samples}:seed={self.seed}"
        return hashlib.sha256(text.encode()).hexdigest()

    def check(self, model) -> None:
        if self.base is not None:
            self.base.check(model)

    def __repr__(self):
        return f"PathSweep({self.base!r}, samples={self.samples}, seed={self.seed})"


def sde_solver_choice(model: Model, options: SweepOptions) -> SolverChoice:
    """The [`SolverChoice`][] of a stochastic model's sweep: its settings resolved once by
    the noise (`simulate`'s rules for SDEs, the save times on the steps of a fixed step);
    the solver as its object (SDE solver names are not ODE solver names), the
    controller's text naming the Brownian path too (part of what the settings hash
    identifies)."""
    layout = Layout.of(model.initial_state())
    given = {k: getattr(options, k) for k in KEYS}
    settings = sde_solver_settings(model, layout, brownian=options.brownian, **given)
    check_saves(settings, SaveSpec(t0=options.t0, t1=options.t1, save=options.save))
    if np.ndim(settings.atol):
        raise ValueError("atol: ds.sweep takes one absolute tolerance")
    return SolverChoice(
        settings=settings,
        solver=settings.solver,
        controller=f"{settings.controller_requested}, Brownian path {settings.brownian}",
        rtol=float(settings.rtol),
        atol=float(settings.atol),
        dt0=settings.dt0,
        max_steps=int(settings.max_steps),
    )
