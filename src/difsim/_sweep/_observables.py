"""What a sweep keeps per trajectory: the final state, the saved series, or observables.

An observable is either a built-in reduction of one state variable over the saved times,
written `"<var>_<reduction>"` (`"x_max"`, `"I_max"`, `"R_final"`; the dotted `"I.max"` is
deprecated), or a model method decorated with [`observable`][]. A sweep that keeps only
observables never holds more than one chunk of time series in memory, and writes none.
"""

import dataclasses
import difflib
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import Model, State, VarInfo, model_observables
from difsim._io import canonical_keep, kept_name, per_time, split_kept, var_attrs
from difsim._sweep._statistics import is_statistic

# name → (what it computes, for `long_name`; needs at least two saved times)
REDUCTIONS: dict[str, tuple[str, bool]] = {
    "final": ("value at the last saved time", False),
    "max": ("maximum over the saved times", True),
    "min": ("minimum over the saved times", True),
    "mean": ("time average over the saved times (trapezoid rule)", True),
    "rate": (
        "average rate of change over the saved times, (last - first) / (t_last - t_first)",
        True,
    ),
}
RESERVED = ("status", "num_steps")


def available(cls: type[Model], state: State) -> list[str]:
    """Every name `keep` accepts for this model: reductions of each variable, then the
    model's own observables."""
    builtin = [kept_name(var, r) for var in state.names for r in REDUCTIONS]
    return builtin + list(model_observables(cls))


@dataclasses.dataclass(frozen=True)
class Output:
    """One kept quantity: its name, the dims and shape after the sweep's own dims, its
    attributes, and whether a failed trajectory's value is blanked with NaN."""

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: Any
    attrs: tuple[tuple[str, str], ...]


@dataclasses.dataclass(frozen=True)
class KeepPlan:
    """What to keep, checked against a model: `mode` is `"final"`, `"trajectory"` or
    `"observables"`; `names` the observables (for the last). Hashable (a static argument
    of the compiled sweep)."""

    mode: str
    names: tuple[str, ...] = ()

    def describe(self) -> str:
        return self.mode if self.mode != "observables" else " ".join(self.names)

    def evaluate(self, model: Model, sol) -> dict[str, jax.Array]:
        """The kept values of one (unbatched) solution; NaN where it failed, except for
        the saved series, which keeps the values up to the failure."""
        if self.mode == "trajectory":
            return dict(sol.ys)
        if self.mode == "final":
            out = {name: values[-1] for name, values in sol.ys.items()}
        else:
            out = {}
            for name in self.names:
                var, reduction = split_kept(name)
                if var in sol.ys and reduction in REDUCTIONS:
                    out[name] = _reduce(sol.ts, sol.ys[var], reduction)
                else:
                    value = jnp.asarray(getattr(model, name)(sol.ts, dict(sol.ys)))
                    # In the run's precision (and a float, so failures can be NaN).
                    out[name] = value.astype(sol.ts.dtype)
        return {k: jnp.where(sol.ok, v, jnp.nan) for k, v in out.items()}

    def outputs(self, model: Model, n_time: int, dtype: Any) -> list[Output]:
        """The kept quantities' layout (shapes from `jax.eval_shape`: nothing runs)."""
        state = model.initial_state()
        info = dict(state.info)
        out = []
        if self.mode in ("final", "trajectory"):
            lead = ("time",) if self.mode == "trajectory" else ()
            for var, value in state.items():
                dims, shape = _var_dims(model, var, info[var], value)
                out.append(
                    Output(
                        var,
                        lead + dims,
                        (n_time,) * len(lead) + shape,
                        dtype,
                        _var_attrs(info[var]),
                    )
                )
            return out
        observables = model_observables(type(model))
        ts = jax.ShapeDtypeStruct((n_time,), dtype)
        ys = {
            var: jax.ShapeDtypeStruct((n_time, *np.shape(value)), dtype)
            for var, value in state.items()
        }
        for name in self.names:
            var, reduction = split_kept(name)
            if var in info and reduction in REDUCTIONS:
                dims, shape = _var_dims(model, var, info[var], state[var])
                attrs = dict(_var_attrs(info[var]))
                attrs["long_name"] = f"{info[var].description or var}: {REDUCTIONS[reduction][0]}"
                if reduction == "rate":
                    attrs["units"] = per_time(attrs["units"], type(model).time_units)
                out.append(Output(name, dims, shape, dtype, tuple(attrs.items())))
                continue
            struct = jax.eval_shape(lambda ts, ys: getattr(model, name)(ts, ys), ts, ys)
            shape = tuple(np.shape(struct))
            meta = observables[name]
            attrs = {"units": meta.units or "1"}
            if meta.description:
                attrs["long_name"] = meta.description
            dims = tuple(f"{name}_dim{i}" for i in range(len(shape)))
            out.append(Output(name, dims, shape, dtype, tuple(attrs.items())))
        return out


def respell_keep(keep: Any, statistics: bool, key: str = "keep") -> Any:
    """`keep` in the CF-safe spelling (`"x_max"`), each deprecated dotted name (`"x.max"`)
    respelled with a `DeprecationWarning` naming `key`; `statistics`: names are statistics
    over Monte Carlo paths, not reductions over time."""
    return canonical_keep(keep, is_statistic if statistics else REDUCTIONS.__contains__, key)


def plan_keep(keep: Any, cls: type[Model], state: State, n_saved: int, save_text: str) -> KeepPlan:
    """Check `keep` against model class `cls` (with state variables `state`) and the number
    of saved times; raise `ValueError` naming the culprit, listing what is available."""
    if keep is None or keep == "final":
        return KeepPlan("final")
    if keep == "trajectory":
        if n_saved < 2:
            raise ValueError(
                f"keep='trajectory' keeps the saved time series, but save={save_text} saves "
                "only t1: give save = n (a number of points) or a list of times"
            )
        return KeepPlan("trajectory")
    if isinstance(keep, str) or not isinstance(keep, Sequence) or not keep:
        raise ValueError(
            f"keep must be 'final', 'trajectory' or a non-empty list of observables, got {keep!r}"
        )
    keep = canonical_keep(keep, REDUCTIONS.__contains__)
    names = available(cls, state)
    _refuse_shadowing(cls, state)
    seen = set()
    for name in keep:
        if not isinstance(name, str) or name not in names:
            close = difflib.get_close_matches(str(name), names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            own = list(model_observables(cls))
            raise ValueError(
                f"keep: unknown observable {name!r} for {cls.__name__}{hint}; built-in "
                f"reductions are '<var>_<r>' with <var> one of {', '.join(map(repr, state.names))}"
                f" and <r> one of {', '.join(map(repr, REDUCTIONS))}; the model's own "
                f"observables (@ds.observable) are {', '.join(map(repr, own)) or '(none)'}"
            )
        if name in seen:
            raise ValueError(f"keep: {name!r} is listed twice")
        seen.add(name)
        var, reduction = split_kept(name)
        if var in state.names and REDUCTIONS.get(reduction, ("", False))[1] and n_saved < 2:
            raise ValueError(
                f"keep: {name!r} reduces over the saved times, but save={save_text} saves "
                "only t1: give save = n (a number of points) or a list of times"
            )
        if name in RESERVED:
            raise ValueError(f"keep: {name!r} clashes with a variable every sweep writes")
    return KeepPlan("observables", tuple(keep))


# ---------------------------------------------------------------- helpers


def _refuse_shadowing(cls: type[Model], state: State) -> None:
    """A model observable named like a built-in reduction (`x_max` beside a variable `x`)
    would make `keep=["x_max"]` mean two things."""
    builtin = {kept_name(var, r) for var in state.names for r in REDUCTIONS}
    for name in model_observables(cls):
        if name in builtin:
            raise ValueError(
                f"keep: {cls.__name__}.{name} (an @ds.observable) has the name of the "
                f"built-in reduction {name!r} of state variable {split_kept(name)[0]!r}: "
                "rename the method"
            )


def _reduce(ts: jax.Array, ys: jax.Array, reduction: str) -> jax.Array:
    if reduction == "final":
        return ys[-1]
    if reduction == "max":
        return jnp.max(ys, axis=0)
    if reduction == "min":
        return jnp.min(ys, axis=0)
    span = ts[-1] - ts[0]
    if reduction == "rate":
        return (ys[-1] - ys[0]) / span
    # Trapezoid rule; `dt` reshaped by hand (rank promotion is an error in strict mode).
    dt = (ts[1:] - ts[:-1]).reshape((-1,) + (1,) * (ys.ndim - 1))
    return jnp.sum(0.5 * (ys[1:] + ys[:-1]) * dt, axis=0) / span


def _var_dims(
    model: Model, var: str, info: VarInfo, value: Any
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    shape = tuple(np.shape(value))
    dims = info.dims or model.default_dims(var, len(shape))
    return tuple(dims), shape


def _var_attrs(info: VarInfo) -> tuple[tuple[str, Any], ...]:
    return tuple(var_attrs(info).items())
