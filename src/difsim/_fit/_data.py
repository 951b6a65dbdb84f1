"""Observations for a fit: reading data (xarray, netCDF, CSV), checking it against a model,
and the arrays the loss needs (values, NaN mask, weights)."""

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, Bool, Float

from difsim._core import Model, State

NOISE_MODELS = ("gaussian", "lognormal")
_NETCDF_SUFFIXES = (".nc", ".nc4", ".cdf", ".netcdf", ".h5")
_TIME_NAMES = ("time", "t")

Target = str | Callable[[State], Any]


class FitData(eqx.Module):
    """Observations ready for the loss: `n` observation points × `k` observed variables.

    **Fields:**

    - `times`: observation times (or control-parameter values for steady states), `(n,)`.
    - `values`: observed values, `(n, k)`; missing entries hold `1.0` (masked out).
    - `mask`: `True` where a value was observed, `(n, k)`.
    - `weights`: residual weights (`weight / sigma`), `(n, k)`; zero where masked.
    - `names`: the data variables, `(k,)`; `targets`: what each one observes, a state
      variable name or a function `f(state) -> value`.
    - `coord`: the name of the data coordinate (`"year"`, `"day"`, …); `units`: each data
      variable's `units` attribute (or `None`).
    - `attrs`: the data's own attributes as JSON text, `{"global": …, "coord": …,
      "variables": {name: …}}` (text and numbers only), kept in the fit's outputs.
    """

    times: Float[Array, " n"]
    values: Float[Array, "n k"]
    mask: Bool[Array, "n k"]
    weights: Float[Array, "n k"]
    names: tuple[str, ...] = eqx.field(static=True)
    targets: tuple[Target, ...] = eqx.field(static=True)
    coord: str = eqx.field(static=True)
    units: tuple[str | None, ...] = eqx.field(static=True)
    attrs: str = eqx.field(static=True, default="{}")

    @property
    def num_observations(self) -> int:
        """Number of observed (unmasked) values."""
        return int(np.sum(np.asarray(self.mask)))


# ---------------------------------------------------------------- reading
def read_data(data: Any, time: str | None = None) -> tuple[xr.Dataset, str]:
    """Read observations into an `xarray.Dataset` and find its time (or control) coordinate.

    **Arguments:**

    - `data`: an `xarray.Dataset` (or named `DataArray`), a path to a netCDF file, a path to
      a CSV file with a header row, a `pandas.DataFrame`, or a mapping `{column: values}`.
    - `time`: the name of the coordinate (Dataset) or column (CSV, DataFrame, mapping)
      holding the times. Default: the only dimension of a Dataset, else a coordinate or
      column named `time` or `t`, else the first column of a table.

    **Returns:** `(dataset, time_name)`, with `time_name` a dimension of `dataset`.
    """
    if isinstance(data, str | os.PathLike):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"data file {str(path)!r} does not exist")
        suffix = path.suffix.lower()
        if suffix == ".csv":
            import pandas as pd

            data = pd.read_csv(path)
        elif suffix in _NETCDF_SUFFIXES:
            with xr.open_dataset(path) as opened:
                data = opened.load()
        else:
            raise ValueError(
                f"data file {str(path)!r}: unknown format {suffix!r}; give a netCDF file "
                f"({', '.join(_NETCDF_SUFFIXES)}) or a CSV file (.csv) with a header row"
            )
    if isinstance(data, xr.DataArray):
        if data.name is None:
            raise ValueError("a DataArray given as data needs a name (the observed variable)")
        data = data.to_dataset()
    if isinstance(data, xr.Dataset):  # (a Dataset is also a Mapping)
        return data, _dataset_time(data, time)
    if isinstance(data, Mapping):
        import pandas as pd

        data = pd.DataFrame({k: np.asarray(v) for k, v in data.items()})
    if not isinstance(data, xr.Dataset):
        import pandas as pd

        if not isinstance(data, pd.DataFrame):
            raise TypeError(
                "data must be an xarray Dataset, a path to a netCDF or CSV file, a pandas "
                f"DataFrame or a mapping of columns, got {type(data).__name__}"
            )
        return _from_table(data, time)
    return data, _dataset_time(data, time)


def _from_table(frame, time: str | None) -> tuple[xr.Dataset, str]:
    columns = [str(c) for c in frame.columns]
    if not columns:
        raise ValueError("the data table has no columns")
    if time is None:
        time = next((c for c in _TIME_NAMES if c in columns), columns[0])
    elif time not in columns:
        raise ValueError(f"the data have no time column {time!r}; columns are {', '.join(columns)}")
    frame = frame.rename(columns=str).set_index(time)
    return xr.Dataset.from_dataframe(frame), time


def _dataset_time(dataset: xr.Dataset, time: str | None) -> str:
    dims = list(dataset.dims)
    if time is not None:
        if time not in dataset.dims:
            raise ValueError(
                f"the data have no dimension {time!r} to use as time; dimensions are "
                f"{', '.join(map(str, dims)) or '(none)'}"
            )
        return time
    if len(dims) == 1:
        return str(dims[0])
    for name in _TIME_NAMES:
        if name in dataset.dims:
            return name
    raise ValueError(
        f"cannot tell which dimension of the data is time ({', '.join(map(str, dims)) or 'none'}):"
        " pass time='<name>'"
    )


# ---------------------------------------------------------------- checking
def coordinate_values(dataset: xr.Dataset, coord: str, *, increasing: bool = True) -> np.ndarray:
    """The values of `coord` as float64, checked: non-empty, numeric, finite and (when
    `increasing`) strictly increasing."""
    if coord in dataset.coords:
        raw = np.asarray(dataset[coord].values)
    else:
        raw = np.arange(dataset.sizes[coord], dtype=float)
    if raw.size == 0:
        raise ValueError(f"the data are empty: coordinate {coord!r} has no values")
    if not (
        np.issubdtype(raw.dtype, np.number) and not np.issubdtype(raw.dtype, np.complexfloating)
    ):
        raise ValueError(
            f"coordinate {coord!r} holds {raw.dtype} values; convert it to numbers in the "
            "model's time units (e.g. days since the start) first"
        )
    values = raw.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"coordinate {coord!r} holds a non-finite value")
    if increasing:
        bad = np.flatnonzero(np.diff(values) <= 0)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"coordinate {coord!r} must be strictly increasing (sort the data), but "
                f"{values[i + 1]:g} follows {values[i]:g}"
            )
    return values


def observation_map(
    dataset: xr.Dataset, coord: str, model: Model, observe: Mapping[str, Target] | None
) -> tuple[tuple[str, Target], ...]:
    """`((data_var, target), ...)`: which state variable (or function of the state) each
    data variable observes, checked against the data and the model."""
    cls = type(model).__name__
    states = model.initial_state().names
    over = [str(n) for n, v in dataset.data_vars.items() if coord in v.dims]
    if not over:
        raise ValueError(f"the data are empty: no data variable varies over {coord!r}")
    if observe is None:
        for name in over:
            if name not in states:
                raise ValueError(
                    f"data variable {name!r} is not a state variable of {cls} "
                    f"({', '.join(states)}): map it with observe={{{name!r}: '<state "
                    "variable>' or a function of the state}, or drop it from the data"
                )
        return tuple((name, name) for name in over)
    if not isinstance(observe, Mapping) or not observe:
        raise TypeError("observe must be a non-empty mapping {data variable: state variable}")
    for name in observe:
        if name not in dataset.data_vars:
            raise ValueError(
                f"observe names data variable {name!r}, which is not in the data; data "
                f"variables are {', '.join(over)}"
            )
        if name not in over:
            raise ValueError(f"data variable {name!r} does not vary over {coord!r}")
    for name in over:
        if name not in observe:
            raise ValueError(
                f"data variable {name!r} is not mapped to {cls}: add it to observe "
                f"(observe={{{name!r}: '<state variable>'}}) or drop it from the data"
            )
    pairs = []
    for name, target in observe.items():
        if isinstance(target, str):
            if target not in states:
                raise ValueError(
                    f"observe[{name!r}] = {target!r} is not a state variable of {cls}; "
                    f"variables are {', '.join(states)}"
                )
            if jnp.ndim(model.initial_state()[target]) != 0:
                raise ValueError(
                    f"observe[{name!r}]: state variable {target!r} is not a scalar; observe "
                    "a scalar function of it instead"
                )
        elif callable(target):
            _check_observation_function(name, target, model)
        else:
            raise TypeError(
                f"observe[{name!r}] must be a state variable name or a function of the "
                f"state, got {type(target).__name__}"
            )
        pairs.append((name, target))
    return tuple(pairs)


def _check_observation_function(name: str, fn: Callable, model: Model) -> None:
    state = model.initial_state()
    shapes = {k: jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v)) for k, v in state.items()}
    try:
        out = jax.eval_shape(lambda values: fn(State.from_info(state.info, values)), shapes)
    except Exception as error:
        raise ValueError(
            f"observe[{name!r}]: calling the observation function on the state failed: {error}"
        ) from error
    if getattr(out, "shape", None) != ():
        raise ValueError(
            f"observe[{name!r}]: the observation function must return a scalar per time "
            f"point, got {getattr(out, 'shape', type(out).__name__)}"
        )


def fit_data(
    dataset: xr.Dataset,
    coord: str,
    coord_values: np.ndarray,
    pairs: tuple[tuple[str, Target], ...],
    *,
    noise: str,
    weights: Mapping[str, Any] | None,
    sigma: Mapping[str, Any] | None,
    dtype: Any,
    host: bool = False,
) -> FitData:
    """Assemble the checked arrays of a fit (see [`FitData`][]); `host`: NumPy arrays (a
    check, which must not start JAX's backend), not JAX arrays."""
    xp = np if host else jnp
    if noise not in NOISE_MODELS:
        raise ValueError(f"unknown noise model {noise!r}; choose one of {', '.join(NOISE_MODELS)}")
    names = tuple(name for name, _ in pairs)
    columns = [_column(dataset, name, coord, coord_values, noise) for name in names]
    values = np.stack(columns, axis=1)
    mask = ~np.isnan(values)
    w = np.where(mask, _weights(names, coord_values.shape[0], weights, sigma), 0.0)
    if not np.any(w > 0):
        raise ValueError("the data are empty: no observed value has a positive weight")
    units = tuple(dataset[name].attrs.get("units") for name in names)
    return FitData(
        times=xp.asarray(coord_values, dtype),
        values=xp.asarray(np.where(mask, values, 1.0), dtype),
        mask=xp.asarray(mask),
        weights=xp.asarray(w, dtype),
        names=names,
        targets=tuple(target for _, target in pairs),
        coord=coord,
        units=units,
        attrs=_attrs_text(dataset, coord, names),
    )


def _attrs_text(dataset: xr.Dataset, coord: str, names: tuple[str, ...]) -> str:
    """The attributes of `dataset`, its coordinate `coord` and variables `names` as JSON
    (static in `FitData`, so hashable text; values other than text and numbers dropped)."""

    def keep(attrs) -> dict:
        return {k: v for k, v in attrs.items() if isinstance(v, str | int | float)}

    coord_attrs = keep(dataset[coord].attrs) if coord in dataset.variables else {}
    variables = {name: keep(dataset[name].attrs) for name in names}
    return json.dumps({"global": keep(dataset.attrs), "coord": coord_attrs, "variables": variables})


def _column(dataset: xr.Dataset, name: str, coord: str, coord_values, noise: str) -> np.ndarray:
    """Data variable `name` as float64 `(n,)`, checked (NaN marks a missing value)."""
    da = dataset[name]
    if da.ndim != 1:
        raise ValueError(
            f"data variable {name!r} has dimensions {da.dims}; only {coord!r} is allowed"
        )
    try:
        column = np.asarray(da.values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"data variable {name!r} is not numeric") from None
    if np.any(np.isinf(column)):
        raise ValueError(f"data variable {name!r} holds an infinite value")
    if np.all(np.isnan(column)):
        raise ValueError(f"data variable {name!r} has no values (all NaN)")
    if noise == "lognormal":
        bad = np.flatnonzero(~np.isnan(column) & ~(column > 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"noise='lognormal' needs positive data, but {name!r} is {column[i]:g} at "
                f"{coord} = {coord_values[i]:g}; use noise='gaussian' or mask it with NaN"
            )
    return column


def _weights(names: tuple[str, ...], n: int, weights, sigma) -> np.ndarray:
    """Residual weights `(n, k)` from the `weights` and `sigma` options (weight `1/sigma`)."""
    w = np.ones((n, len(names)))
    for option, table in (("weights", weights), ("sigma", sigma)):
        for name, value in (table or {}).items():
            if name not in names:
                raise ValueError(
                    f"{option} names {name!r}, which is not an observed data variable; "
                    f"observed: {', '.join(names)}"
                )
            arr = np.asarray(value, dtype=np.float64)
            if arr.shape not in ((), (n,)):
                raise ValueError(
                    f"{option}[{name!r}] must be a number or an array of shape ({n},), got "
                    f"shape {arr.shape}"
                )
            ok = (arr > 0) if option == "sigma" else (arr >= 0)
            if not np.all(np.isfinite(arr) & ok):
                sign = "positive" if option == "sigma" else "non-negative"
                raise ValueError(f"{option}[{name!r}] must be finite and {sign}")
            j = names.index(name)
            w[:, j] = w[:, j] * (arr if option == "weights" else 1.0 / arr)
    if weights and sigma and set(weights) & set(sigma):
        both = sorted(set(weights) & set(sigma))[0]
        raise ValueError(f"give weights or sigma for {both!r}, not both (weight = 1/sigma)")
    return w


# ---------------------------------------------------------------- the observation model
def observe_states(
    ys: Mapping[str, Array], info, targets: tuple[Target, ...]
) -> Float[Array, "n k"]:
    """Observed quantities from states: `ys[var]` has shape `(n,)`; returns `(n, k)`."""
    columns = []
    for target in targets:
        if isinstance(target, str):
            columns.append(ys[target])
        else:
            columns.append(jax.vmap(lambda values: target(State.from_info(info, values)))(ys))
    return jnp.stack(columns, axis=1)


def residuals(predicted: Float[Array, "n k"], data: FitData, noise: str) -> Float[Array, " m"]:
    """Weighted residuals `w (prediction - data)` (or of their logs, for lognormal noise),
    flattened to `(n * k,)`; zero where masked, NaN where a prediction is NaN."""
    safe = jnp.where(data.mask, predicted, 1.0)
    if noise == "lognormal":
        # A non-positive prediction gives NaN: the optimiser rejects that step.
        diff = jnp.log(safe) - jnp.log(data.values)
    else:
        diff = safe - data.values
    return jnp.where(data.mask, data.weights * diff, 0.0).reshape(-1)
