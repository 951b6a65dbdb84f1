"""Shared parts of the fuzz suite (tests/test_fuzz_*.py): hypothesis settings, a TOML
writer for generated values, running the command line in-process, the outcome rules.

The rules every generated case must follow (issue 14): `difsim check` exits 0 or 2, `difsim
run` exits 0, 1 (the solve failed, said on one line; difsim's log lines may come before it)
or 2; an exit 2 prints exactly one line, `difsim: error: <config>: [section] key: ...`, and
no traceback; and no file that existed before a failed run is changed, removed or joined by
a new one.

Profiles: the default (CI) runs few examples, derandomized, so CI is deterministic;
`HYPOTHESIS_PROFILE=long` runs 20 times as many, randomized, for local hunting (figures in
docs/reliability.md).
"""

import contextlib
import datetime
import hashlib
import io
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings, strategies as st

from difsim._app._cli import main

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"


def fuzz_settings(examples: int, long: int | None = None) -> settings:
    """`examples` cases in CI (derandomized); with the long profile `long` (default 20
    times as many), randomized."""
    return settings(
        max_examples=(long or 20 * examples) if LONG else examples,
        deadline=None,
        derandomize=not LONG,
        database=None,
        print_blob=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
    )


# ---------------------------------------------------------------- generated values
# Text without surrogates (not encodable) and without ':' (a `[model] name` with one would
# import a module: only the names in MODEL_NAMES may do that).
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters=":"), max_size=12)
WORDS = st.sampled_from(
    [
        "", " ", "final", "trajectory", "tsit5", "kvaerno5", "euler", "dopri8", "pid",
        "constant", "float32", "float64", "float16", "checkpoint", "forward", "grid", "zip",
        "random", "lhs", "x_max", "z_final", "x_mean", "I_max", "positive", "identity",
        "softplus", "gaussian", "lognormal", "adam", "levenberg_marquardt", "512MiB", "1e400GB",
        "0B", "-1GiB", "runs/out.nc", "out.csv", "out.png", "../up.nc", "data.csv", "data.nc",
        "/dev/null", ".", "state", "state.x", "rho", "time", "year", "hare", "sample", "∞",
        "1e-8", "true", "nan",
    ]
)  # fmt: skip
MODEL_NAMES = st.sampled_from(
    [
        "lorenz", "heat_1d", "lotka_volterra", "lorenzz", "", "difsim.models:Lorenz",
        "difsim.models:MODELS", "json:JSONDecoder", "os:path", "missing_model.py:M",
        "no_such_module_xyz:M", ":", "difsim.models:", "difsim:Model",
    ]
)  # fmt: skip
NUMBERS = st.one_of(
    st.integers(min_value=-(2**65), max_value=2**65),
    st.sampled_from([0, 1, 2, 3, -1, 101, 10**10, 10**12, 2**31, 2**63 - 1, 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e-12, 1e-8, 1e-3, 0.5, 1.0, 1e6, 1e300]),
)
DATES = (
    st.datetimes(min_value=datetime.datetime(1, 1, 1), max_value=datetime.datetime(9999, 12, 31))
    | st.dates()
)
SCALARS = st.one_of(st.booleans(), NUMBERS, TEXT, WORDS, DATES)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT | WORDS, inner, max_size=3),
    max_leaves=6,
)


# ---------------------------------------------------------------- TOML
def toml_value(value: Any) -> str:
    """`value` as TOML (inline tables for nested dicts); any generated value fits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _string(text: str) -> str:
    # JSON string escapes are TOML basic-string escapes; DEL must be escaped in TOML too.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def dumps(config: dict[str, Any]) -> str:
    """A config dict as TOML: one `[section]` per table, scalars at the top first."""
    top = [f"{_string(k)} = {toml_value(v)}" for k, v in config.items() if not isinstance(v, dict)]
    tables = [
        f"[{_string(k)}]\n" + "".join(f"{_string(n)} = {toml_value(x)}\n" for n, x in v.items())
        for k, v in config.items()
        if isinstance(v, dict)
    ]
    return "\n".join([*top, *tables]) + "\n"


# ---------------------------------------------------------------- running and the rules
def run_cli(*argv: str) -> tuple[int, str, str]:
    """`difsim *argv` in this process: `(exit code, stdout, stderr)`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse's own errors
            code = e.code
    return code, out.getvalue(), err.getvalue()


SECTIONS = ("model", "time", "solver", "output", "sweep", "fit")
_CULPRIT = re.compile(r"\[(" + "|".join(SECTIONS) + r")[\].]")


def assert_clean_error(code: int, err: str, config: Path, extra_sections=()) -> None:
    """An exit code 2 prints one line on stderr naming the config and the culprit."""
    assert code == 2, (code, err)
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    line = lines[0]
    assert line.startswith("difsim: error: "), line
    shown = [s if s.isprintable() else ascii(s)[1:-1] for s in extra_sections]
    names_key = _CULPRIT.search(line) or any(f"[{s}" in line for s in shown if s)
    file_level = f"{config}: invalid TOML" in line or "override must look like" in line
    assert names_key or file_level, line
    assert str(config) in line or "override must look like" in line, line


# The one line of a failed solve (exit 1): a single run's error, or a sweep's count of
# failed trajectories.
_FAILURE = re.compile(r"^difsim: (error: .* failed \[|warning: \d+ of \d+ trajectories failed)")


def assert_one_failure_line(err: str) -> None:
    """An exit 1 (the solve failed) prints exactly one line saying so; any other line on
    stderr is one of difsim's log lines (`difsim: sweep: the diffrax engine runs this
    sweep (...)`), never a traceback or a second error."""
    lines = err.strip().splitlines()
    failures = [line for line in lines if _FAILURE.match(line)]
    assert len(failures) == 1, err
    assert all(line.startswith("difsim: ") for line in lines), err
    assert "Traceback" not in err and not any(" error: " in x for x in lines if x not in failures)


def outcome(code: int, err: str) -> str:
    """A short label of a run's outcome for hypothesis's statistics: the exit code and,
    for an error, the section it names (`exit 2 [solver]`)."""
    if code != 2:
        return f"exit {code}"
    named = _CULPRIT.search(err)
    return f"exit 2 [{named.group(1)}]" if named else "exit 2 (file level)"


def snapshot(folder: Path) -> dict[str, str]:
    """`{relative path: sha256}` of every file under `folder` (folders as `"dir"`)."""
    out = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out
