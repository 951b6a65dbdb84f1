r"""A [`FitResult`][] as a CF-style `xarray.Dataset`: the data with their own attributes,
the fit at the data points and its residuals, a smooth fitted curve with an approximate
95 % prediction band, and the parameters with their units and standard errors.

The band combines the parameters' uncertainty (delta method: $g^\top C g$, with $g$ the
gradient of the prediction with respect to the free variables and $C$ their Gauss–Newton
covariance) with the residual noise $\hat\sigma^2 / w^2$ of each observed variable ($w$ its
median weight), at $\pm 1.96$ standard deviations; for lognormal noise on the log scale.
"""

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim._fit._learned import learned_terms
from difsim._io import cf_attrs, param_attrs, time_attrs, var_attrs

Z95 = 1.959963984540054  # the normal distribution's 97.5 % quantile


def fit_dataset(
    result: Any, points: int = 201, references: Mapping[str, Callable] | None = None
) -> xr.Dataset:
    """The Dataset of `result` (see [`FitResult.to_xarray`][]), with the smooth curve at
    `points` coordinates spanning the data, and each free network's learned term (beside
    its entry of `references`, the true term, where given)."""
    problem, model = result.problem, result.model
    data = problem.data
    meta = json.loads(data.attrs)
    coord = data.coord
    times = np.asarray(data.times)
    coord_attrs = {**_coord_units(problem, model), **meta.get("coord", {})}
    curve_coord = f"{coord}_curve"
    dense = _dense(problem, times, points)
    coords: dict[str, Any] = {
        coord: (coord, times, coord_attrs),
        curve_coord: (curve_coord, dense, {**coord_attrs, "long_name": f"{coord} (fitted curve)"}),
    }
    dim = getattr(problem, "dim", None)
    if dim is not None:  # a fit to experiments: their labels
        coords[dim] = (dim, list(problem.labels), {"long_name": "experiment"})
    data_vars = _observed(result, meta, coord, curve_coord, dense)
    data_vars.update(_parameters(result, coords))
    term_coords, terms = learned_terms(result, dense, references)
    coords.update(term_coords)
    data_vars.update(terms)
    _histories(result, coords, data_vars, coord_attrs)
    cls = type(model)
    attrs = cf_attrs(f"difsim.fit({cls.__name__})")
    attrs.update(
        difsim_output="fit",  # what the file is: see difsim._io's ownership check
        model=cls.__name__,
        optimizer=result.optimizer,
        status=result.status.text,
        message=result.message,
        loss=result.loss,
        sigma2=result.sigma2,
        dof=result.dof,
        noise=problem.noise,
        newton_decrease=result.newton_decrease,
        newton_step=result.newton_step,
    )
    if result.notes:
        attrs["warnings"] = "\n".join(result.notes)
    # The data's own description, kept beside ours (`source` is CF's "how it was made").
    attrs.update({f"data_{k}": v for k, v in meta.get("global", {}).items()})
    return xr.Dataset(data_vars, coords=coords, attrs=attrs)


def _histories(result, coords: dict, data_vars: dict, coord_attrs: dict) -> None:
    """The loss and gradient-norm histories over `step`; the monitor's evaluations, the
    curriculum's stages and the multistart's final losses, where the fit has them."""
    steps = np.arange(len(result.loss_history))
    coords["step"] = ("step", steps, dict(long_name="optimizer step", units="1"))
    loss = dict(long_name="loss: half the sum of squared weighted residuals", units="1")
    data_vars["loss_history"] = (("step",), result.loss_history, loss)
    grad = dict(long_name="norm of the loss gradient (unconstrained variables)", units="1")
    data_vars["grad_norm_history"] = (("step",), result.grad_norm_history, grad)
    if result.monitor_history is not None:
        kind, hist = result.monitor_kind, result.monitor_history
        coords["evaluation"] = (
            "evaluation",
            hist[:, 0].astype(int),
            dict(long_name="optimizer steps before the evaluation", units="1"),
        )
        data_vars[f"{kind}_loss"] = (
            ("evaluation",),
            hist[:, 1],
            dict(long_name=f"{kind} loss after a block of steps", units="1"),
        )
    if result.curriculum is not None:  # its stages: where each starts, how far it fits
        coords["stage"] = ("stage", np.arange(len(result.curriculum)), {"units": "1"})
        start = dict(long_name="first optimizer step of the curriculum stage", units="1")
        data_vars["curriculum_start_step"] = (("stage",), result.curriculum[:, 0].astype(int),
                                              start)  # fmt: skip
        horizon = {**coord_attrs, "long_name": "horizon of the stage: it fits the data up to it"}
        data_vars["curriculum_horizon"] = (("stage",), result.curriculum[:, 1], horizon)
    if result.start_losses is not None:
        coords["start"] = ("start", np.arange(len(result.start_losses)), {"units": "1"})
        start = dict(long_name="final loss of each start", units="1")
        data_vars["start_loss"] = (("start",), result.start_losses, start)


def _coord_units(problem, model) -> dict[str, Any]:
    """Attributes of the data coordinate when the data give none: the model's time units,
    or the units of the control parameter of a steady-state fit."""
    control = getattr(problem, "control", None)
    if control is not None:
        return param_attrs(type(model).parameter_info(control))
    return time_attrs(type(model).time_units)


def _dense(problem, times: np.ndarray, points: int) -> np.ndarray:
    if getattr(problem, "prepend", False):
        # From t0 (the initial state) on; t0 itself is the solve's start, not a save time.
        return np.linspace(float(problem.t0), times[-1], points + 1)[1:]
    return np.linspace(times.min(), times.max(), points)


def _observed(result, meta, coord: str, curve_coord: str, dense: np.ndarray) -> dict:
    """Each observed variable: the data, the fit there, residuals, curve and band."""
    data = result.problem.data
    states = dict(result.model.initial_state().info)
    values = np.where(np.asarray(data.mask), np.asarray(data.values), np.nan)
    fitted = result.predict()
    curve, lower, upper = prediction_band(result, dense)
    log = result.problem.noise == "lognormal"
    out: dict[str, Any] = {}
    dim = getattr(result.problem, "dim", None)  # a fit to experiments: their dimension
    lead = () if dim is None else (dim,)
    for j, name in enumerate(data.names):
        target = data.targets[j]
        attrs = dict(var_attrs(states[target])) if isinstance(target, str) else {"units": "1"}
        attrs.pop("wrap_period", None)
        attrs.update(meta.get("variables", {}).get(name, {}))  # the data's own attributes first
        what = attrs.get("long_name", name)
        obs, fit = values[..., j], fitted[..., j]
        out[name] = ((*lead, coord), obs, attrs)
        out[f"{name}_fit"] = ((*lead, coord), fit, {**attrs, "long_name": f"fitted {what}"})
        residual = np.log(obs / fit) if log else obs - fit
        r_attrs = {"units": "1" if log else attrs["units"]}
        r_attrs["long_name"] = ("log of data / fit" if log else "data - fit") + f": {what}"
        out[f"{name}_residual"] = ((*lead, coord), residual, r_attrs)
        band = {**attrs, "long_name": f"fitted {what}, curve"}
        out[f"{name}_curve"] = ((*lead, curve_coord), curve[..., j], band)
        for label, edge in (("lower", lower), ("upper", upper)):
            edge_attrs = {**attrs, "long_name": f"{what}: {label} edge of the 95 % prediction band"}
            out[f"{name}_{label}"] = ((*lead, curve_coord), edge[..., j], edge_attrs)
    return out


def _parameters(result, coords: dict) -> dict[str, Any]:
    """The scalar free variables over `parameter` (`value`, `stderr`, each entry's units
    in the auxiliary coordinate `parameter_units`, and their correlation matrix:
    dimensionless, unlike a covariance), then the others as variables of their own."""
    names = [n for n in result.names if isinstance(result.parameters[n], float)]
    out = _array_parameters(result, coords)
    if not names:
        return out
    units, long_names = [], []
    for name in names:
        info = _info(result.model, name)
        units.append(info["units"])
        long_names.append(info["long_name"])
    coords["parameter"] = ("parameter", names, {"long_name": "free parameter"})
    coords["parameter_units"] = ("parameter", units, {"long_name": "units of each parameter"})
    coords["parameter_long_name"] = ("parameter", long_names, {"long_name": "what it is"})
    coords["parameter2"] = ("parameter2", names, {"long_name": "free parameter (2nd axis)"})
    shared = {"units": units[0]} if len(set(units)) == 1 else {}
    offsets = dict(zip(result.names, np.cumsum((0,) + result.problem.sizes())))
    index = [int(offsets[n]) for n in names]
    cov = np.asarray(result.covariance)[np.ix_(index, index)]
    se = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
    corr = cov / np.outer(se, se)
    return {
        "value": (("parameter",), [result.parameters[n] for n in names],
                  dict(long_name="fitted value (units: parameter_units)", **shared)),
        "stderr": (("parameter",), [result.stderr[n] for n in names],
                   dict(long_name="standard error, Gauss-Newton (units: parameter_units)",
                        **shared)),
        "correlation": (("parameter", "parameter2"), corr,
                        dict(long_name="correlation of the fitted parameters", units="1")),
        **out,
    }  # fmt: skip


def _info(model, name: str) -> dict[str, str]:
    """`units` and `long_name` of free variable `name` (a path inside a parameter: the
    parameter's units only where the path is the parameter itself)."""
    if name.startswith("state."):
        var = name.removeprefix("state.")
        info = var_attrs(dict(model.initial_state().info)[var])
        return {"units": info["units"], "long_name": f"initial {info.get('long_name', var)}"}
    if name in type(model).parameter_names():
        info = param_attrs(type(model).parameter_info(name))
        return {"units": info["units"], "long_name": info.get("long_name", name)}
    return {"units": "1", "long_name": name}


def _array_parameters(result, coords: dict) -> dict[str, Any]:
    """Each array free variable as `fitted_<name>` (with `fitted_<name>_stderr`), and each
    floating-point array of a free module as `fitted_<name>_<path>`: dims
    `<variable>_dim<i>`; attributes `free` (the free variable) and `path` (the array's
    own path)."""
    out: dict[str, Any] = {}
    for name in result.names:
        value = result.parameters[name]
        if isinstance(value, float):
            continue
        is_module = isinstance(value, eqx.Module)
        dyn = eqx.filter(value, eqx.is_inexact_array)
        info = _info(result.model, name)
        for path, leaf in jax.tree_util.tree_flatten_with_path(dyn)[0]:
            full = name + jax.tree_util.keystr(path)
            var = "fitted_" + re.sub(r"\W+", "_", full).strip("_")
            dims = tuple(f"{var}_dim{i}" for i in range(np.ndim(leaf)))
            attrs = {"free": name, "path": full, "long_name": f"fitted {info['long_name']}"}
            out[var] = (dims, np.asarray(leaf), {**attrs, "units": info["units"]})
            if not is_module:
                se = {**attrs, "long_name": f"standard error of {full}", "units": info["units"]}
                out[f"{var}_stderr"] = (dims, np.asarray(result.stderr[name]), se)
    return out


def prediction_band(result, coords) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(curve, lower, upper)`, each `(len(coords), k)`: the fitted observed quantities at
    `coords` and the edges of their approximate 95 % prediction band (NaN where the
    covariance is unknown)."""
    problem = result.problem.with_adjoint("forward")
    q = problem.num_free()
    u = jnp.asarray(result.u)
    if not np.any(np.isfinite(result.covariance)):  # no errors (a network is free): no band
        curve = np.asarray(_curve(problem, u, jnp.asarray(coords)))
        return curve, np.full_like(curve, np.nan), np.full_like(curve, np.nan)
    curve, jac = _curve_and_jacobian(problem, u, jnp.asarray(coords), q)
    curve, jac = np.asarray(curve), np.asarray(jac)  # (..., c, k), (..., c, k, q)
    dxdu = np.asarray(problem.derivative(u))[:q]
    cov_u = np.asarray(result.covariance) / np.outer(dxdu, dxdu)
    var_mean = np.einsum("...q,qr,...r->...", jac, cov_u, jac)
    data = result.problem.data
    weights = np.where(np.asarray(data.mask), np.asarray(data.weights), np.nan)
    k = weights.shape[-1]
    noise_var = result.sigma2 / np.nanmedian(weights.reshape(-1, k), axis=0) ** 2  # (k,)
    if result.problem.noise == "lognormal":
        spread = Z95 * np.sqrt(var_mean / curve**2 + noise_var)
        return curve, curve * np.exp(-spread), curve * np.exp(spread)
    spread = Z95 * np.sqrt(var_mean + noise_var)
    return curve, curve - spread, curve + spread


@eqx.filter_jit
def _curve(problem, u, coords):
    return problem.predict(problem.model_from(u), coords)


@eqx.filter_jit
def _curve_and_jacobian(problem, u, coords, q: int):
    def curve(head):
        return problem.predict(problem.model_from(u.at[:q].set(head)), coords)

    return curve(u[:q]), jax.jacfwd(curve)(u[:q])
