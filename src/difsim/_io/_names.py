"""The names of the quantities a sweep keeps: `<var>_<suffix>` (`I_max`, `R_final`, `x_q05`).

CF naming (letters, digits and underscores) keeps them valid netCDF variable names and
attribute-accessible: `out.I_max`, where `out.I.max` was the DataArray method `max` of `I`.
The dotted spelling (`"I.max"`) is still accepted on input, with a `DeprecationWarning`,
until 0.3 (docs/versions.md); it names the same quantity.
"""

import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

_PACKAGE = str(Path(__file__).resolve().parents[1])  # src/difsim: frames the user did not write


def kept_name(var: str, suffix: str) -> str:
    """The output name of `suffix` (a reduction or statistic) of state variable `var`."""
    return f"{var}_{suffix}"


def split_kept(name: str) -> tuple[str, str]:
    """`(var, suffix)` of a kept name in either spelling: the suffix follows the last `_`
    (or `.`, the deprecated spelling), and holds no underscore itself."""
    var, _, suffix = name.rpartition("." if "." in name else "_")
    return var, suffix


def canonical_keep(keep: Any, is_suffix: Callable[[str], bool], key: str = "keep") -> Any:
    """`keep` with each dotted `"<var>.<suffix>"` (`is_suffix(suffix)` true) respelled
    `"<var>_<suffix>"`, warning once per name; anything else passes through unchanged
    (to be checked, and refused by name, by the caller)."""
    if isinstance(keep, str) or not isinstance(keep, (list, tuple)):
        return keep
    out = []
    for name in keep:
        if isinstance(name, str) and "." in name and is_suffix(split_kept(name)[1]):
            new = kept_name(*split_kept(name))
            warn_deprecated(
                f"{key}: {name!r} is spelled {new!r} since difsim 0.1 (a CF-safe variable "
                "name, also the output's); the dotted spelling is deprecated and will be "
                "removed in 0.3"
            )
            name = new
        out.append(name)
    return type(keep)(out)


def warn_deprecated(message: str) -> None:
    """A `DeprecationWarning` attributed to the first caller outside difsim, so Python's
    default filters show it (to a script, a notebook, or the `difsim` command; under
    `python -m difsim`, difsim's own `__main__` is that caller)."""
    frame, level = inspect.currentframe(), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        if frame.f_globals.get("__name__") == "__main__":
            break
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)
