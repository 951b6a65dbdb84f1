r"""Smooth bijections between an unconstrained real line and a parameter's allowed range.

A fit optimises unconstrained numbers $u \in \mathbb{R}$; each free parameter $x$ is
`transform.forward(u)`. Positivity ($x > 0$) and box bounds ($a < x < b$) then hold at every
step without projections or penalties, and every optimizer (optax, optimistix) sees a plain
unconstrained problem.
"""

import abc
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


class AbstractTransform(eqx.Module):
    """A smooth, strictly increasing bijection `forward: ℝ → domain` with its inverse.

    Subclasses define `forward`, `inverse` and `contains` (elementwise, any shape).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    transforms = {"k": ds.Positive(), "x0": ds.Bounded(0.0, 1.0), "c": ds.Identity()}
    assert all(isinstance(t, ds.AbstractTransform) for t in transforms.values())
    ```
    """

    @abc.abstractmethod
    def forward(self, u: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
        """Natural value `x` (in the parameter's units) of the unconstrained value `u`."""

    @abc.abstractmethod
    def inverse(self, x: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
        """Unconstrained value `u` with `forward(u) == x`; `x` must lie in the domain."""

    @abc.abstractmethod
    def contains(self, x: Float[ArrayLike, "..."]) -> Any:
        """Whether `x` lies strictly inside the domain (a NumPy bool for concrete `x`)."""

    def derivative(self, u: Float[ArrayLike, "..."]) -> Float[Array, "..."]:
        """`dx/du` at `u`, elementwise (the chain rule between natural and unconstrained)."""
        u = jnp.asarray(u)
        return jax.jvp(self.forward, (u,), (jnp.ones_like(u),))[1]

    def describe(self) -> str:
        """Short text for summaries, e.g. `"(0, inf)"`."""
        return type(self).__name__

    def saturated(self, u: Float[ArrayLike, "..."]) -> Any:
        """Whether `u` presses the value against an edge of the domain where the transform
        flattens out: there a fit stalls, and the value's standard error is meaningless.
        Elementwise (a NumPy bool, or bool array); `False` unless a subclass says so."""
        return np.zeros(np.shape(u), bool)


class Identity(AbstractTransform):
    """No constraint: `x = u`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    t = ds.Identity()  # p = z: no constraint
    assert t.forward(jnp.array(-3.0)) == -3.0 and t.inverse(jnp.array(4.0)) == 4.0
    ```
    """

    def forward(self, u):
        return jnp.asarray(u)

    def inverse(self, x):
        return jnp.asarray(x)

    def contains(self, x):
        return np.isfinite(np.asarray(x))

    def describe(self) -> str:
        return "(-inf, inf)"


_POSITIVE_KINDS = ("log", "softplus")
# A bounded value within this fraction of its range from an edge sits where the sigmoid's
# slope is below 4e-5 of its largest (|u| > 10): a fit barely moves it any more (seen at
# 4e-7 of the range, its loss 8.65 against an optimum of 1.009; tests/test_fit_robustness.py).
SATURATED = 1e-5


class Positive(AbstractTransform):
    r"""A positive parameter, $x > 0$.

    **Arguments:**

    - `kind`: `"log"` (default; $x = e^u$, so equal steps in $u$ are equal *relative*
      changes of $x$ — right for rates and populations spanning decades) or `"softplus"`
      ($x = \log(1 + e^u)$, close to the identity for $x \gg 1$).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    t = ds.Positive()  # p = exp(z)
    assert jnp.isclose(t.forward(t.inverse(jnp.array(0.02))), 0.02) and t.forward(-50.0) > 0
    ```
    """

    kind: str = eqx.field(default="log", static=True)

    def __check_init__(self):
        if self.kind not in _POSITIVE_KINDS:
            raise ValueError(
                f"Positive(kind={self.kind!r}): kind must be one of {', '.join(_POSITIVE_KINDS)}"
            )

    def forward(self, u):
        u = jnp.asarray(u)
        return jnp.exp(u) if self.kind == "log" else jax.nn.softplus(u)

    def inverse(self, x):
        x = jnp.asarray(x)
        if self.kind == "log":
            return jnp.log(x)
        # log(e^x - 1), written to stay accurate for small and for large x.
        return x + jnp.log(-jnp.expm1(-x))

    def contains(self, x):
        x = np.asarray(x)
        return np.isfinite(x) & (x > 0)

    def describe(self) -> str:
        return "(0, inf)" if self.kind == "log" else "(0, inf) softplus"

    def saturated(self, u):
        # Near 0 both kinds are exponentials: steps in u still change x by factors. Only a
        # value that underflowed to 0 is stuck.
        return ~(np.asarray(self.forward(u)) > 0)


class Bounded(AbstractTransform):
    r"""A parameter inside an open interval, $a < x < b$: $x = a + (b - a)\,\sigma(u)$
    with the logistic sigmoid $\sigma$.

    **Arguments:** `lower` $a$ and `upper` $b$, finite numbers with $a < b$ (in the
    parameter's units).

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    t = ds.Bounded(0.0, 10.0)  # the optimiser works on an unbounded z; p = forward(z)
    z = t.inverse(jnp.array(2.5))
    assert jnp.isclose(t.forward(z), 2.5) and 0.0 < t.forward(jnp.array(1e3)) <= 10.0
    ```
    """

    lower: float
    upper: float

    def __init__(self, lower: float, upper: float):
        for name, value in (("lower", lower), ("upper", upper)):
            if not isinstance(value, int | float | np.floating | np.integer) or isinstance(
                value, bool
            ):
                raise TypeError(f"Bounded({lower!r}, {upper!r}): {name} must be a number")
            if not math.isfinite(value):
                raise ValueError(
                    f"Bounded({lower!r}, {upper!r}): {name} must be finite (for a half-open "
                    "range such as x > 0 use Positive())"
                )
        if not lower < upper:
            raise ValueError(f"Bounded({lower!r}, {upper!r}): lower must be less than upper")
        self.lower = float(lower)
        self.upper = float(upper)

    def forward(self, u):
        return self.lower + (self.upper - self.lower) * jax.nn.sigmoid(jnp.asarray(u))

    def inverse(self, x):
        p = (jnp.asarray(x) - self.lower) / (self.upper - self.lower)
        return jnp.log(p) - jnp.log1p(-p)

    def contains(self, x):
        x = np.asarray(x)
        return np.isfinite(x) & (x > self.lower) & (x < self.upper)

    def describe(self) -> str:
        return f"({self.lower:g}, {self.upper:g})"

    def saturated(self, u):
        s = np.asarray(jax.nn.sigmoid(jnp.asarray(u)))  # x = a + (b - a) s
        return np.minimum(s, 1 - s) < SATURATED


def saturation_note(transforms: dict[str, AbstractTransform], sizes, u) -> str:
    """A sentence for a fit's message naming the free values that ended pressed against an
    edge of their range (`u`: the unconstrained values, in `transforms`' order, `sizes`
    entries each); `""` if none did."""
    stuck, offset = [], 0
    for (name, transform), size in zip(transforms.items(), sizes):
        edge = int(np.sum(transform.saturated(u[offset : offset + size])))
        offset += size
        if edge:
            count = "" if size == 1 else f" ({edge} of its {size} values)"
            stuck.append(f"{name}{count} {transform.describe()}")
    if not stuck:
        return ""
    return (
        f". At the edge of its range: {', '.join(stuck)}; the transform is flat there, so "
        "the fit cannot move it and its standard error is meaningless: the optimum may lie "
        "outside the range, or another start may do better"
    )


def as_transform(spec: Any, name: str = "parameter") -> AbstractTransform:
    """A transform from a config-style spec: a transform instance, `None` or `"identity"`,
    `"positive"` (log), `"softplus"`, or a pair `[lower, upper]` (a [`Bounded`][])."""
    if isinstance(spec, AbstractTransform):
        return spec
    if spec is None or spec == "identity":
        return Identity()
    if spec == "positive":
        return Positive()
    if spec == "softplus":
        return Positive("softplus")
    if isinstance(spec, list | tuple) and len(spec) == 2:
        return Bounded(*spec)
    raise ValueError(
        f"free parameter {name!r}: unknown transform {spec!r}; use ds.Identity(), "
        "ds.Positive(), ds.Bounded(lower, upper), or the names 'identity', 'positive', "
        "'softplus', or a pair [lower, upper]"
    )
