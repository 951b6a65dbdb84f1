"""CF-style global attributes of every difsim output: `Conventions`, `history`, `source`.

`history` records when an output was made and by what: the command line of a `difsim`
run (set by the CLI through [`recording_command`][]) or, from Python, the call that made
it. Its timestamp is the one part of an output that differs between two otherwise
identical runs, so:

- with the environment variable `SOURCE_DATE_EPOCH` set (seconds since 1970, the
  reproducible-builds convention) the timestamp is that moment, and outputs are
  byte-for-byte reproducible;
- a resumed sweep reuses the `history` its first run stored with its chunks, so the
  assembled file is the one an uninterrupted run would have written.
"""

import contextlib
import datetime
import functools
import os
from collections.abc import Iterator
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import Any

CONVENTIONS = "CF-1.11"

# The command that is making outputs (e.g. "difsim run experiments/lorenz.toml"), or None
# for a Python call. A ContextVar, not a global: threads and async tasks keep their own.
_COMMAND: ContextVar[str | None] = ContextVar("difsim_command", default=None)


@contextlib.contextmanager
def recording_command(command: str) -> Iterator[None]:
    """Within this block, outputs record `command` in their `history` attribute."""
    token = _COMMAND.set(command)
    try:
        yield
    finally:
        _COMMAND.reset(token)


def history_time() -> str:
    """Now (UTC, ISO 8601, seconds), or the moment `SOURCE_DATE_EPOCH` names.

    **Raises:** `ValueError` if `SOURCE_DATE_EPOCH` is set but not an integer.
    """
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None:
        try:
            moment = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
        except ValueError:
            raise ValueError(
                f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {epoch!r}"
            ) from None
    else:
        moment = datetime.datetime.now(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def history_line(call: str) -> str:
    """One CF `history` line: `"<timestamp>: <command>"`, the command being the recorded
    command line or, outside one, the Python `call` that made the output (e.g.
    `"difsim.simulate(Lorenz)"`)."""
    command = _COMMAND.get()
    return f"{history_time()}: {command if command is not None else call}"


@functools.cache  # importlib.metadata look-ups cost ~1 ms each: once per process
def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:  # running from a source tree (PEP 440 local version)
        return "0+unknown"


def versions() -> dict[str, str]:
    """`{package: version}` of difsim and the libraries that decide its numbers."""
    names = ("difsim", "jax", "jaxlib", "diffrax", "equinox")
    return {package: _version(package) for package in names}


def difsim_version() -> str:
    """The installed difsim's version (`"0+unknown"` in a bare source tree)."""
    return _version("difsim")


def cf_attrs(call: str, history: str | None = None) -> dict[str, Any]:
    """The global attributes every difsim output starts with: `Conventions`, `history`
    (`history`, or a new line for `call`, see [`history_line`][]), `source` (difsim and
    its numerical libraries) and each version on its own."""
    found = versions()
    attrs: dict[str, Any] = dict(
        Conventions=CONVENTIONS,
        history=history if history is not None else history_line(call),
        source=", ".join(f"{name} {v}" for name, v in found.items()),
    )
    attrs.update({f"{name}_version": v for name, v in found.items()})
    return attrs


# Units `time_units` may name that CF recognises as a time (standard_name "time", axis T).
_TIME_UNITS = {"s", "second", "seconds", "sec", "ms", "us", "ns", "min", "minute", "minutes",
               "h", "hr", "hour", "hours", "d", "day", "days", "week", "weeks", "year", "years",
               "yr", "a"}  # fmt: skip


# Global attributes CF gives a meaning: a model parameter of that name (Heat's `source`)
# is stored as `parameter_<name>` instead.
CF_GLOBALS = frozenset(
    {"Conventions", "history", "source", "title", "institution", "references", "comment"}
)


def parameter_attr(name: str) -> str:
    """The global attribute holding scalar parameter `name`: `name`, or
    `parameter_<name>` where CF reserves `name` (e.g. `source`)."""
    return f"parameter_{name}" if name in CF_GLOBALS else name


def per_time(units: str, time_units: str | None) -> str:
    """The units of a rate of a quantity in `units`: `"m"` per `"s"` is `"m/s"`; per
    undeclared or dimensionless time (`None`, `"1"`) the units stay `units`."""
    if not time_units or time_units == "1":
        return units

    def group(text: str) -> str:
        return text if text.isalnum() else f"({text})"

    return f"{group(units)}/{group(time_units)}"


def time_attrs(units: str | None) -> dict[str, str]:
    """Attributes of a `time` coordinate in `units` (undeclared: `"1"`, model units):
    `standard_name`/`axis` only where the units are a time CF recognises."""
    units = units or "1"
    attrs = dict(long_name="time", units=units)
    if units in _TIME_UNITS:
        attrs.update(standard_name="time", axis="T")
    return attrs
