"""JAX's persistent compilation cache for `difsim run` (docs: "Compilation cache" in gpu.md).

`difsim run` stores every program it compiles in a folder, so running a config again (or
another config that compiles the same programs: same model class, solver, save times
count, dtype, chunk size) loads them instead of compiling. The folder is, first found:

1. `--compile-cache DIR` (`--no-compile-cache`: no cache);
2. `DIFSIM_COMPILE_CACHE=DIR` (`off`, `0`, `false`, `no` or empty: no cache);
3. JAX's own `JAX_COMPILATION_CACHE_DIR`;
4. the user's cache folder: `$XDG_CACHE_HOME/difsim/jax`, else `~/.cache/difsim/jax`
   (macOS `~/Library/Caches/difsim/jax`, Windows `%LOCALAPPDATA%\\difsim\\Cache\\jax`).

JAX never stores a program that calls back to the host. diffrax checks `SaveAt(ts=...)`
inside every solve with `equinox.error_if`, a host callback, even under `throw=False`;
difsim checks the same on the host before any solve (`SaveSpec`), so with the cache on,
equinox's in-program checks are compiled as "NaN on failure" (its `EQX_ON_ERROR=nan`)
unless `EQX_ON_ERROR` is set. A check that fails then leaves NaN, which difsim's statuses
report (`NONFINITE` for a solve, rejected steps in a fit), not its message: rerun with
`--no-compile-cache` to see it. Progress reported from inside a solve is a callback too
(PDE runs, `--progress`): those programs are compiled every time.
"""

import dataclasses
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import jax

from difsim._compat import equinox_checks_as_nan

ENV = "DIFSIM_COMPILE_CACHE"
_OFF = {"", "0", "off", "false", "no", "none"}
_EVENTS = {
    "/jax/compilation_cache/compile_requests_use_cache": "requests",
    "/jax/compilation_cache/cache_hits": "loaded",
    "/jax/compilation_cache/cache_misses": "stored",  # recorded when JAX writes an entry
}


def cache_folder(
    setting: str | os.PathLike | bool | None = None, environ: Mapping[str, str] | None = None
) -> Path | None:
    """The compilation cache folder, or `None` for no cache.

    `setting`: the command line's (`--compile-cache DIR` → `DIR`, `--no-compile-cache` →
    `False`, neither → `None`); then the environment as in the module's docs.
    """
    env = os.environ if environ is None else environ
    if setting is False:
        return None
    if setting not in (None, True):
        return Path(setting).expanduser()
    if ENV in env:
        value = env[ENV].strip()
        return None if value.lower() in _OFF else Path(value).expanduser()
    if env.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(env["JAX_COMPILATION_CACHE_DIR"]).expanduser()
    return _user_cache(env, sys.platform) / "jax"


def _user_cache(env: Mapping[str, str], platform: str) -> Path:
    """difsim's folder among the user's caches (where `platformdirs.user_cache_dir("difsim")`
    puts it)."""
    if platform == "win32":
        base = env.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "difsim" / "Cache"
    if platform == "darwin":
        return Path.home() / "Library" / "Caches" / "difsim"
    xdg = env.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative path is invalid and is to be ignored.
    return (Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache") / "difsim"


@dataclasses.dataclass
class CacheUse:
    """What the cache did in this process: programs `loaded` from it, compiled and `stored`,
    and compiled but not storable (`compiled`: they call back to the host)."""

    folder: Path
    requests: int = 0
    loaded: int = 0
    stored: int = 0
    checks_as_nan: bool = False

    @property
    def compiled(self) -> int:
        return max(self.requests - self.loaded - self.stored, 0)

    def _event(self, event: str, **kwargs) -> None:
        name = _EVENTS.get(event)
        if name is not None:
            setattr(self, name, getattr(self, name) + 1)

    def summary(self) -> str:
        """`"~/.cache/difsim/jax: 5 programs loaded, 1 compiled and stored"`."""
        parts = [f"{self.loaded} loaded", f"{self.stored} compiled and stored"]
        if self.compiled:
            parts.append(f"{self.compiled} compiled, not storable (host callbacks)")
        return f"{_short(self.folder)}: programs " + ", ".join(parts)


def _short(path: Path) -> str:
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def enable_compile_cache(folder: Path) -> CacheUse | None:
    """Turn JAX's persistent compilation cache on in `folder` (created if missing) for this
    process, storing every program however fast it compiled; `None` (with a warning on
    stderr) if the folder cannot be used, and the run goes on without a cache."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "not writable")
    except OSError as e:
        print(
            f"difsim: warning: compilation cache {folder} cannot be used "
            f"({e.strerror or e}); compiling without it (--no-compile-cache to silence)",
            file=sys.stderr,
        )
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    # JAX's default stores only programs that took over 1 s to compile; a CLI run compiles
    # a few programs of 0.05-2 s each, and loading one costs ~1 ms.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    use = CacheUse(folder, checks_as_nan=_checks_as_nan())
    jax.monitoring.register_event_listener(use._event)
    return use


def _checks_as_nan() -> bool:
    """Compile equinox's runtime checks as NaN-on-failure (no host callback), unless the
    user chose a mode with `EQX_ON_ERROR`. Returns whether the mode was changed."""
    if "EQX_ON_ERROR" in os.environ:
        return False
    return equinox_checks_as_nan()  # equinox's private setting: `difsim/_compat.py`
