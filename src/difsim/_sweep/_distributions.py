"""Distributions a [`RandomSweep`][] draws its keys from, through their quantile functions:
[`Uniform`][], [`LogUniform`][], [`Normal`][]."""

import abc
import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np


class AbstractDistribution(abc.ABC):
    """A one-dimensional distribution, sampled through its quantile function."""

    @abc.abstractmethod
    def ppf(self, u: jax.Array) -> jax.Array:
        """The quantile function: `u` in (0, 1) → values (same shape)."""

    @abc.abstractmethod
    def describe(self) -> str:
        """`"uniform(0.5, 2)"`: the name and arguments, as a config would write them."""

    @property
    def log_scale(self) -> bool:
        """Whether plots should show this parameter on a log axis."""
        return False


def _check_finite(name: str, **values: float) -> None:
    for key, value in values.items():
        if not (isinstance(value, int | float | np.number) and math.isfinite(value)):
            raise ValueError(f"{name}: {key} must be a finite number, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Uniform(AbstractDistribution):
    """Uniform on `[low, high]` (`low < high`).

    **Example:**

    ```python
    import difsim as ds

    d = ds.Uniform(0.1, 1.0)
    assert abs(d.ppf(0.5) - 0.55) < 1e-12  # quantile function: draws are ppf(u), u ~ U(0, 1)
    ```
    """

    low: float
    high: float

    def __post_init__(self):
        _check_finite("Uniform", low=self.low, high=self.high)
        if not self.low < self.high:
            raise ValueError(f"Uniform needs low < high, got low={self.low}, high={self.high}")

    def ppf(self, u):
        return self.low + (self.high - self.low) * u

    def describe(self) -> str:
        return f"uniform({self.low:g}, {self.high:g})"


@dataclasses.dataclass(frozen=True)
class LogUniform(AbstractDistribution):
    """Log-uniform on `[low, high]` (`0 < low < high`): uniform in `log(value)`.

    **Example:**

    ```python
    import difsim as ds

    d = ds.LogUniform(0.5, 5.0)  # uniform in log: the median is the geometric mean
    assert abs(d.ppf(0.5) - (0.5 * 5.0) ** 0.5) < 1e-12 and d.log_scale
    ```
    """

    low: float
    high: float

    def __post_init__(self):
        _check_finite("LogUniform", low=self.low, high=self.high)
        if not 0 < self.low < self.high:
            raise ValueError(
                f"LogUniform needs 0 < low < high, got low={self.low}, high={self.high}"
            )

    def ppf(self, u):
        lo, hi = math.log(self.low), math.log(self.high)
        return jnp.exp(lo + (hi - lo) * u)

    def describe(self) -> str:
        return f"loguniform({self.low:g}, {self.high:g})"

    @property
    def log_scale(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class Normal(AbstractDistribution):
    """Normal with mean `mean` and standard deviation `std > 0`.

    **Example:**

    ```python
    import difsim as ds

    d = ds.Normal(28.0, 2.0)
    assert abs(d.ppf(0.5) - 28.0) < 1e-12 and abs(d.ppf(0.8413447460685429) - 30.0) < 1e-9
    ```
    """

    mean: float
    std: float

    def __post_init__(self):
        _check_finite("Normal", mean=self.mean, std=self.std)
        if not self.std > 0:
            raise ValueError(f"Normal needs std > 0, got std={self.std}")

    def ppf(self, u):
        return self.mean + self.std * jax.scipy.special.ndtri(u)

    def describe(self) -> str:
        return f"normal({self.mean:g}, {self.std:g})"
