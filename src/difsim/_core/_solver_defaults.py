"""One place that fills in the solver settings a caller left unset.

`simulate`, `sweep` and configs all resolve `solver`, `dt0`, `controller`, `rtol`, `atol` and
`max_steps` here, so a Python call and a config that leave the same things out run the same
solve. Precedence: the caller's value, then the model's `solver_defaults`, then difsim's.
"""

from collections.abc import Mapping
from typing import Any

GLOBAL_DEFAULTS: dict[str, Any] = dict(rtol=1e-6, atol=1e-6, max_steps=16_384)
KEYS = ("solver", "dt0", "controller", "rtol", "atol", "max_steps")
# Tied to the model's own choice of solver: dropped when the caller picks another solver.
_SOLVER_TIED = ("dt0", "controller")


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
    return dict(defaults)


def resolve_solver_settings(cls: type, **given: Any) -> dict[str, Any]:
    """`{key: value}` for every key in `KEYS`: `given` (non-`None`) wins, then the model's
    `solver_defaults`, then difsim's defaults (tsit5, or kvaerno5 for `stiff` models)."""
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
