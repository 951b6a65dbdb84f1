"""`difsim models NAME`: one zoo model in full (parameters, state, observables, docstring)."""

import dataclasses
import re
import shutil
import sys
import textwrap
from typing import Any

import numpy as np

from difsim._core import model_observables
from difsim._io import plain_text
from difsim.models import MODELS


def print_model(name: str) -> int:
    """Print zoo model `name` as plain text; 2 (with the known names on stderr) if there
    is no such model."""
    cls = MODELS.get(name)
    if cls is None:
        print(
            f"difsim: error: no model {name!r} in the zoo; known models: {', '.join(MODELS)}",
            file=sys.stderr,
        )
        return 2
    print(model_text(name, cls))
    return 0


def model_text(name: str, cls: type) -> str:
    """The text `difsim models NAME` prints for model class `cls`."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    state = _default(fields["state"])
    width = min(shutil.get_terminal_size((100, 24)).columns, 100)
    lines = [f"{name} ({cls.__name__})", ""]
    params = [
        (p, _show(_default(fields[p])), *_info(cls.parameter_info(p)))
        for p in cls.parameter_names()
    ]
    lines += _section("Parameters ([model.parameters])", params, ("name", "default", "units"))
    options = [(f.name, _show(_default(f)), "", "") for f in fields.values()
               if f.metadata.get("static", False) and not f.name.startswith("_")]  # fmt: skip
    lines += _section("Options (static)", options, ("name", "default", "units"))
    variables = [
        (v, _show(state[v]), *_info(dataclasses.asdict(state.var_info(v))))
        for v in getattr(state, "names", ())
    ]
    lines += _section("State ([model.state])", variables, ("name", "initial", "units"))
    time_units = getattr(cls, "time_units", None)
    if time_units:
        lines += [f"Time units: {time_units}", ""]
    own = [(o, *_info(dataclasses.asdict(i))) for o, i in model_observables(cls).items()]
    lines += _section("Observables (sweep keep)", own, ("name", "units"))
    builtin = "Built-in observables of every state variable: " + ", ".join(
        f"<var>_{r}" for r in ("final", "max", "min", "mean", "rate")
    )
    lines += [*textwrap.wrap(builtin, width), "", "Description", ""]
    for paragraph in re.split(r"\n\s*\n", textwrap.dedent(cls.__doc__ or "").strip()):
        lines += textwrap.wrap(plain_text(paragraph), width, break_on_hyphens=False) + [""]
    return "\n".join(lines).rstrip()


def _section(title: str, rows: list[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    """A titled table of rows whose last column is a description; nothing when empty."""
    if not rows:
        return []
    header = (*header, "description")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    fmt = "  " + "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    body = [fmt.format(*header).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]
    return [title, *body, ""]


def _info(info: dict[str, Any]) -> tuple[str, str]:
    return info.get("units") or "-", info.get("description") or ""


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def _show(value: Any) -> str:
    """A default as short text: numbers with 6 significant digits, arrays and grids by
    their shape, `None` (derived from other fields, e.g. the grid) as "(derived)"."""
    if value is None:
        return "(derived)"
    if isinstance(value, bool | str):
        return str(value)
    shape = getattr(value, "shape", None)
    if shape is not None and np.ndim(value) == 0 and not hasattr(value, "dims"):
        return f"{float(value):.6g}"
    if shape is not None:
        return f"{type(value).__name__} {' x '.join(map(str, shape))}"
    return f"{value:.6g}" if isinstance(value, int | float) else type(value).__name__
