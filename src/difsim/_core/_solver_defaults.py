"""One place that fills in the solver settings a caller left unset, and checks tolerances.

`simulate`, `sweep` and configs all resolve `solver`, `dt0`, `controller`, `rtol`, `atol`,
`max_steps` and `root_tol` here, so a Python call and a config that leave the same things out
run the same solve. Precedence: the caller's value, then the model's `solver_defaults`, then
difsim's. [`check_tolerance`][] is the one tolerance check (`rtol`, `atol`, `root_tol`), used by the
Python API and the config's `[solver]` section alike.
"""

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

GLOBAL_DEFAULTS: dict[str, Any] = dict(rtol=1e-6, atol=1e-6, max_steps=16_384)
KEYS = ("solver", "dt0", "controller", "rtol", "atol", "max_steps", "root_tol")
# Tied to the model's own choice of solver: dropped when the caller picks another solver.
_SOLVER_TIED = ("dt0", "controller", "root_tol")
_TOLERANCES = ("rtol", "atol", "root_tol")


def check_tolerance(key: str, value: Any, name: str | None = None) -> None:
    """Raise a `ValueError` naming `name` and `value` unless `value` is a usable tolerance
    `key` (`"rtol"`, `"atol"` or `"root_tol"`).

    `rtol`: one finite number in `(0, 1)` (a relative error of 1 or more accepts anything).
    `atol`: a finite number `> 0`, or an array of them (one per state variable, checked
    against the state by [`solver_settings`][]). `root_tol`: one number in `(0, 1)`, a
    fraction of the step's error allowance (see `difsim.solvers.StageNewton`). A traced
    value (a tolerance under `vmap`) cannot be inspected and passes. `name` is how the
    message names it (default `key`; e.g. `"Lorenz.solver_defaults['rtol']"`).
    """
    if value is None or isinstance(value, jax.core.Tracer):
        return
    name = key if name is None else name
    try:
        array = None if isinstance(value, str | bool) else np.asarray(value, np.float64)
    except (TypeError, ValueError):
        array = None
    if array is None or np.asarray(value).dtype == bool:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if key in ("rtol", "root_tol") and array.ndim != 0:
        raise ValueError(f"{name} must be one number, got an array of shape {array.shape}")
    if not np.all(np.isfinite(array)) or not np.all(array > 0):
        what = "a finite number > 0" if array.ndim == 0 else "finite numbers > 0"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if key == "rtol" and not float(array) < 1:
        raise ValueError(
            f"{name} must be < 1 (a relative error; 1e-6 asks for about 6 digits), got {value!r}"
        )
    if key == "root_tol" and not float(array) < 1:
        raise ValueError(
            f"{name} must be < 1: the nonlinear solves' error as a fraction of the step's "
            f"error allowance (default 0.01), got {value!r}"
        )


def model_solver_defaults(cls: type) -> dict[str, Any]:
    """The model class's `solver_defaults`, checked."""
    defaults = getattr(cls, "solver_defaults", None) or {}
    if not isinstance(defaults, Mapping):
        raise TypeError(f"{cls.__name__}.solver_defaults must be a dict, got {defaults!r}")
    unknown = [k for k in defaults if k not in KEYS]
    if unknown:
        raise ValueError(
            f"{cls.__name__}.solver_defaults has unknown key {unknown[0]!r}; keys are "
            f"{', '.join(KEYS)}"
        )
    for key in _TOLERANCES:
        name = f"{cls.__name__}.solver_defaults[{key!r}]"
        check_tolerance(key, defaults.get(key), name)
    return dict(defaults)


def resolve_solver_settings(cls: type, **given: Any) -> dict[str, Any]:
    """`{key: value}` for every key in `KEYS`: `given` (non-`None`) wins, then the model's
    `solver_defaults`, then difsim's defaults (tsit5, or kvaerno5 for `stiff` models).

    **Raises:** `ValueError` for a tolerance that [`check_tolerance`][] refuses, naming
    the argument (or the model's `solver_defaults` entry) and the value.
    """
    for key in _TOLERANCES:
        check_tolerance(key, given.get(key))
    defaults = model_solver_defaults(cls)
    own_solver = given.get("solver") is None or given.get("solver") == defaults.get("solver")
    out: dict[str, Any] = {}
    for key in KEYS:
        value = given.get(key)
        if value is None and (own_solver or key not in _SOLVER_TIED):
            value = defaults.get(key)
        if value is None:
            value = GLOBAL_DEFAULTS.get(key)
        out[key] = value
    if out["solver"] is None:
        out["solver"] = "kvaerno5" if getattr(cls, "stiff", False) else "tsit5"
    return out
