"""A sweep's Dataset built from its flat results through a template made once per setup.

A sweep repeated in a loop (an outer optimisation, a notebook cell run again) builds one
Dataset per call. `xr.Dataset(...)` checks, aligns and indexes its inputs each time, and
even `Dataset.copy(data=...)` of a template re-checks every variable: at 1e4 Lorenz points
that was ~5 % of the whole sweep. The template's variables, coordinates and indexes were
checked when it was built, so [`DatasetTemplate.fill`][] only swaps in the new arrays.
"""

import functools
from collections.abc import Callable

import numpy as np
import xarray as xr

from difsim._sweep._layout import OutputLayout


def _assembled(dims: tuple[str, ...], data: np.ndarray, attrs: dict) -> xr.Variable:
    """`xr.Variable(dims, data, attrs, fastpath=True)` from its four slots directly: the
    constructor runs ~9 Python calls (dimension parsing, attribute setting through a Python
    `__setattr__`), ~15 µs of a repeated small sweep's five variables on cold caches."""
    var = object.__new__(xr.Variable)
    put = object.__setattr__
    put(var, "_dims", dims)
    put(var, "_data", data)
    put(var, "_attrs", dict(attrs) if attrs else None)
    put(var, "_encoding", None)
    return var


def _constructed(dims: tuple[str, ...], data: np.ndarray, attrs: dict) -> xr.Variable:
    return xr.Variable(dims, data, attrs, fastpath=True)


@functools.cache
def _new_variable() -> Callable[[tuple[str, ...], np.ndarray, dict], xr.Variable]:
    """[`_assembled`][] where it builds what xarray's constructor builds (checked once per
    process on a probe, slot by slot), else the constructor: a future xarray that lays
    out its variables otherwise is met with the public path, never a broken object."""
    dims, data, attrs = ("d",), np.arange(2.0), {"units": "m"}
    try:
        fast, slow = _assembled(dims, data, attrs), _constructed(dims, data, attrs)
        same = type(fast).__slots__ == ("_attrs", "_data", "_dims", "_encoding") and all(
            getattr(fast, s) is getattr(slow, s) or getattr(fast, s) == getattr(slow, s)
            for s in ("_dims", "_attrs", "_encoding")
        )
        same = same and fast._data is slow._data and fast.identical(slow)
    except Exception:  # any change of layout: the public path
        same = False
    return _assembled if same else _constructed


class DatasetTemplate:
    """The Dataset of an [`OutputLayout`][], ready to take the results of one run.

    **Arguments:** `layout`, the sweep's layout (its dims, coordinates, variables and
    attributes).
    """

    def __init__(self, layout: OutputLayout):
        # Variables of zero-stride views: the template holds no data of its own.
        empty = {
            name: np.broadcast_to(np.zeros((), dtype), (layout.size, *tail))
            for name, (_, tail, dtype, _) in layout.variables.items()
        }
        self._template = template = layout.to_dataset(empty)
        # What `fill` reads of each variable, read once: xarray's properties are Python code,
        # and a repeated sweep builds its Dataset on cold caches.
        self._variables = dict(template.variables)
        self._slots = {name: (v.dims, v.shape, v.attrs) for name, v in self._variables.items()}
        self._attrs = dict(template.attrs)
        # Coordinates that are not indexes have mutable data: each Dataset gets a copy.
        # (Index coordinates are immutable and shared.) So do the fixed variables (a
        # model's array parameters), which no chunk fills.
        plain = [n for n in template.coords if n not in template.xindexes]
        self._plain = (*plain, *layout.fixed)

    def fill(self, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> xr.Dataset:
        """The Dataset of flat `arrays` (`{name: (size, *tail)}`, one per variable of the
        layout), identical to `layout.to_dataset(arrays)` with `attrs` added to its
        attributes. The arrays become its variables without a copy; attributes (global and
        per variable) and non-index coordinates are the Dataset's own."""
        variables, new = self._variables.copy(), _new_variable()
        for name, values in arrays.items():
            dims, shape, var_attrs = self._slots[name]
            if values.shape != shape:
                values = values.reshape(shape)
            # `fastpath`: `values` is already an ndarray of the layout's dtype (the attributes
            # are copied by the constructor).
            variables[name] = new(dims, values, var_attrs)
        for name in self._plain:
            variables[name] = variables[name].copy(deep=True)
        merged = self._attrs.copy()
        if attrs:
            merged.update(attrs)
        # `_replace` takes these checked pieces as they are: xarray's own fast constructor
        # for derived Datasets (tests compare the result with `layout.to_dataset`).
        return self._template._replace(variables=variables, attrs=merged)
