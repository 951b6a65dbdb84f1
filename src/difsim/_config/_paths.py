"""Where a config's paths point: relative to the config file, or to the current directory
for a path typed on the command line."""

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from difsim._config._fit_network import resolve_references
from difsim._config._model import model_file

PATH_KEYS = ("output.path", "output.plot", "output.store", "fit.data", "fit.checkpoint")


def resolve_paths(raw: dict[str, Any], folder: Path, overrides: Mapping[str, Any]) -> dict:
    """`raw` with every relative path made absolute: relative to `folder` (the config
    file's) in the file, to the current directory when set by an override (a path typed on
    the command line means what the shell means). `~` is expanded. Values that are not
    strings are left for the checks to report."""
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for key in (*PATH_KEYS, "model.name"):
        section, _, name = key.partition(".")
        table = out.get(section)
        if not isinstance(table, dict) or not isinstance(table.get(name), str):
            continue
        value = table[name]
        typed = any(key == k or key.startswith(k + ".") for k in overrides)
        base = Path.cwd() if typed else folder
        if key == "model.name":
            file = model_file(value)
            if file is not None:
                table[name] = f"{_absolute(file[0], base)}:{file[1]}"
        elif value and not (key == "output.plot" and not value.lower().endswith(".png")):
            if key == "output.store" and "://" in value:  # an fsspec URL, not a path
                continue
            table[name] = _absolute(value, base)
    resolve_references(out, folder, overrides, _absolute)
    return out


def _absolute(path: str, base: Path) -> str:
    return os.path.normpath(os.path.join(base, os.path.expanduser(path)))
