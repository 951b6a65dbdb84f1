"""Labelled output: a `Solution` (or a batch of them) as an `xarray.Dataset`, CF-style
(see `docs/configs.md`, "Outputs"): units on every variable and coordinate, `long_name`s,
`Conventions`/`history`/`source`, and the model's plot declarations."""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from difsim._io._cf import cf_attrs, parameter_attr, time_attrs
from difsim._io._event_vars import EVENT_DIM, event_variables, t_end_attrs
from difsim._io._meta import (
    coord_attrs,
    invariant_variables,
    model_title,
    param_attrs,
    plot_attrs,
    var_attrs,
)
from difsim._io._parameters import (
    batch_ndim,
    own_dims,
    parameter_arrays,
    parameter_variable_attrs,
    same_over_batch,
)
from difsim._status import Status, flag_attrs


def attr_value(value: Any) -> Any:
    """A value netCDF can store as an attribute, or `None`."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return value
    return None


def to_xarray(
    solution,
    batch_dims: Sequence[str] | None = None,
    batch_coords: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """A [`Solution`][] as an `xarray.Dataset` with labelled dimensions and metadata.

    One data variable per state variable, dims `(*batch, "time", *var_dims)`, with `units`
    and `long_name` attributes; a `time` coordinate in the model's `time_units`; grid
    coordinates in the grid's units; `status` (a [`Status`][] code with CF flag
    attributes) and `num_steps`; the model's declared `invariants` along the saved times.
    A model with events adds the event record over an `event` dimension (as long as the
    most events any trajectory had): `event_count`, `event_time` (NaN padding), `event_type`
    (an index into the event names, which its CF `flag_meanings` list; -1 padding), and
    `<var>_before_event`, `<var>_after_event`.
    Scalar parameters go into the Dataset's attributes (with `<name>_units`); parameters
    that vary over the batch become data variables over the batch dims. Array-valued
    parameters (an array field, the weights of an equinox network or of another
    sub-module) become data variables named by their path (`k`, `net.layers[0].weight`),
    over a grid's dims when shaped like the grid, else `<path>_dim<i>`, marked
    `difsim_role = "parameter"` (see `difsim._io._parameters`). Undeclared units
    are written `"1"` (dimensionless, model units). Global attributes follow CF
    (`Conventions`, `history`, `source`, `title`) and carry the model's plot
    declarations (see `docs/configs.md`, "Outputs").

    **Arguments:**

    - `solution`: the result of `simulate`, possibly `vmap`ped (leading batch axes).
    - `batch_dims`: names of the leading batch axes (default `batch`, `batch1`, …).
    - `batch_coords`: coordinate values for those axes, `{dim: 1-D values}`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import numpy as np

    import difsim as ds

    sol = ds.simulate(ds.models.ExponentialDecay(k=0.5), t=jnp.linspace(0.0, 2.0, 5))
    data = sol.to_xarray()  # or ds.to_xarray(sol)
    assert data["y"].dims == ("time",) and data["time"].attrs["units"] == "s"
    assert data["y"].attrs["long_name"] == "amount remaining"
    assert np.allclose(data["y"], np.exp(-0.5 * data["time"]), rtol=1e-5)
    ```
    """
    status = np.asarray(solution.status)
    nbatch = status.ndim
    if batch_dims is None:
        batch_dims = ["batch"] + [f"batch{i}" for i in range(1, nbatch)]
        batch_dims = batch_dims[:nbatch]
    batch_dims = tuple(batch_dims)
    if len(batch_dims) != nbatch:
        raise ValueError(f"solution has {nbatch} batch axes but batch_dims={batch_dims}")
    batch_coords = batch_coords or {}
    coords = _time_coord(solution, batch_dims)
    for dim, values in batch_coords.items():
        coords[dim] = (dim, np.asarray(values), {"long_name": dim, "units": "1"})
    data_vars = _state_variables(solution, batch_dims, coords)
    data_vars.update(invariant_variables(solution, (*batch_dims, "time")))
    data_vars["status"] = (batch_dims, status.astype(np.int32), flag_attrs())
    steps = dict(long_name="number of solver steps", units="1")
    data_vars["num_steps"] = (batch_dims, np.asarray(solution.num_steps), steps)
    if solution.t_end is not None:
        time_units = coords["time"][2]["units"]
        data_vars["t_end"] = (batch_dims, np.asarray(solution.t_end), t_end_attrs(time_units))
    if getattr(solution, "events", None) is not None:
        time_units = coords["time"][2]["units"]
        data_vars.update(_event_variables(solution, batch_dims, time_units))
    attrs = _run_attrs(solution, status)
    if getattr(solution, "events", None) is not None:
        attrs["events"] = " ".join(solution.events.names)
        attrs["max_events"] = int(np.shape(solution.events.times)[-1])
    _add_parameters(solution.model, status, batch_dims, batch_coords, attrs, coords, data_vars)
    attrs = {k: v for k, v in attrs.items() if attr_value(v) is not None}
    return xr.Dataset(data_vars=_own(data_vars), coords=_own(coords), attrs=attrs)


def _own(variables: dict[str, tuple]) -> dict[str, tuple]:
    """`variables` (`{name: (dims, values, attrs)}`) with values of their own: on a CPU
    `np.asarray` of a JAX array is a read-only view of its buffer, a broadcast one is
    read-only too, and a parameter or coordinate may be the caller's array. A Dataset the
    user writes into (masking, unit conversion in place) must neither fail nor write into
    the solution, the model or the caller's arrays; a sweep's Dataset is writable too."""
    return {k: (dims, np.array(values), attrs) for k, (dims, values, attrs) in variables.items()}


def _time_coord(solution, batch_dims: tuple[str, ...]) -> dict[str, Any]:
    """`{"time": ...}`: one time axis when every trajectory saved at the same times."""
    all_ts = np.asarray(solution.ts)
    first = all_ts.reshape(-1, all_ts.shape[-1])[0]
    attrs = time_attrs(type(solution.model).time_units)
    if np.array_equal(all_ts, np.broadcast_to(first, all_ts.shape)):
        return {"time": ("time", first, attrs)}
    # Save times differ across the batch (e.g. final states of solves stopped by an
    # event): keep each trajectory's own times rather than mislabel them with the first.
    return {"time": ((*batch_dims, "time"), all_ts, attrs)}


def _state_variables(solution, batch_dims: tuple[str, ...], coords: dict) -> dict[str, Any]:
    """One data variable per state variable; adds the model's coordinates they use to
    `coords`."""
    model = solution.model
    extra_coords = {k: np.asarray(v) for k, v in model.coords().items()}
    extra_attrs = coord_attrs(model)
    data_vars: dict[str, Any] = {}
    for name, info in solution.var_info:
        values = np.asarray(solution.ys[name])
        var_ndim = values.ndim - len(batch_dims) - 1
        dims = info.dims or model.default_dims(name, var_ndim)
        if len(dims) != var_ndim:
            raise ValueError(f"state variable {name!r} has {var_ndim} axes but dims={dims}")
        for dim in dims:
            if dim in extra_coords and dim not in coords:
                attrs = extra_attrs.get(dim, {"long_name": dim, "units": "1"})
                coords[dim] = (dim, extra_coords[dim], attrs)
        data_vars[name] = ((*batch_dims, "time", *dims), values, var_attrs(info))
    return data_vars


def _event_variables(solution, batch_dims: tuple[str, ...], time_units: str) -> dict[str, Any]:
    """The event record as variables over `(*batch, "event")`, cut to the most events any
    trajectory had (the rest is padding)."""
    record = solution.events
    count = np.asarray(record.count)
    n = int(count.max()) if count.size else 0
    nb = len(batch_dims)
    values = {
        "event_count": count.astype(np.int32),
        "event_time": np.asarray(record.times),
        "event_type": np.asarray(record.which).astype(np.int32),
    }
    for name, _ in solution.var_info:
        values[f"{name}_before_event"] = np.asarray(record.before[name])
        values[f"{name}_after_event"] = np.asarray(record.after[name])
    ndim = {name: values[f"{name}_before_event"].ndim - nb - 1 for name, _ in solution.var_info}
    meta = event_variables(solution.model, record.names, solution.var_info, ndim, time_units)
    out: dict[str, Any] = {}
    for name, (dims, attrs) in meta.items():
        array = values[name]
        if EVENT_DIM in dims:
            array = np.take(array, np.arange(n), axis=nb)
        out[name] = ((*batch_dims, *dims), array, attrs)
    return out


def _run_attrs(solution, status: np.ndarray) -> dict[str, Any]:
    """The Dataset's attributes that describe the run: CF's, model, solver, grid, and how
    to draw it."""
    model = solution.model
    cls = type(model)
    attrs = cf_attrs(f"difsim.simulate({cls.__name__})")
    attrs.update(
        model=cls.__name__,
        model_module=cls.__module__,
        solver=solution.solver,
        parameters=" ".join(model.parameter_names()),
    )
    title = model_title(cls)
    if title:
        attrs["title"] = title
    for grid in model.grids():
        attrs["grid"] = grid.describe()
    if status.ndim == 0:
        attrs["status_message"] = Status(int(status)).message
    attrs.update(plot_attrs(cls))
    return attrs


def _add_parameters(model, status, batch_dims, batch_coords, attrs, coords, data_vars) -> None:
    """Each parameter where it belongs: a scalar as an attribute when one value serves
    the whole batch, as the batch coordinate named after it when swept, else as a data
    variable over the batch dims; an array (an array field, a network's weights: see
    `_parameters`) as a data variable named by its path, over its own dims, and over the
    batch dims too where it differs between trajectories."""
    nbatch = batch_ndim(model, status.shape)
    arrays = parameter_arrays(model, nbatch=nbatch)
    for pname, value in model.parameters().items():
        if pname in arrays:
            continue
        info = param_attrs(type(model).parameter_info(pname))
        value = np.asarray(value)
        batched = value.ndim > 0 and value.shape == status.shape
        if value.ndim == 0 or (batched and np.all(value == value.reshape(-1)[0])):
            key = parameter_attr(pname)
            attrs[key] = value.reshape(-1)[0].item()
            attrs[f"{key}_units"] = info["units"]
        elif batched and pname in batch_coords:
            # Swept over a batch axis named after it: the coordinate carries the values.
            coords[pname] = (pname, coords[pname][1], info)
        else:
            data_vars[pname] = (batch_dims, value, info)
    grid_coords, grid_attrs = model.coords(), coord_attrs(model)
    for path, (pname, leaf) in arrays.items():
        value = np.asarray(leaf)
        dims = own_dims(model, path, value.shape[nbatch:])
        info = parameter_variable_attrs(model, path, pname)
        if same_over_batch(value, nbatch):
            data_vars[path] = (dims, value[(0,) * nbatch], info)
        else:
            data_vars[path] = ((*batch_dims, *dims), value, info)
        for dim in dims:
            if dim in grid_coords and dim not in coords:
                meta = grid_attrs.get(dim, {"long_name": dim, "units": "1"})
                coords[dim] = (dim, np.asarray(grid_coords[dim]), meta)
