"""What decides a sweep's numbers besides its settings: the model's code, the versions of
difsim and of the libraries it computes with, the XLA setting and the devices.

All of it is part of a sweep's identity ([`settings`][] in `_layout`, and the setups of
`_setup` and `_mc_setup`), so a sweep of an edited model file, of a class redefined in a
notebook, on other devices or with other XLA flags is a different sweep: its stored results
are never reused (`docs/sweeps.md`, "Output file and resume").

**The model's code** ([`code_text`][]) is a SHA-256 over

- the source of the module of the model's class and of each base class outside difsim,
  where Python has it (a file, a cell a notebook keeps in `linecache`): any edit there,
  a helper function or a constant included, changes it;
- and always, what actually runs: the bytecode of every function of those classes (with
  its constants, defaults and closure values) and, transitively, of the functions and the
  values of the globals they name, outside difsim and the libraries whose versions are
  recorded. A class defined where no source is kept (`python -c`, some interactive
  shells) is identified by that alone, never by nothing; and a module whose file was
  edited but not re-imported (the old code still runs) is not mistaken for the new one.
"""

import functools
import hashlib
import inspect
import os
import sys
import types
import weakref
from typing import Any

import equinox as eqx
import jax
import numpy as np

from difsim._io._cf import versions

# Code not walked: its version is recorded (`versions`), or it is Python's own.
_LIBRARIES = frozenset(
    {"difsim", "jax", "jaxlib", "equinox", "diffrax", "lineax", "optimistix", "numpy", "scipy",
     "jaxtyping", "typing_extensions"}
)  # fmt: skip
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins"}
# Class attributes that Python, dataclasses, abc and equinox add (not the user's code).
_SKIP_ATTRS = frozenset(
    {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__",
     "__abstractmethods__", "__abstractvars__", "__abstractclassvars__", "_abc_impl",
     "__dataclass_params__", "__dataclass_fields__", "__match_args__", "__slots__",
     "__firstlineno__", "__static_attributes__", "__orig_bases__", "__parameters__"}
)  # fmt: skip
_MAX_ITEMS = 2000  # code objects and values walked per class: bounded work on odd globals
_MAX_SORT_ITEMS = 64  # walked per entry to order a set or dict (`_alone`)

_CODE: "weakref.WeakKeyDictionary[type, str]" = weakref.WeakKeyDictionary()


def code_text(cls: type) -> str:
    """`"Decay (decay.py) sha256:<16 hex>"`: the model class `cls`, where its code is, and
    the hash of its code (see the module docstring; `"(no source: bytecode)"` where
    Python keeps no source). Computed once per class object: a module run again (an edited
    file) makes new classes."""
    found = _CODE.get(cls)
    if found is None:
        found = _CODE[cls] = _code_text(cls)
    return found


def _code_text(cls: type) -> str:
    classes = [c for c in cls.__mro__ if c is cls or not _is_library(c.__module__)]
    digest = hashlib.sha256()
    sourced = True
    for name in dict.fromkeys(c.__module__ for c in classes):
        source = _module_source(name, cls if name == cls.__module__ else None)
        sourced &= source is not None
        digest.update(f"module {name}\0".encode() + (source or b"\0no source\0"))
    walk = _Walk(digest)
    for c in classes:
        walk.cls(c)
    return f"{cls.__qualname__} ({_where(cls, sourced)}) sha256:{digest.hexdigest()[:16]}"


def _where(cls: type, sourced: bool) -> str:
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    where = os.path.basename(file) if file else cls.__module__
    return where if sourced else f"{where}, no source: bytecode"


def _module_source(name: str, cls: type | None) -> bytes | None:
    """The source of module `name` (or, where the module has none, of `cls`: a notebook
    keeps its cells), as Python's `linecache` has it; `None` where there is none."""
    module = sys.modules.get(name)
    for obj in (module, cls):
        if obj is None:
            continue
        try:
            return inspect.getsource(obj).encode()
        except (OSError, TypeError):  # no file: built in, `python -c`, an interactive shell
            continue
    return None


def _is_library(module: str | None) -> bool:
    top = (module or "").partition(".")[0]
    return top in _LIBRARIES or top in _STDLIB


class _Walk:
    """Feeds the bytecode and values a class's functions reach into `digest`, once each."""

    def __init__(self, digest, left: int = _MAX_ITEMS):
        self.digest, self.seen, self.open, self.left = digest, set(), set(), left

    def put(self, text: str) -> None:
        self.digest.update(text.encode() + b"\0")

    def cls(self, c: type) -> None:
        if not self._first(c):
            return
        self.put(f"class {c.__module__}.{c.__qualname__}")
        for name, value in c.__dict__.items():
            if name not in _SKIP_ATTRS:
                self.put(f"attr {name}")
                self.value(value)

    def value(self, v: Any) -> None:
        """Code is walked; plain values are written; other objects by their type."""
        if isinstance(v, staticmethod | classmethod):
            v = v.__func__
        if isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, property):
            for f in (v.fget, v.fset, v.fdel):
                self.value(f)
        elif isinstance(v, functools.partial):
            self.value(v.func)
            self.value(v.args)
            self.value(v.keywords)
        elif isinstance(v, type):
            self.put(f"type {v.__module__}.{v.__qualname__}")
            if not _is_library(v.__module__):
                self.cls(v)
        elif isinstance(v, types.ModuleType):
            self.put(f"module {v.__name__}")
        elif isinstance(v, str | bytes | int | float | complex | bool | type(None)):
            self.put(f"{type(v).__name__} {v!r}")
        elif isinstance(v, tuple | list | frozenset | set | dict):
            self._container(v)
        elif isinstance(v, np.ndarray | np.generic | jax.Array):
            self._array(v)
        else:
            self._object(v)

    def _object(self, v) -> None:
        """An object of another kind: its type; for one of a class outside the libraries
        (a settings object a helper reads) its class and attributes too; for a library's
        wrapper of a function (`jax.jit`, `jax.custom_jvp`, `eqx.filter_jit`) that
        function; for a library's module (`eqx.nn.MLP`, a diffrax term) its fields."""
        kind = type(v)
        self.put(f"object {kind.__module__}.{kind.__qualname__}")
        if _is_library(kind.__module__):
            wrapped = _wrapped(v)
            if wrapped is not None:
                self.function(wrapped)
            elif isinstance(v, eqx.Module):  # its arrays (weights) and functions
                self._container(vars(v))
            return
        self.cls(kind)
        attributes = getattr(v, "__dict__", None)
        if isinstance(attributes, dict):
            self._container(attributes)

    def _array(self, v) -> None:
        try:
            a = np.asarray(v)
        except Exception:  # a traced value: not a constant
            self.put(f"object {type(v).__qualname__}")
            return
        if a.dtype == object:
            self.put(f"object array {a.shape}")
        else:
            self.put(f"array {a.dtype.str} {a.shape}")
            self.digest.update(np.ascontiguousarray(a).tobytes())

    def _container(self, v) -> None:
        # Not deduplicated by identity (which constants share one object depends on
        # whether the module was compiled or loaded from its .pyc): only cycles are cut.
        if id(v) in self.open or len(self.open) > 32:
            self.put("cycle")
            return
        self.open.add(id(v))
        try:
            self._items(v)
        finally:
            self.open.discard(id(v))

    def _items(self, v) -> None:
        # A set iterates in the order of its members' hashes (ids, and string hashes that
        # differ between processes), and a dict in the order it was filled, perhaps from a
        # set: both are walked in the order of a hash of each entry, the same everywhere.
        # (Not by `repr`: an object's default one holds its memory address.)
        if isinstance(v, dict):
            items = sorted(v.items(), key=lambda kv: (_alone(kv[0]), _alone(kv[1])))
        elif isinstance(v, set | frozenset):
            items = list(enumerate(sorted(v, key=_alone)))
        else:
            items = list(enumerate(v))
        self.put(f"{type(v).__name__} {len(items)}")
        for key, item in items:
            self.value(key)
            self.value(item)
            self.left -= 1
            if self.left < 0:
                self.put("truncated")
                return

    def function(self, f: types.FunctionType) -> None:
        if not self._first(f):
            return
        self.put(f"function {f.__module__}.{f.__qualname__}")
        if _is_library(f.__module__):  # named only: its library's version is recorded
            return
        self.code(f.__code__, f.__globals__)
        self.value(f.__defaults__)
        self.value(f.__kwdefaults__)
        for cell in f.__closure__ or ():
            try:
                self.value(cell.cell_contents)
            except ValueError:  # an empty cell
                self.put("empty cell")

    def code(self, co: types.CodeType, scope: dict) -> None:
        """A code object: its bytecode and names (not its file or line numbers), its
        constants (nested code included), and the globals its names find in `scope`."""
        self.digest.update(co.co_code)
        # The signature too: `f(a, b)` and `f(a, *, b)` compile to the same bytecode.
        counts = (co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags)
        self.put(" ".join((*map(str, counts), *co.co_names, "|", *co.co_varnames, "|",
                           *co.co_freevars)))  # fmt: skip
        for const in co.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const, scope)
            else:
                self.value(const)
        for name in co.co_names:
            if name in scope and not name.startswith("__"):
                self.put(f"global {name}")
                self.value(scope[name])

    def _first(self, obj: Any) -> bool:
        """Whether the function or class `obj` is new to the walk (and there is room left
        to walk it)."""
        if id(obj) in self.seen:
            self.put("seen")
            return False
        self.left -= 1
        if self.left < 0:
            self.put("truncated")
            return False
        self.seen.add(id(obj))
        return True


def value_digest(value: Any) -> str:
    """A SHA-256 (hex) of a parameter's value, the same in every process: its tree
    structure with every node's static fields, and each leaf (arrays by dtype, shape and
    bytes; functions, such as a network's activation, by their code; other values as the
    code hash writes them). Never by `repr`, which holds memory addresses (a `jax.jit`
    function's, a static callable field's)."""
    digest = hashlib.sha256()
    leaves, treedef = jax.tree.flatten(value)
    _structure(digest, treedef)
    for leaf in leaves:
        if isinstance(leaf, np.ndarray | np.generic | jax.Array):
            _Walk(digest).value(leaf)
        else:
            digest.update(b"leaf\0")
            _Walk(digest).value(leaf)
    return digest.hexdigest()


def _structure(digest, treedef) -> None:
    """Feed a tree structure into `digest`: each node's type and static data."""
    data = treedef.node_data()
    if data is None:
        digest.update(b"*\0")
        return
    kind, aux = data
    digest.update(f"node {kind.__module__}.{kind.__qualname__}\0".encode())
    _Walk(digest).value(aux)
    children = jax.tree_util.treedef_children(treedef)
    digest.update(f"children {len(children)}\0".encode())
    for child in children:
        _structure(digest, child)


def _wrapped(v: Any) -> types.FunctionType | None:
    """The function a library's wrapper `v` calls (its `__wrapped__`), if any."""
    try:
        wrapped = getattr(v, "__wrapped__", None)
    except Exception:  # an object whose attribute lookup fails in its own way
        return None
    return wrapped if isinstance(wrapped, types.FunctionType) else None


def _alone(value: Any) -> str:
    """A hash of `value` walked on its own (at most `_MAX_SORT_ITEMS` items): a key to
    order a set's members or a dict's entries by, the same in every process."""
    walk = _Walk(hashlib.sha256(), left=_MAX_SORT_ITEMS)
    walk.value(value)
    return walk.digest.hexdigest()


def environment(devices) -> dict[str, str]:
    """The settings entries of where a sweep runs: `"xla"` (the `XLA_FLAGS` environment
    value now; XLA read it when JAX started) and `"devices"` (how many, which kind), of
    `devices` (`None`: all of them). Chunks computed with other flags or on another device
    count may differ in the last bits, so a resume there is a different sweep."""
    devices = tuple(jax.devices()) if devices is None else tuple(devices)
    kinds = sorted({_kind(d) for d in devices})
    count = f"{len(devices)} x {', '.join(kinds)}"
    return {"xla": os.environ.get("XLA_FLAGS", ""), "devices": count}


def environment_attrs(env: dict[str, str]) -> dict[str, str]:
    """The global attributes of [`environment`][]'s entries: `xla_flags`, `devices`."""
    return {"xla_flags": env["xla"], "devices": env["devices"]}


def _kind(device) -> str:
    platform, kind = device.platform, getattr(device, "device_kind", "")
    return platform if not kind or kind == platform else f"{platform} ({kind})"


@functools.cache
def versions_text() -> str:
    """The `"versions"` settings entry: difsim's and its libraries' versions, and Python's
    (its bytecode is part of the code's hash)."""
    found = ", ".join(f"{name} {v}" for name, v in versions().items())
    return f"{found}, python {sys.version.split()[0]}"
