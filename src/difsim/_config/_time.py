"""The `[time]` section of a config: the time span and the save times."""

from typing import Any

from difsim._config._experiment import TimeSpec
from difsim._config._schema import ConfigError, given, is_number


def parse_time(values: dict[str, Any], parsed: dict[str, Any]) -> TimeSpec:
    """The one place a config checks and builds its times: `[time]` → [`TimeSpec`][]."""
    t0, t1, save = float(values["t0"]), float(values["t1"]), values["save"]
    if not t1 > t0:
        raise ConfigError(f"must be greater than t0 = {t0!r}, got {t1!r}", "time.t1")
    if isinstance(save, list):
        if not save:
            raise ConfigError(
                "the list of save times is empty; give at least one time", "time.save"
            )
        for i, t in enumerate(save):
            if not is_number(t):
                raise ConfigError(
                    f"save[{i}]: expected a number (a time), got {given(t)}", "time.save"
                )
        for i in range(1, len(save)):
            if not save[i] > save[i - 1]:
                raise ConfigError(
                    f"times must be strictly increasing, but save[{i}] = {save[i]} follows "
                    f"save[{i - 1}] = {save[i - 1]}",
                    "time.save",
                )
        for i, t in enumerate(save):
            if not t0 <= t <= t1:
                raise ConfigError(
                    f"time {t} (save[{i}]) lies outside [t0, t1] = [{t0!r}, {t1!r}]",
                    "time.save",
                )
        save = tuple(float(t) for t in save)
    return TimeSpec(t0, t1, save)
