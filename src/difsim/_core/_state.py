"""Named state variables: declaration (defaults, units) and the view passed to `rhs`."""

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class VarInfo:
    """Static metadata of one state variable (hashable, so it lives in pytree structure).

    **Fields:**

    - `units`: units of the variable, e.g. `"m/s"` (free text, CF style where possible).
    - `description`: a long name for plots and netCDF `long_name`.
    - `dims`: names of the variable's own axes (e.g. `("x", "y")` for a 2-D field); `None`
      lets difsim name them `<var>_dim<i>`.
    - `angle`: the variable is an angle (units `"rad"` or `"degree"`): plots wrap it into
      one turn around zero; the values themselves are never wrapped.
    - `algebraic`: the variable is algebraic (a DAE): `rhs` returns, in its entry, a
      residual the solve keeps at zero instead of a time derivative (docs/daes.md).

    **Example:**

    ```python
    import difsim as ds

    info = ds.State(x=ds.Var(1.0, units="m")).var_info("x")  # what outputs label with
    assert info == ds.VarInfo(units="m")
    ```
    """

    units: str | None = None
    description: str | None = None
    dims: tuple[str, ...] | None = None
    angle: bool = False
    algebraic: bool = False


@dataclasses.dataclass(frozen=True)
class Var:
    """A state variable's default value with optional metadata, for use inside [`State`][].

    ```python
    import difsim as ds

    theta = ds.Var(0.1, units="rad", description="angle from the vertical", angle=True)
    state = ds.State(theta=theta, omega=0.0)  # omega: a bare value, no metadata
    assert state.var_info("theta").angle and state.var_info("omega").units is None
    ```

    Units are UDUNITS strings (`"m"`, `"m/s"`, `"1"` for dimensionless); `angle=True`
    marks an angle that plots wrap (see [`VarInfo`][]); `algebraic=True` an algebraic
    variable of a differential-algebraic model, whose `rhs` entry is a constraint
    `0 = g(t, s)` (its value here is a guess that `simulate` makes consistent; see
    docs/daes.md).
    """

    value: Any
    units: str | None = None
    description: str | None = None
    dims: tuple[str, ...] | None = None
    angle: bool = False
    algebraic: bool = False


class State(eqx.Module):
    """Named state variables: a pytree whose leaves are the variables' values.

    Declared on a model class as `state = ds.State(x=1.0, y=0.0)` (the model's default
    initial state), and passed to `Model.rhs` with the same names, so `s.x` reads a
    variable. Values may be scalars or arrays (fields on a grid); the order of declaration
    is kept for outputs.

    **Arguments:** variables by keyword, each a number, an array, or a [`Var`][] carrying
    units/description/dims.

    **Example:**

    ```python
    import difsim as ds

    state = ds.State(x=ds.Var(1.0, units="m", description="position"), v=0.0)
    assert state.names == ("x", "v") and state.var_info("x").units == "m"
    ```
    """

    values: dict[str, Any]
    info: tuple[tuple[str, VarInfo], ...] = eqx.field(static=True)

    def __init__(self, _values: Mapping[str, Any] | None = None, /, **variables: Any):
        if _values is not None:
            variables = {**dict(_values), **variables}
        values, info = {}, []
        for name, value in variables.items():
            if isinstance(value, Var):
                meta = VarInfo(
                    value.units, value.description, value.dims, value.angle, value.algebraic
                )
                value = value.value
            else:
                meta = VarInfo()
            check_precision(value, f"state variable {name!r}")
            values[name] = value
            info.append((name, meta))
        self.values = values
        self.info = tuple(info)

    @property
    def names(self) -> tuple[str, ...]:
        """Variable names in declaration order."""
        return tuple(name for name, _ in self.info)

    def var_info(self, name: str) -> VarInfo:
        """The [`VarInfo`][] (units, description, dims) of variable `name`."""
        return dict(self.info)[self._check(name)]

    def _check(self, name: str) -> str:
        if name not in self.values:
            raise AttributeError(
                f"state has no variable {name!r}; variables are {', '.join(self.names)}"
            )
        return name

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: route unknown names to the variables.
        if name.startswith("__") or name in ("values", "info"):
            raise AttributeError(name)
        return self.values[self._check(name)]

    def __getitem__(self, name: str) -> Any:
        try:
            return self.values[self._check(name)]
        except AttributeError as error:  # mapping-style access fails like a mapping
            raise KeyError(str(error)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.info)

    def items(self):
        """`(name, value)` pairs in declaration order."""
        return ((name, self.values[name]) for name in self.names)

    def with_values(self, values: Mapping[str, Any]) -> "State":
        """The same variables (and metadata) holding `values` (all names must be given)."""
        return State.from_info(self.info, values)

    @staticmethod
    def from_info(info: tuple[tuple[str, VarInfo], ...], values: Mapping[str, Any]) -> "State":
        """A state with metadata `info` holding `values` (no conversion: tracers welcome)."""
        new = object.__new__(State)
        object.__setattr__(new, "values", {name: values[name] for name, _ in info})
        object.__setattr__(new, "info", info)
        return new

    def replace(self, **values: Any) -> "State":
        """A copy with some variables' values replaced; unknown names raise `ValueError`."""
        unknown = [k for k in values if k not in self.values]
        if unknown:
            raise ValueError(
                f"unknown state variable {unknown[0]!r}; variables are {', '.join(self.names)}"
            )
        return self.with_values({**self.values, **values})


def is_finite_concrete(value: Any) -> bool:
    """False only when `value` is concrete and holds a NaN or infinity (tracers pass)."""
    try:
        array = np.asarray(value)
    except Exception:  # a tracer: cannot be checked at trace time
        return True
    if not np.issubdtype(array.dtype, np.inexact):
        return True
    return bool(np.all(np.isfinite(array)))


def check_precision(value: Any, what: str) -> None:
    """Raise a `ValueError` naming `what` (e.g. `"Lorenz parameter 'rho'"`) if `value`
    holds a floating array below float32 precision (float16, bfloat16, float8): difsim
    solves in float32 or float64, and such a value has already been rounded to its few
    digits (float16: 3; 0.1 is 0.0999755859375). Integers, float32/64 and complex pass."""
    for leaf in jax.tree.leaves(value):
        dtype = getattr(leaf, "dtype", None)
        try:
            floating = dtype is not None and jnp.issubdtype(dtype, jnp.floating)
        except TypeError:  # not a NumPy/JAX dtype
            continue
        if floating and jnp.finfo(dtype).bits < 32:
            raise ValueError(
                f"{what} has dtype {jnp.dtype(dtype).name}, below float32 precision (about "
                f"{jnp.finfo(dtype).precision} significant digits): give it as a float32 or "
                "float64 value, e.g. jnp.asarray(value, jnp.float32)"
            )


def as_float_array(value: Any, dtype=None):
    """`value` as a floating JAX array (ints promote to the default float dtype)."""
    array = jnp.asarray(value, dtype=dtype)
    if not jnp.issubdtype(array.dtype, jnp.inexact):
        array = array.astype(jnp.result_type(float))
    return array


STATE_PREFIX = "state."


def state_key(var: str) -> str:
    """The key that names variable `var`'s initial value beside a model's parameters
    (sweeps, fits, `Model.replace`): `"state.<var>"`."""
    return STATE_PREFIX + var


def state_var(key: str) -> str | None:
    """The variable a key `"state.<var>"` names, or `None` when `key` names a parameter."""
    return key[len(STATE_PREFIX) :] if key.startswith(STATE_PREFIX) else None
