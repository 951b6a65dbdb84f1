r"""Smooth bijections between an unconstrained real line and a parameter's allowed range.

A fit optimises unconstrained numbers $u \in \mathbb{R}$; each free parameter $x$ is
`transform.forward(u)`. Positivity ($x > 0$) and box bounds ($a < x < b$) then hold at every
step without projections or penalties, and every optimizer (optax, optimistix) sees a plain
unconstrained problem.
"""

import abc
import math
from collections.abc import Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from difsim._core import Model, state_var


class AbstractTransform(eqx.Module):
    """A smooth, strictly increasing bijection `forward: ℝ → domain` with its inverse.

    Subclasses define `forward`, `inverse` and `contains` (elementwise, any shape).
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

    def saturated(self, u: float) -> bool:
        """Whether `u` presses the value against an edge of the domain where the transform
        flattens out: there a fit stalls, and the value's standard error is meaningless.
        `False` unless a subclass says so."""
        del u
        return False


class Identity(AbstractTransform):
    """No constraint: `x = u`."""

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

    def saturated(self, u: float) -> bool:
        # Near 0 both kinds are exponentials: steps in u still change x by factors. Only a
        # value that underflowed to 0 is stuck.
        return not float(self.forward(u)) > 0


class Bounded(AbstractTransform):
    r"""A parameter inside an open interval, $a < x < b$: $x = a + (b - a)\,\sigma(u)$
    with the logistic sigmoid $\sigma$.

    **Arguments:** `lower` $a$ and `upper` $b$, finite numbers with $a < b$ (in the
    parameter's units).
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

    def saturated(self, u: float) -> bool:
        s = float(jax.nn.sigmoid(u))  # x = a + (b - a) s
        return min(s, 1 - s) < SATURATED


def saturation_note(transforms: dict[str, AbstractTransform], u) -> str:
    """A sentence for a fit's message naming the free values that ended pressed against an
    edge of their range (`u`: the unconstrained values, in `transforms`' order); `""` if
    none did."""
    stuck = [n for n, t, ui in zip(transforms, transforms.values(), u) if t.saturated(float(ui))]
    if not stuck:
        return ""
    ranges = ", ".join(f"{n} {transforms[n].describe()}" for n in stuck)
    return (
        f". At the edge of its range: {ranges}; the transform is flat there, so the fit "
        "cannot move it and its standard error is meaningless: the optimum may lie outside "
        "the range, or another start may do better"
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


def free_transforms(model: Model, free, control) -> dict[str, AbstractTransform]:
    """`{name: transform}` of `fit`'s `free` argument (a mapping or a list of names),
    every name checked against `model` (a parameter, or `"state.<var>"`; not the steady-state
    fit's `control`)."""
    cls = type(model).__name__
    if isinstance(free, str):
        free = [free]
    if isinstance(free, Mapping):
        items = list(free.items())
    elif isinstance(free, Sequence):
        items = [(name, None) for name in free]
    else:
        raise TypeError(
            f"free must be a mapping {{name: transform}} or a list of names, got {free!r}"
        )
    if not items:
        raise ValueError("free is empty: name at least one parameter or 'state.<var>' to fit")
    params = model.parameter_names()
    states = model.initial_state().names
    out = {}
    for name, spec in items:
        if not isinstance(name, str):
            raise TypeError(f"free parameter names must be strings, got {name!r}")
        if (var := state_var(name)) is not None:
            if var not in states:
                raise ValueError(
                    f"free names unknown state variable {name!r}; {cls}'s state variables "
                    f"are {', '.join(states)} (write them as 'state.<var>')"
                )
            if control is not None:
                raise ValueError(
                    f"free names {name!r}, but in a steady-state fit the initial state is only "
                    "the root finder's guess: it cannot be fitted"
                )
        elif name not in params:
            raise ValueError(
                f"free names unknown parameter {name!r}; {cls}'s parameters are "
                f"{', '.join(params)}, and initial values are 'state.<var>' with variables "
                f"{', '.join(states)}"
            )
        if name == control:
            raise ValueError(f"{name!r} is the control parameter of the data; it cannot be free")
        out[name] = as_transform(spec, name)
    return out


def initial_values(model: Model, transforms) -> np.ndarray:
    """The free variables' values in `model` (the fit's start), each checked to be a scalar
    inside its transform's range."""
    state = model.initial_state()
    values = []
    for name, transform in transforms.items():
        var = state_var(name)
        value = getattr(model, name) if var is None else state[var]
        if np.ndim(value) != 0:
            raise ValueError(
                f"free parameter {name!r} has shape {np.shape(value)}; only scalars can be "
                "fitted (fix array-valued ones)"
            )
        value = float(np.asarray(value))
        if not bool(transform.contains(value)):
            raise ValueError(
                f"initial value {name} = {value:g} lies outside the range "
                f"{transform.describe()} of its transform {type(transform).__name__}; start "
                "from a value inside it"
            )
        values.append(value)
    return np.array(values)
