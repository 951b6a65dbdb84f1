"""Libraries of candidate terms for [`discover`][]: polynomials in the state variables and
named functions of them.

A library turns the state at each sample into the columns of the design matrix
$\\Theta$ (one column per candidate term). It works on NumPy arrays (the fit, in float64)
and on JAX arrays or tracers alike (`Discovery.predict` inside a model's `rhs`), so the
terms are written with arithmetic only, or with `jax.numpy` in user functions.
"""

import abc
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx

from difsim._core import State, VarInfo


class AbstractLibrary(eqx.Module):
    """A set of candidate terms: their names, and their values at given states."""

    @abc.abstractmethod
    def names(self, variables: tuple[str, ...]) -> tuple[str, ...]:
        """The term names, for state variables `variables` (in that order)."""

    @abc.abstractmethod
    def columns(self, s: State) -> list[Any]:
        """One array per term, each shaped like the state's variables (one value per
        sample), in the order of `names`."""


class PolynomialLibrary(AbstractLibrary):
    r"""Every monomial of the state variables up to total degree `degree`.

    For variables $(u, v)$ and degree 2 the terms are, in this order,
    `1, u, v, u^2, u*v, v^2` (by degree, then in the order of the variables: the order of
    scikit-learn's and pysindy's `PolynomialFeatures`).

    **Arguments:**

    - `degree`: the highest total degree (an integer ≥ 0; default 2).
    - `interaction`: keep the mixed monomials such as `u*v` (default `True`); `False`
      keeps only the powers of single variables.
    - `bias`: keep the constant term `1` (default `True`).

    **Example:**

    ```python
    import difsim as ds

    library = ds.PolynomialLibrary(degree=2)  # candidate terms for ds.discover
    assert library.names(("u", "v")) == ("1", "u", "v", "u^2", "u*v", "v^2")
    ```
    """

    degree: int = eqx.field(default=2, static=True)
    interaction: bool = eqx.field(default=True, static=True)
    bias: bool = eqx.field(default=True, static=True)

    def __check_init__(self):
        if isinstance(self.degree, bool) or not isinstance(self.degree, int) or self.degree < 0:
            raise ValueError(
                f"PolynomialLibrary: degree must be an integer >= 0, got {self.degree!r}"
            )

    def _powers(self, count: int) -> list[tuple[int, ...]]:
        """Each term as the indices of its factors (`()` is the constant)."""
        found = []
        for degree in range(0 if self.bias else 1, self.degree + 1):
            for factors in itertools.combinations_with_replacement(range(count), degree):
                if self.interaction or len(set(factors)) <= 1:
                    found.append(factors)
        return found

    def names(self, variables: tuple[str, ...]) -> tuple[str, ...]:
        def name(factors: tuple[int, ...]) -> str:
            if not factors:
                return "1"
            parts = []
            for index in sorted(set(factors)):
                power = factors.count(index)
                parts.append(variables[index] + (f"^{power}" if power > 1 else ""))
            return "*".join(parts)

        return tuple(name(factors) for factors in self._powers(len(variables)))

    def columns(self, s: State) -> list[Any]:
        values = [s[name] for name in s.names]
        out = []
        for factors in self._powers(len(values)):
            if not factors:
                out.append(values[0] * 0 + 1)  # ones shaped (and typed) like the samples
                continue
            term = values[factors[0]]
            for index in factors[1:]:
                term = term * values[index]
            out.append(term)
        return out


class FunctionLibrary(AbstractLibrary):
    """Named functions of the state, each a candidate term.

    **Arguments:**

    - `functions`: `{name: f}`, each `f(s)` taking the state as a [`State`][] (read
      `s.u` or `s["u"]`, as in a model's `rhs`; each variable holds one value per sample)
      and returning one value per sample, e.g. `{"sin(u)": lambda s: jnp.sin(s.u)}`.
      Write them with `jax.numpy` so that `Discovery.predict` can run under `jax.jit`.

    A plain dict given as a library is turned into one of these.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds

    library = ds.FunctionLibrary({"sin(u)": lambda s: jnp.sin(s.u), "u*v": lambda s: s.u * s.v})
    assert library.names(("u", "v")) == ("sin(u)", "u*v")
    ```
    """

    functions: tuple[tuple[str, Callable[[State], Any]], ...] = eqx.field(static=True)

    def __init__(self, functions: Mapping[str, Callable[[State], Any]]):
        if not isinstance(functions, Mapping):
            raise TypeError(
                "FunctionLibrary takes a dict {term name: function of the state}, got "
                f"{type(functions).__name__}"
            )
        for name, function in functions.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"FunctionLibrary: term names must be strings, got {name!r}")
            if not callable(function):
                raise TypeError(f"FunctionLibrary: term {name!r} is not callable")
        self.functions = tuple(functions.items())

    def names(self, variables: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(name for name, _ in self.functions)

    def columns(self, s: State) -> list[Any]:
        return [function(s) for _, function in self.functions]


class Libraries(AbstractLibrary):
    """Several libraries side by side: their terms in the order given."""

    parts: tuple[AbstractLibrary, ...] = eqx.field(static=True)

    def names(self, variables: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(name for part in self.parts for name in part.names(variables))

    def columns(self, s: State) -> list[Any]:
        return [column for part in self.parts for column in part.columns(s)]


def as_library(library: Any) -> AbstractLibrary:
    """`library` as an [`AbstractLibrary`][]: a library, a dict of functions, or a list of
    either (their terms side by side)."""
    if isinstance(library, AbstractLibrary):
        return library
    if isinstance(library, Mapping):
        return FunctionLibrary(library)
    if isinstance(library, Sequence) and not isinstance(library, str):
        return Libraries(tuple(as_library(part) for part in library))
    raise TypeError(
        "library must be a ds.PolynomialLibrary, a dict {term name: function of the state}, "
        f"or a list of these; got {type(library).__name__}"
    )


def state_of(columns: Mapping[str, Any]) -> State:
    """A [`State`][] view of `{name: values}` (no conversion, so tracers pass through)."""
    return State.from_info(tuple((name, VarInfo()) for name in columns), columns)
