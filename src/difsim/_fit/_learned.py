"""The learned terms of a fit's outputs: each free network evaluated over the inputs that the
fitted trajectory gives it, beside a reference (the true term) where one is declared.

The inputs are found by running the fitted model's `rhs` along its own trajectory (at the
fitted curve's times, every experiment of a fit to experiments) with the network wrapped
in a recorder; nothing about how `rhs` builds them is assumed. A network of one input is
then evaluated on an even grid spanning the visited range; one of several inputs at the
visited points themselves.
"""

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from difsim._core import State
from difsim._io import var_attrs

GRID_POINTS = 101  # the input grid of a network of one input


class _Recorder:
    """`network`, noting each input it is called with in `seen` (within one trace)."""

    def __init__(self, network: Any, seen: list):
        self.network, self.seen = network, seen

    def __call__(self, x, *args, **kwargs):
        self.seen.append(x)
        return self.network(x, *args, **kwargs)


def learned_networks(result: Any) -> list[str]:
    """The free variables of `result` that are callable modules (networks) fields of the
    model, and whose inputs can be recorded along a trajectory (a time-series fit)."""
    problem = result.problem
    if not (hasattr(problem, "sim") and hasattr(problem, "t0")) or not _has_rhs(result.model):
        return []
    params = type(result.model).parameter_names()
    return [
        name
        for name in result.names
        if name in params
        and isinstance(result.parameters[name], eqx.Module)
        and callable(result.parameters[name])
    ]


def _has_rhs(model) -> bool:
    rhs = getattr(type(model), "rhs", None)
    return callable(rhs) and not getattr(rhs, "__isabstractmethod__", False)


def visited_inputs(result: Any, field: str, times: np.ndarray):
    """`(inputs, at, states)`: every input the network `field` receives from `rhs` along
    the fitted trajectory at `times` (and `t0` first when the data start after it), shape
    `(samples, *input_shape)`, the time of each sample and the state there."""
    problem, model = result.problem, result.model
    ts = jnp.asarray(times)
    if getattr(problem, "prepend", False):
        ts = jnp.concatenate([jnp.asarray(problem.t0)[None], ts])
    inputs, at, states = _inputs(problem, model, field, ts)
    return np.asarray(inputs), np.asarray(at), {k: np.asarray(v) for k, v in states.items()}


@eqx.filter_jit
def _inputs(problem, model, field: str, ts):
    """`(inputs, at, states)`: the recorded inputs `(samples, *shape)`, their times, and
    the state variables there (`{name: (samples, ...)}`)."""

    def along(m):
        sol = problem.sim.simulate(m, ts)
        calls = jax.vmap(lambda t, y: _record(m, field, t, y, sol.var_info))(ts, sol.ys)
        return calls, sol.ys

    points = getattr(problem, "points", None)
    if points is None:  # one trajectory
        calls, ys = along(model)  # a list over calls of (n, *shape)
    else:  # a fit to experiments: each from its own values, (E, n, ...)
        from difsim._fit._free import with_values

        calls, ys = jax.vmap(lambda point: along(with_values(model, point)))(points)
    lead = ys[next(iter(ys))].shape[: 1 + (points is not None)]  # ([E,] n)
    x = jnp.stack(calls)  # (calls, [E,] n, *shape)
    count = x.shape[0]
    at = jnp.broadcast_to(ts, (count, *lead)).reshape(-1)
    states = {k: jnp.broadcast_to(v, (count, *v.shape)).reshape(count * int(np.prod(lead)),
                                                              *v.shape[len(lead):])
              for k, v in ys.items()}  # fmt: skip
    return x.reshape(-1, *x.shape[1 + len(lead) :]), at, states


def _record(model, field: str, t, values, info) -> list:
    seen: list = []
    recorder = _Recorder(getattr(model, field), seen)
    spy = eqx.tree_at(lambda m: getattr(m, field), model, recorder)
    spy.rhs(t, State.from_info(info, values))
    return seen


def learned_term(result: Any, field: str, times: np.ndarray, reference: Callable | None):
    """`(coords, data_vars)` of the learned term `field` (see `fit_dataset`): over
    `<field>_input` (one input: a grid over the visited range) or `<field>_sample` (the
    visited inputs), `learned_<field>` and, with `reference`, `reference_<field>`."""
    network = result.parameters[field]
    try:
        inputs, at, states = visited_inputs(result, field, times)
    except Exception as e:  # an rhs that calls it inside a transform of its own, ...
        warnings.warn(
            f"the learned term of {field!r} is left out of the outputs: recording its inputs "
            f"along the fitted trajectory failed ({type(e).__name__}: {e})",
            stacklevel=4,
        )
        return {}, {}
    if inputs.shape[0] == 0:
        return {}, {}
    scalar = inputs.ndim == 1 or inputs[0].size == 1
    what = {"network": field}
    coords: dict[str, Any] = {}
    if scalar:
        dim = f"{field}_input"
        flat = inputs.reshape(inputs.shape[0], -1)[:, 0]
        grid = np.linspace(flat.min(), flat.max(), GRID_POINTS)
        x = grid.reshape(-1, *inputs.shape[1:])
        coords[dim] = (dim, grid, _input_attrs(result, field, flat, states))
    else:
        dim = f"{field}_sample"
        x = inputs
        coords[dim] = (dim, np.arange(len(x)), {"long_name": f"input sample of {field}"})
        coords[f"{field}_time"] = (dim, at, {"long_name": "time of the sample"})
        coords[f"{field}_inputs"] = (
            (dim, f"{field}_input_index"),
            x.reshape(len(x), -1),
            {"long_name": f"input of {field} along the fitted trajectory", "units": "1"},
        )
    learned = _evaluate(network, x, f"network {field!r}")
    dims = (dim, f"{field}_output")
    long = f"learned {field}: the fitted network's output"
    out = {f"learned_{field}": (dims, learned, {**what, "long_name": long, "units": "1"})}
    if reference is not None:
        ref = _evaluate(reference, x, f"reference of {field!r}")
        if ref.shape != learned.shape:
            raise ValueError(
                f"reference of network {field!r}: returns {ref.shape[1]} values for one input, "
                f"the network {learned.shape[1]}; make it return what the network does"
            )
        name = getattr(reference, "__qualname__", type(reference).__name__)
        attrs = {**what, "long_name": f"reference {field} ({name})", "units": "1"}
        out[f"reference_{field}"] = (dims, ref, attrs)
        rms = float(np.sqrt(np.mean((learned - ref) ** 2)))
        out[f"learned_{field}"][2]["rms_error_vs_reference"] = rms
    return coords, out


def _evaluate(fn: Callable, x: np.ndarray, what: str) -> np.ndarray:
    """`fn` at each row of `x` (one input a call), as a float array."""
    try:
        values = np.asarray(jax.vmap(fn)(jnp.asarray(x)), dtype=float)
    except Exception as e:  # the user's function may fail in any way
        raise ValueError(
            f"{what}: evaluating it at an input of shape {x.shape[1:]} failed "
            f"({type(e).__name__}: {e}); it must take what the network takes"
        ) from e
    return values.reshape(len(x), -1)


def _input_attrs(result, field: str, flat: np.ndarray, states: dict) -> dict[str, Any]:
    """The attributes of the input grid: those of the state variable the input equals
    along the trajectory, when one does (a network of `s.v`: `v`'s units)."""
    attrs = {"long_name": f"input of {field}", "units": "1"}
    info = dict(result.model.initial_state().info)
    for name, values in states.items():
        if values.shape == flat.shape and np.allclose(values, flat, rtol=1e-6, atol=0.0):
            found = var_attrs(info[name])
            return {**attrs, "long_name": f"{field} input: {found.get('long_name', name)}",
                    "units": found.get("units", "1"), "state_variable": name}  # fmt: skip
    return attrs


def learned_terms(result: Any, times: np.ndarray, references: Mapping[str, Callable] | None):
    """`(coords, data_vars)` of every learned term of `result` (see `learned_term`)."""
    references = dict(references or {})
    fields = learned_networks(result)
    unknown = [k for k in references if k not in fields]
    if unknown:
        raise ValueError(
            f"references: {unknown[0]!r} is not a free network of the fit; its networks are "
            f"{', '.join(map(repr, fields)) or 'none'}"
        )
    coords: dict[str, Any] = {}
    data_vars: dict[str, Any] = {}
    for field in fields:
        c, d = learned_term(result, field, times, references.get(field))
        coords.update(c)
        data_vars.update(d)
    return coords, data_vars
