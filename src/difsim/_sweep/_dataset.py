"""A sweep's Dataset built from its flat results through a template made once per setup.

A sweep repeated in a loop (an outer optimisation, a notebook cell run again) builds one
Dataset per call. `xr.Dataset(...)` checks, aligns and indexes its inputs each time, and
even `Dataset.copy(data=...)` of a template re-checks every variable: at 1e4 Lorenz points
that was ~5 % of the whole sweep. The template's variables, coordinates and indexes were
checked when it was built, so [`DatasetTemplate.fill`][] only swaps in the new arrays.
"""

import numpy as np
import xarray as xr

from difsim._sweep._layout import OutputLayout


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
        self._template = layout.to_dataset(empty)
        # Coordinates that are not indexes have mutable data: each Dataset gets a copy.
        # (Index coordinates are immutable and shared.)
        self._plain = tuple(n for n in self._template.coords if n not in self._template.xindexes)

    def fill(self, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> xr.Dataset:
        """The Dataset of flat `arrays` (`{name: (size, *tail)}`, one per variable of the
        layout), identical to `layout.to_dataset(arrays)` with `attrs` added to its
        attributes. The arrays become its variables without a copy; attributes (global and
        per variable) and non-index coordinates are the Dataset's own."""
        template = self._template
        variables = dict(template.variables)
        for name, values in arrays.items():
            old = variables[name]
            # `fastpath`: `values` is already an ndarray of the layout's dtype (the attributes
            # are copied by the constructor).
            variables[name] = xr.Variable(
                old.dims, values.reshape(old.shape), old.attrs, fastpath=True
            )
        for name in self._plain:
            variables[name] = variables[name].copy(deep=True)
        merged = dict(template.attrs)
        if attrs:
            merged.update(attrs)
        # `_replace` takes these checked pieces as they are: xarray's own fast constructor
        # for derived Datasets (tests compare the result with `layout.to_dataset`).
        return template._replace(variables=variables, attrs=merged)
