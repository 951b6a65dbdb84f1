"""The config schema's building blocks: value kinds, keys, sections, errors, overrides.

Nothing here knows about models or solvers: [`difsim._config._load`][] assembles these into the
table of sections that experiment configs are checked against.
"""

import copy
import dataclasses
import difflib
import json
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from difsim._core import is_seed


class ConfigError(ValueError):
    """An invalid experiment config.

    **Attributes:** `key`, the dotted path of the culprit (`"solver.rtol"`,
    `"model.parameters.rho"`), or `None` for file-level problems; `problem`, what is wrong;
    `source`, the config file (if any). `str(error)` reads like
    `lorenz.toml: [solver] rtol: expected a positive number, got "1e-6" (a string)`.

    **Example:**

    ```python
    import difsim as ds

    try:
        ds.load_config({"model": {"name": "lorenz"}, "time": {"t1": 1.0}, "solvr": {}})
    except ds.ConfigError as error:
        assert error.key == "solvr"  # the culprit, named
    else:
        raise AssertionError("a misspelt section must be refused")
    ```
    """

    def __init__(self, problem: str, key: str | None = None, source: str | None = None):
        self.problem, self.key, self.source = problem, key, source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [] if self.source is None else [str(self.source)]
        if self.key is not None:
            where.append(display_key(self.key))
        return ": ".join([*where, self.problem])


def display_key(key: str) -> str:
    """`"solver.rtol"` → `"[solver] rtol"`, `"model.state.x"` → `"[model.state] x"`; a key
    with characters that are not printable is shown escaped."""
    if not key.isprintable():
        key = ascii(key)[1:-1]
    section, _, name = key.rpartition(".")
    return f"[{name}]" if not section else f"[{section}] {name}"


# ---------------------------------------------------------------- schema building blocks
@dataclasses.dataclass(frozen=True)
class Kind:
    """The values a key accepts: a test, and how an error message says what it expects."""

    expected: str
    test: Callable[[Any], bool]


def is_number(v: Any) -> bool:
    """A finite int or float (booleans are not numbers here, though Python says so)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


NUMBER = Kind("a number", is_number)
POSITIVE = Kind("a positive number", lambda v: is_number(v) and v > 0)
POSITIVE_INT = Kind("a positive integer", lambda v: is_int(v) and v > 0)
# diffrax counts steps in a 32-bit integer (outside x64), and 2**31 steps would not finish.
MAX_STEPS = Kind("a positive integer below 2**31", lambda v: is_int(v) and 0 < v < 2**31)
STRING = Kind("a non-empty string", lambda v: isinstance(v, str) and v != "")
TABLE = Kind("a table of `name = value` entries", lambda v: isinstance(v, dict))
SAVE = Kind(
    '"final", "dense", a number of save points (an integer >= 1) or a list of times',
    lambda v: v in ("final", "dense") or (is_int(v) and v >= 1) or isinstance(v, list),
)
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
NON_NEGATIVE_INT = Kind("an integer >= 0", lambda v: is_int(v) and v >= 0)
# A PRNG seed: `jax.random.key` takes a signed 64-bit integer (the Python API's check).
SEED = Kind("an integer from 0 to 2**63 - 1", is_seed)
KEEP = Kind(
    '"final", "trajectory" or a list of observable names',
    lambda v: isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
)
BYTES = Kind(
    'a size like "512MiB" or "2GB", or a number of bytes',
    lambda v: isinstance(v, str) or (is_int(v) and v > 0),
)
PLOT = Kind(
    "true, false or a path ending in .png",
    lambda v: isinstance(v, bool) or (isinstance(v, str) and v.lower().endswith(".png")),
)

REQUIRED: Any = object()  # sentinel default: the key must be given


@dataclasses.dataclass(frozen=True)
class Key:
    """One allowed key of a section.

    **Fields:** `kind` (accepted values), `description` (one line, for docs and errors),
    `default` ([`REQUIRED`][] if it must be given; `None` means "unset"), `choices` (a
    function returning the allowed names, read lazily so registries can grow).
    """

    kind: Kind
    description: str
    default: Any = None
    choices: Callable[[], Sequence[str]] | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclasses.dataclass(frozen=True)
class Section:
    """One `[section]` of a config: its keys and the handler that parses them.

    `handler(values, parsed)` receives the checked values (defaults filled in) and the specs
    of the sections parsed before it (in [`SECTIONS`][] order), and returns this section's
    spec. `unsupported` marks a section that is planned but not implemented in this version.
    `entries` (a description) lets the section hold free-form keys besides `keys` (the swept
    parameters of `[sweep]`): they reach the handler as `values["entries"]`, in file order.
    `none_if_absent`: an absent section parses to `None` without calling the handler.
    """

    description: str
    keys: Mapping[str, Key]
    handler: Callable[[dict[str, Any], dict[str, Any]], Any] | None
    required: bool = False
    unsupported: bool = False
    entries: str | None = None
    none_if_absent: bool = False


def check_section(name: str, section: Section, raw: Any) -> dict[str, Any]:
    """The values of section `name` checked against its keys, defaults filled in."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a table (a [{name}] section), got {given(raw)}", name)
    allowed = list(section.keys)
    for key in raw:
        if key not in section.keys and section.entries is None:
            raise ConfigError(
                f"unknown key; allowed keys in [{name}] are {names_list(allowed)}"
                f"{did_you_mean(key, allowed)}",
                f"{name}.{key}",
            )
    values: dict[str, Any] = {}
    if section.entries is not None:
        values["entries"] = {k: v for k, v in raw.items() if k not in section.keys}
    for key, spec in section.keys.items():
        path, value = f"{name}.{key}", raw.get(key)
        if value is None:
            if spec.required:
                raise ConfigError(f"missing required key ({spec.description})", path)
            values[key] = copy.deepcopy(spec.default)
            continue
        if not spec.kind.test(value):
            raise ConfigError(f"expected {spec.kind.expected}, got {given(value)}", path)
        if spec.choices is not None and value not in (choices := list(spec.choices())):
            raise ConfigError(
                f"unknown value {given(value)}; choose one of "
                f"{names_list(choices)}{did_you_mean(value, choices)}",
                path,
            )
        values[key] = value
    return values


# ---------------------------------------------------------------- overrides
def parse_override(text: str) -> tuple[str, Any]:
    """`"solver.rtol=1e-8"` → `("solver.rtol", 1e-8)`: the value is read as a TOML value
    (`20`, `1e-8`, `true`, `[0, 1]`, `"x"`), or kept as a bare string if it is not one."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"an override must look like section.key=value (e.g. solver.rtol=1e-8), got {text!r}"
        )
    try:
        parsed = tomllib.loads(f"v = {value.strip()}")
    except tomllib.TOMLDecodeError:
        return key, value.strip()
    return key, (parsed["v"] if list(parsed) == ["v"] else value.strip())


def apply_overrides(raw: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `raw` with dotted-key `overrides` set (tables created as needed)."""
    out = copy.deepcopy(dict(raw))
    for key, value in overrides.items():
        node, parts = out, key.split(".")
        for i, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(
                    f"cannot set {key!r}: {'.'.join(parts[: i + 1])} is {given(node)}, not a table",
                    key,
                )
        node[parts[-1]] = plain(value)
    return out


# ---------------------------------------------------------------- helpers
def given(value: Any) -> str:
    """How an error message shows a given value: TOML text plus its kind."""
    kinds = (
        (bool, "a boolean"),
        (str, "a string"),
        (int, "an integer"),
        (float, "a number"),
        (list, "a list"),
        (dict, "a table"),
    )
    kind = next((k for t, k in kinds if isinstance(value, t)), type(value).__name__)
    if isinstance(value, dict):
        return kind
    try:
        # JSON spells booleans, numbers, strings and lists as TOML does (`true`, `1e-08`,
        # `"s"`, `[1.0, 2]`), on one line; NaN and infinities read `NaN`/`Infinity`.
        text = json.dumps(value, ensure_ascii=False)
    except TypeError:
        text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({kind})"


def names_list(names: Sequence[str] | Mapping[str, Any]) -> str:
    return ", ".join(repr(n) for n in names) or "(none)"


def did_you_mean(name: Any, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(name), list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def plain(value: Any) -> Any:
    """Python data with numpy scalars, arrays and tuples turned into TOML-like types."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list | np.ndarray):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
