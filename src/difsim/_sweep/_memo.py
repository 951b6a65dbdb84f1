"""Keys for reusing what a repeated sweep already prepared.

A sweep's preparation (checks, solver objects, the output's layout and attributes, the
settings hash) costs milliseconds of host work; a notebook or an outer loop that runs the
same sweep again pays it every time. [`freeze`][] turns the inputs of that preparation
into a hashable key that compares equal exactly when the inputs are equal — array values
by content, never by identity — so a cache keyed on it can never hand back a stale result.
Inputs of a kind it does not know are refused (`Unkeyable`) and simply not cached.
"""

import hashlib
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from pathlib import PurePath
from typing import Any, Generic, TypeVar

import equinox as eqx
import jax
import numpy as np

_V = TypeVar("_V")


class Unkeyable(TypeError):
    """An input with no content key (an arbitrary object): the result is not cached."""


_SCALARS = (str, bytes, int, float, complex, bool, type(None), np.generic)


def freeze(value: Any) -> Hashable:
    """A hashable key of `value` that is equal for equal contents.

    Scalars are keyed with their type (`1`, `1.0` and `True` differ); arrays (NumPy or
    JAX) by dtype, shape and a SHA-256 of their bytes; mappings, lists and tuples item by
    item (mapping order kept: it is the order of the output's attributes); equinox modules
    (models, diffrax solvers and controllers) by their tree structure — which holds their
    static fields — and their leaves.

    **Raises:** `Unkeyable` for anything else, or a static field that is not hashable.
    """
    # Modules first, asked of the class: `isinstance` on an equinox module reads its
    # `__class__` through the module's Python `__getattribute__`, ~0.3 µs for each try.
    if issubclass(type(value), eqx.Module):
        return _module_key(value)
    if isinstance(value, _SCALARS):
        return (type(value), value)
    if isinstance(value, np.ndarray | jax.Array):
        array = np.asarray(value)
        if array.dtype == object:
            raise Unkeyable("an object array")
        digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()
        return ("array", array.dtype.str, array.shape, digest)
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, Mapping):
        return ("mapping", tuple((freeze(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, PurePath):
        return ("path", str(value))
    raise Unkeyable(f"no content key for a {type(value).__name__}")


# Keys of modules whose leaves cannot change (JAX arrays, scalars), by identity: a model
# passed again (an outer loop, a notebook cell run twice) is not hashed again.
_MODULE_KEYS: dict[int, tuple[weakref.ref, Hashable]] = {}
_IMMUTABLE = (jax.Array, *_SCALARS)


def _module_key(module: eqx.Module) -> Hashable:
    entry = _MODULE_KEYS.get(id(module))
    if entry is not None and entry[0]() is module:
        return entry[1]
    leaves, treedef = jax.tree.flatten(module)
    try:
        hash(treedef)
    except TypeError as e:
        raise Unkeyable(f"a {type(module).__name__} with an unhashable field") from e
    key = _HashedKey(("module", treedef, tuple(freeze(leaf) for leaf in leaves)))
    # A NumPy array leaf could be written into in place: such modules are hashed each time.
    if all(isinstance(leaf, _IMMUTABLE) for leaf in leaves):
        ident = id(module)

        def forget(ref: weakref.ref) -> None:  # the module is gone: so is its entry
            if _MODULE_KEYS.get(ident, (None,))[0] is ref:
                del _MODULE_KEYS[ident]

        try:
            _MODULE_KEYS[ident] = (weakref.ref(module, forget), key)
        except TypeError:  # not weakly referenceable: not remembered
            pass
    return key


class _HashedKey:
    """A key that hashes its contents once: a model's key (a nested tuple of its structure
    and leaves) is looked up on every sweep, and a tuple recomputes its hash each time.
    Equal to another exactly when the contents are equal."""

    __slots__ = ("contents", "_hash")

    def __init__(self, contents: Hashable):
        self.contents = contents
        self._hash = hash(contents)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, _HashedKey)
            and self._hash == other._hash
            and self.contents == other.contents
        )


_MISSING = object()


class LRU(Generic[_V]):
    """A small least-recently-used map: `get(key, make)` returns `(value, hit)`: the value
    stored under `key` and `True`, or `make()` (stored) and `False`. A `key` of `None`
    means "do not cache"."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, _V] = OrderedDict()

    def get(self, key: Hashable | None, make: Callable[[], _V]) -> tuple[_V, bool]:
        if key is None:
            return make(), False
        value = self._items.get(key, _MISSING)  # each look-up hashes the key again
        if value is not _MISSING:
            self._items.move_to_end(key)
            return value, True
        value = make()
        self._items[key] = value
        while len(self._items) > self.size:
            self._items.popitem(last=False)
        return value, False

    def clear(self) -> None:
        self._items.clear()

    def values(self) -> list[_V]:
        """The values held, least recently used first."""
        return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)
