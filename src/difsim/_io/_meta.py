"""A model's declarations as netCDF attributes: units and long names of variables,
parameters and grid coordinates, and how its outputs are best drawn.

The plot declarations travel in the output (global attributes `plot_phase`,
`plot_time_scale`, `plot_phase_aspect`; a variable's `wrap_period`; invariants as
variables with `difsim_role = "invariant"`), so `ds.plot` draws a file read back from disk
the way the model asks, without the model class at hand.
"""

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from difsim._io._text import plain_text

PLOT_PHASE = "plot_phase"
PLOT_TIME_SCALE = "plot_time_scale"
PLOT_PHASE_ASPECT = "plot_phase_aspect"
WRAP_PERIOD = "wrap_period"
ROLE = "difsim_role"
ALGEBRAIC_ROLE = "algebraic"  # an algebraic variable of a differential-algebraic model

# One full turn in the units an angle may be declared in (radians unless said otherwise).
_TURN = {"rad": 2 * math.pi, "radian": 2 * math.pi, "radians": 2 * math.pi, "1": 2 * math.pi,
         "degree": 360.0, "degrees": 360.0, "deg": 360.0}  # fmt: skip
_AXIS = {"x": "X", "y": "Y", "z": "Z"}


def var_attrs(info: Any) -> dict[str, Any]:
    """`units`, `long_name` (and for an angle, `wrap_period`: one full turn in its units;
    for an algebraic variable, `difsim_role = "algebraic"`) of a state variable's
    `VarInfo`; undeclared units are written `"1"` (dimensionless, model units)."""
    units = info.units or "1"
    attrs: dict[str, Any] = {"units": units}
    if info.description:
        attrs["long_name"] = info.description
    if getattr(info, "angle", False):
        if units not in _TURN:
            raise ValueError(
                f"an angle's units must be one of {', '.join(sorted(_TURN))}, got {units!r}"
            )
        attrs[WRAP_PERIOD] = _TURN[units]
    if getattr(info, "algebraic", False):
        attrs[ROLE] = ALGEBRAIC_ROLE
    return attrs


def param_attrs(info: Mapping[str, Any]) -> dict[str, Any]:
    """`units` (undeclared: `"1"`) and `long_name` of a parameter's `parameter_info`."""
    attrs: dict[str, Any] = {"units": info.get("units") or "1"}
    if info.get("description"):
        attrs["long_name"] = info["description"]
    return attrs


def coord_attrs(model: Any) -> dict[str, dict[str, Any]]:
    """`{dim: attrs}` of the model's grid coordinates: units from the [`Grid`][], a long
    name, and the CF `axis` for `x`, `y`, `z`."""
    out: dict[str, dict[str, Any]] = {}
    for grid in model.grids():
        for dim in grid.dims:
            attrs = dict(long_name=f"{dim} coordinate", units=getattr(grid, "units", "1"))
            if dim in _AXIS:
                attrs["axis"] = _AXIS[dim]
            out[dim] = attrs
    return out


def plot_attrs(cls: type) -> dict[str, str]:
    """Global attributes declaring how the outputs of model class `cls` are drawn: its
    phase portrait (`phase`), time axis scale (`plot_time_scale`) and the phase
    portrait's aspect (`phase_aspect`)."""
    attrs = {}
    phase = getattr(cls, "phase", None)
    if phase:
        attrs[PLOT_PHASE] = " ".join(phase)
    scale = getattr(cls, "plot_time_scale", "linear")
    if scale not in ("linear", "log"):
        raise ValueError(f"{cls.__name__}.plot_time_scale must be 'linear' or 'log', got {scale!r}")
    if scale != "linear":
        attrs[PLOT_TIME_SCALE] = scale
    aspect = getattr(cls, "phase_aspect", "auto")
    if aspect not in ("auto", "equal"):
        raise ValueError(f"{cls.__name__}.phase_aspect must be 'auto' or 'equal', got {aspect!r}")
    if aspect != "auto":
        attrs[PLOT_PHASE_ASPECT] = aspect
    return attrs


def invariant_variables(solution: Any, dims: tuple[str, ...]) -> dict[str, Any]:
    """The model's declared invariants (`invariants = {"energy": ds.VarInfo(...)}`, each a
    method of the saved states `{name: (*batch, time, ...)}`) along the saved times, as
    data variables with dims `dims` marked `difsim_role = "invariant"`."""
    model = solution.model
    out = {}
    for name, info in getattr(type(model), "invariants", {}).items():
        values = np.asarray(getattr(model, name)(solution.ys))
        attrs = {**var_attrs(info), ROLE: "invariant"}
        attrs.setdefault("long_name", plain_text(getattr(model, name).__doc__ or name))
        out[name] = (dims, np.broadcast_to(values, np.shape(solution.ts)), attrs)
    return out


def model_title(cls: type) -> str | None:
    """The first paragraph of the model class's own docstring, as plain text (`None` for
    a class without one: `dataclasses` would invent a signature)."""
    doc = cls.__dict__.get("__doc__") or ""
    if not doc.strip() or doc.strip().startswith(f"{cls.__name__}("):
        return None
    return plain_text(doc)
