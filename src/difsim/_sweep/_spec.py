"""Sweep specifications: which points a sweep visits, and how they are labelled.

A spec maps *keys* (parameter names, or `"state.<var>"` for an initial value) to values:

- [`GridSweep`][]: the Cartesian product of per-key value lists; one dimension per key.
- [`ZipSweep`][]: paired lists of equal length; one dimension (`"sample"`).
- [`RandomSweep`][]: independent draws from per-key distributions ([`Uniform`][],
  [`LogUniform`][], [`Normal`][]), plain or Latin hypercube; one dimension (`"sample"`).

Points are numbered in C order (the last grid key varies fastest); a sweep is run over that
flat index in chunks, and the result is reshaped to the spec's dimensions at the end.
"""

import abc
import hashlib
import math
import operator
import types
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from difsim._core import Model, check_seed
from difsim._sweep._distributions import AbstractDistribution
from difsim._sweep._keys import check_keys


class AbstractSweep(abc.ABC):
    """What every sweep spec provides (see the module docstring for the point order)."""

    kind: ClassVar[str]

    @property
    @abc.abstractmethod
    def keys(self) -> tuple[str, ...]:
        """The swept keys, in the order given."""

    @property
    @abc.abstractmethod
    def dims(self) -> tuple[str, ...]:
        """Names of the output dimensions."""

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Length of each output dimension."""

    @abc.abstractmethod
    def points(self, start: int, stop: int, dtype: Any) -> dict[str, np.ndarray]:
        """`{key: values}` of the points with flat indices `start ≤ i < stop`, each of
        shape `(stop - start,)` in `dtype`."""

    @abc.abstractmethod
    def coords(self, dtype: Any) -> dict[str, tuple[tuple[str, ...], np.ndarray, dict]]:
        """Coordinates of the output, `{key: (dims, values, attrs)}`, in `dtype`."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """A JSON-able summary, e.g. for output attributes."""

    def signature(self) -> Any:
        """What tells this spec from another of its type, dims and shape besides its
        points' values (compared apart): hashable. By default its description."""
        return repr(self.describe())

    def point_values(self) -> dict[str, np.ndarray]:
        """`{key: float64 coordinate values}` as the spec holds them (no copy where it
        can: do not write into them), to compare two specs' points cheaply."""
        return {k: v for k, (_, v, _) in self.coords(np.float64).items()}

    @property
    def size(self) -> int:
        """Number of points (trajectories)."""
        return math.prod(self.shape)

    def fingerprint(self, dtype: Any) -> str:
        """A hash of every point (in `dtype`): equal fingerprints ⇔ the same points."""
        digest = hashlib.sha256(repr((self.kind, self.dims, self.shape)).encode())
        for name, (dims, values, _) in self.coords(dtype).items():
            digest.update(repr((name, dims, values.dtype.str)).encode())
            digest.update(np.ascontiguousarray(values).tobytes())
        return digest.hexdigest()

    def check(self, model: Model | type[Model]) -> None:
        """Raise `ValueError` naming the key if one is neither a scalar parameter of
        `model` nor `"state.<var>"` of a scalar state variable."""
        check_keys(self.keys, model, type(self).__name__)


_SCALARS_ONLY = "only scalar parameters and initial values can be swept"


def _as_values(key: str, values: Any, what: str) -> np.ndarray:
    try:
        array = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        # Named by type, not `repr`: a list of networks prints over many lines.
        kinds = sorted({type(v).__name__ for v in values} if isinstance(values, list | tuple)
                       else {type(values).__name__})  # fmt: skip
        raise ValueError(
            f"{what} {key!r}: expected a 1-D list of numbers ({_SCALARS_ONLY}), got "
            f"{'a list of ' if isinstance(values, list | tuple) else ''}{', '.join(kinds)}"
        ) from None
    if array.ndim != 1:
        raise ValueError(
            f"{what} {key!r}: expected a 1-D list of numbers ({_SCALARS_ONLY}: one number "
            f"per point), got shape {array.shape}"
        )
    if array.size == 0:
        raise ValueError(f"{what} {key!r}: the list of values is empty")
    # A sum of finite values is finite unless it overflows, and a NaN or an infinity makes
    # it NaN or infinite: one pass and no temporary array for the usual case.
    if not math.isfinite(np.add.reduce(array)) and not np.isfinite(array).all():
        raise ValueError(f"{what} {key!r}: values must be finite")
    return array


def _frozen(values: dict[str, np.ndarray]) -> Mapping[str, np.ndarray]:
    """A spec's `{key: values}`, read-only: its keys and lengths were checked and are read
    by every sweep of it (the values' contents may still be written into, as the caller's
    array they may be: a sweep compares them, never trusts them)."""
    return types.MappingProxyType(values)


# The keys, dims, shape and size of a grid or zip spec, computed once at construction and
# read through C getters: a repeated sweep reads them a dozen times, each read of a Python
# property a visible cost on cold caches.
_get_keys = operator.attrgetter("_keys")
_get_shape = operator.attrgetter("_shape")
_get_size = operator.attrgetter("_size")


def _check_mapping(values: Any, cls: str) -> None:
    # `dict` first: a check against the `Mapping` ABC alone goes through Python code.
    if not isinstance(values, (dict, Mapping)) or not values:
        raise ValueError(f"{cls} needs a non-empty dict {{key: values}}, got {values!r}")
    for key in values:
        if not isinstance(key, str) or not key:
            raise ValueError(f"{cls}: keys must be parameter names or 'state.<var>', got {key!r}")


class GridSweep(AbstractSweep):
    """The Cartesian product of per-key values: one output dimension per key.

    ```python
    import numpy as np
    import difsim as ds

    spec = ds.GridSweep({"rho": np.linspace(0, 28, 8), "state.x": [1.0, 2.0]})
    assert spec.shape == (8, 2) and spec.size == 16  # every combination: 8 × 2 points
    ```

    **Arguments:** `values`, `{key: 1-D values}`; keys are parameter names or
    `"state.<var>"`. The dimension of each key is named after the key, with the values as
    its coordinate.
    """

    kind = "grid"

    def __init__(self, values: Mapping[str, ArrayLike]):
        _check_mapping(values, "GridSweep")
        self.values = _frozen({k: _as_values(k, v, "GridSweep key") for k, v in values.items()})
        self._keys = tuple(self.values)
        self._shape = tuple(v.size for v in self.values.values())
        self._size = math.prod(self._shape)

    keys = dims = property(_get_keys)
    shape = property(_get_shape)
    size = property(_get_size)

    def points(self, start, stop, dtype):
        if len(self.values) == 1:  # one key: the points are its values
            return {k: v[start:stop].astype(dtype) for k, v in self.values.items()}
        index = np.unravel_index(np.arange(start, stop), self.shape)
        return {k: v.astype(dtype)[i] for (k, v), i in zip(self.values.items(), index)}

    def coords(self, dtype):
        return {k: ((k,), v.astype(dtype), {}) for k, v in self.values.items()}

    def describe(self):
        return {"kind": self.kind, "shape": list(self.shape), "keys": list(self.keys)}

    def point_values(self):
        return self.values

    def signature(self):  # its description is its kind, keys and shape
        return None

    def __reduce__(self):  # pickle and copy: the read-only mapping is rebuilt
        return GridSweep, (dict(self.values),)

    def __repr__(self):
        return f"GridSweep({{{_summary(self.values)}}})"


class ZipSweep(AbstractSweep):
    """Paired values: point `i` takes the `i`-th value of every key (equal lengths).

    **Arguments:** `values`, `{key: 1-D values}`; `dim`, the name of the one output
    dimension (default `"sample"`), along which every key is a coordinate.

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    spec = ds.ZipSweep({"sigma": np.array([8.0, 10.0, 12.0]), "rho": np.array([20.0, 28.0, 35.0])})
    assert spec.shape == (3,) and spec.dims == ("sample",)  # values paired, one per point
    ```
    """

    kind = "zip"

    def __init__(self, values: Mapping[str, ArrayLike], dim: str = "sample"):
        _check_mapping(values, "ZipSweep")
        self.values = _frozen({k: _as_values(k, v, "ZipSweep key") for k, v in values.items()})
        lengths = {k: v.size for k, v in self.values.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                "ZipSweep pairs values, so every key needs the same number of values; got "
                + ", ".join(f"{k!r}: {n}" for k, n in lengths.items())
            )
        self.dim = _check_dim(dim, self.values, "ZipSweep")
        self._keys, self._dims = tuple(self.values), (self.dim,)
        self._shape = (next(iter(lengths.values())),)
        self._size = self._shape[0]

    keys = property(_get_keys)
    dims = property(operator.attrgetter("_dims"))
    shape = property(_get_shape)
    size = property(_get_size)

    def points(self, start, stop, dtype):
        return {k: v[start:stop].astype(dtype) for k, v in self.values.items()}

    def coords(self, dtype):
        return {k: ((self.dim,), v.astype(dtype), {}) for k, v in self.values.items()}

    def describe(self):
        return {"kind": self.kind, "shape": list(self.shape), "keys": list(self.keys)}

    def point_values(self):
        return self.values

    def signature(self):  # its description is its kind, keys and shape
        return None

    def __reduce__(self):
        return ZipSweep, (dict(self.values), self.dim)

    def __repr__(self):
        return f"ZipSweep({{{_summary(self.values)}}}, dim={self.dim!r})"


def _summary(values: dict[str, np.ndarray]) -> str:
    return ", ".join(
        f"{k!r}: {v.size} values in [{v.min():g}, {v.max():g}]" for k, v in values.items()
    )


def _check_dim(dim: Any, keys, cls: str) -> str:
    if not isinstance(dim, str) or not dim:
        raise ValueError(f"{cls}: dim must be a non-empty string, got {dim!r}")
    if dim in keys:
        raise ValueError(f"{cls}: dim {dim!r} is also a swept key; choose another dim name")
    return dim


class RandomSweep(AbstractSweep):
    """Random points: each key drawn from its distribution, independently.

    ```python
    import difsim as ds

    spec = ds.RandomSweep({"beta": ds.LogUniform(0.5, 5.0), "gamma": ds.Uniform(0.1, 1.0)},
                          samples=1000, seed=0, method="lhs")
    assert spec.size == 1000  # Latin hypercube: each tenth of [0.1, 1] gets 100 gammas
    ```

    **Arguments:**

    - `distributions`: `{key: distribution}` ([`Uniform`][], [`LogUniform`][], [`Normal`][]).
    - `samples`: number of points.
    - `seed`: integer seed of the JAX PRNG key `jax.random.key(seed)`; the same seed gives
      bitwise the same points on any machine with the same JAX version.
    - `method`: `"random"` (independent uniforms) or `"lhs"` (Latin hypercube: each key's
      range is cut into `samples` strata of equal probability, each holding exactly one
      point, and the strata are paired by independent random permutations).
    - `dim`: the name of the one output dimension (default `"sample"`).

    Each key `j` (in the order given) gets its own key `jax.random.split(key, n)[j]`; a
    uniform `u ∈ (0, 1)` (for `"lhs"`, `(perm + u) / samples`) is mapped through the
    distribution's quantile function. Draws are made in float64 whatever the run's
    precision, then rounded to it.
    """

    def __init__(
        self,
        distributions: Mapping[str, AbstractDistribution],
        samples: int,
        seed: int = 0,
        method: Literal["random", "lhs"] = "random",
        dim: str = "sample",
    ):
        _check_mapping(distributions, "RandomSweep")
        for key, dist in distributions.items():
            if not isinstance(dist, AbstractDistribution):
                raise ValueError(
                    f"RandomSweep key {key!r}: expected a distribution (ds.Uniform, "
                    f"ds.LogUniform, ds.Normal), got {dist!r}"
                )
        if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 1:
            raise ValueError(f"RandomSweep: samples must be a positive integer, got {samples!r}")
        check_seed(seed, "RandomSweep: seed")
        if method not in ("random", "lhs"):
            raise ValueError(f"RandomSweep: method must be 'random' or 'lhs', got {method!r}")
        self.distributions = dict(distributions)
        self.samples, self.seed, self.method = int(samples), int(seed), method
        self.dim = _check_dim(dim, self.distributions, "RandomSweep")
        self._draws: dict[str, np.ndarray] | None = None

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "lhs" if self.method == "lhs" else "random"

    keys = property(lambda self: tuple(self.distributions))
    dims = property(lambda self: (self.dim,))
    shape = property(lambda self: (self.samples,))

    def draws(self) -> dict[str, np.ndarray]:
        """`{key: float64 values}` of every point (drawn once, then cached)."""
        if self._draws is None:
            self._draws = _draw(self.distributions, self.samples, self.seed, self.method)
        return self._draws

    def points(self, start, stop, dtype):
        return {k: v[start:stop].astype(dtype) for k, v in self.draws().items()}

    def point_values(self):
        return self.draws()

    def coords(self, dtype):
        return {
            k: ((self.dim,), v.astype(dtype), {"distribution": self.distributions[k].describe()})
            for k, v in self.draws().items()
        }

    def describe(self):
        return {
            "kind": self.kind,
            "samples": self.samples,
            "seed": self.seed,
            "keys": list(self.keys),
            "distributions": {k: d.describe() for k, d in self.distributions.items()},
        }

    def __repr__(self):
        dists = ", ".join(f"{k!r}: {d.describe()}" for k, d in self.distributions.items())
        return (
            f"RandomSweep({{{dists}}}, samples={self.samples}, seed={self.seed}, "
            f"method={self.method!r})"
        )


def _draw(distributions, n: int, seed: int, method: str) -> dict[str, np.ndarray]:
    # float64 regardless of the caller's precision, so the points of a seed do not depend on
    # the run's dtype (they are rounded to it afterwards).
    with jax.enable_x64(True):
        keys = jax.random.split(jax.random.key(seed), len(distributions))
        lo, hi = np.finfo(np.float64).tiny, np.nextafter(1.0, 0.0)
        out = {}
        for key, (name, dist) in zip(keys, distributions.items()):
            k_u, k_perm = jax.random.split(key)
            u = jax.random.uniform(k_u, (n,), jnp.float64, minval=lo, maxval=1.0)
            if method == "lhs":
                u = (jax.random.permutation(k_perm, n).astype(jnp.float64) + u) / n
            # Clipped so the quantile function never sees exactly 0 or 1 (±inf for Normal).
            out[name] = np.asarray(dist.ppf(jnp.clip(u, lo, hi)), dtype=np.float64)
    return out
