"""A small TOML writer for configs (the standard library only reads TOML).

It covers what configs hold: tables (nested), strings, booleans, integers, floats and
lists of those. `tomllib.loads(dumps(data)) == data` for such data.
"""

import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def _string(text: str) -> str:
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:  # control characters must be escaped
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def format_key(key: str) -> str:
    """A TOML key: bare when possible, else quoted."""
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def format_value(value: Any) -> str:
    """One value as TOML text (`1e-08`, `"tsit5"`, `true`, `[0.0, 1.0]`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # shortest text that reads back to the same float
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    raise TypeError(f"cannot write a {type(value).__name__} as a TOML value")


def dumps(data: Mapping[str, Any]) -> str:
    """`data` (a mapping of tables and values) as TOML text: plain values first, then one
    `[table]` block per sub-mapping (nested ones as `[a.b]`)."""
    blocks: list[list[str]] = []

    def table(prefix: str, mapping: Mapping[str, Any]) -> None:
        lines = [f"[{prefix}]"] if prefix else []
        subtables = []
        for key, value in mapping.items():
            if isinstance(value, Mapping):
                subtables.append((key, value))
            else:
                lines.append(f"{format_key(key)} = {format_value(value)}")
        if len(lines) > (1 if prefix else 0) or (prefix and not subtables):
            blocks.append(lines)
        for key, value in subtables:
            table(f"{prefix}.{format_key(key)}" if prefix else format_key(key), value)

    table("", data)
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
