"""Loading the model code a config names: a Python file, or an importable module.

Naming code in a config runs it: checking the config (`difsim check`) imports the module or
runs the file, top-level statements included, before the class is even looked up. So two
rules keep what runs to what the config names:

- **A file** (`name = "models/heat.py:Heat"`) is run as a module of its own, under a name
  derived from its absolute path (`difsim_model_heat_<hash>`), never as `heat`: it cannot
  shadow or be shadowed by an installed module, and nothing is added to `sys.path`. A
  relative path is relative to the config file's folder (resolved when the config is
  loaded).
- **A module** (`name = "package.module:Class"`) is imported as Python would, except that
  the current working directory is never searched: `python -m difsim` puts it first on
  `sys.path`, so a stray `package.py` there would otherwise run. A module found (or
  shadowing another) there is refused, with the file form to use instead.
"""

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from difsim._config._schema import ConfigError


def load_model_file(path: Path, key: str) -> ModuleType:
    """The module of the Python file `path` (run once per process, path and contents: a
    file edited since it was run is run again, as a new module, so a sweep of it never
    reuses the old code or its results).

    **Raises:** [`ConfigError`][] under `key` if it is missing, not a `.py` file, or fails
    while running (with the exception's type and message).
    """
    if not path.exists():
        raise ConfigError(
            f"model file {str(path)!r} does not exist (a relative path is relative to the "
            "config file's folder)",
            key,
        )
    if not path.is_file() or path.suffix != ".py":
        raise ConfigError(f"model file {str(path)!r} is not a Python (.py) file", key)
    absolute = os.path.abspath(path)
    digest = hashlib.sha256(absolute.encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"difsim_model_{stem}_{digest}"
    try:
        source = Path(absolute).read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read model file {absolute!r} ({e.strerror or e})", key) from e
    content = hashlib.sha256(source).hexdigest()
    earlier = sys.modules.get(name)
    if earlier is not None and getattr(earlier, _CONTENT, None) == content:
        return earlier
    spec = importlib.util.spec_from_file_location(name, absolute)
    module = importlib.util.module_from_spec(spec)
    setattr(module, _CONTENT, content)
    # Registered before running, as an import would be: dataclasses (and so equinox
    # modules) look their own module up while the class body is built.
    sys.modules[name] = module
    try:  # if the file changes meanwhile, its new hash differs from `content`: run again
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as e:  # the user's file may fail in any way
        if earlier is None:
            del sys.modules[name]
        else:
            sys.modules[name] = earlier
        raise ConfigError(
            f"running model file {absolute!r} failed ({type(e).__name__}: {e})", key
        ) from e
    return module


# The SHA-256 of the source a model file's module was run from (to tell an edited file).
_CONTENT = "__difsim_source_sha256__"


def import_model_module(module_name: str, qualname: str, key: str) -> ModuleType:
    """`importlib.import_module(module_name)`, refused when the module would come from the
    current working directory.

    **Raises:** [`ConfigError`][] under `key`.
    """
    top = module_name.partition(".")[0]
    if top and top not in sys.modules:
        here = _find(top, with_cwd=True)
        if here is not None and _where(here) != _where(_find(top, with_cwd=False)):
            found = here.origin if here.has_location else next(iter(_where(here)[1]), top)
            raise ConfigError(
                f"module {top!r} would be imported from the current directory ({found}); "
                "difsim never imports from the working directory: name the file instead, "
                f'e.g. name = "{found}:{qualname}" (or a path relative to the config file\'s '
                "folder), or install the package",
                key,
            )
    try:
        return importlib.import_module(module_name)
    except Exception as e:  # the user's module may fail in any way while importing
        raise ConfigError(
            f"cannot import module {module_name!r} ({type(e).__name__}: {e})", key
        ) from e


def _find(name: str, *, with_cwd: bool) -> importlib.machinery.ModuleSpec | None:
    """The spec Python's import system would find for the top-level module `name` (nothing
    is run), with or without the `sys.path` entries that mean the working directory."""
    if with_cwd:
        try:
            return importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
    cwd = os.path.realpath(os.getcwd())
    path = [p for p in sys.path if os.path.realpath(p or os.curdir) != cwd]
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        is_path_finder = finder is importlib.machinery.PathFinder
        spec = find(name, path) if is_path_finder else find(name, None)
        if spec is not None:
            return spec
    return None


def _where(spec: importlib.machinery.ModuleSpec | None) -> tuple[str | None, tuple[str, ...]]:
    if spec is None:
        return None, ()
    return spec.origin, tuple(spec.submodule_search_locations or ())
