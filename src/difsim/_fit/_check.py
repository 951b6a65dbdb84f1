"""Checking a fit's data without solving: what `difsim check` runs on a config's data."""

import jax.numpy as jnp
import xarray as xr

from difsim._core import Model
from difsim._fit._data import coordinate_values, fit_data, observation_map


def check_data_values(
    dataset: xr.Dataset,
    coord: str,
    model: Model,
    observe,
    *,
    noise: str,
    weights,
    sigma,
    increasing: bool = True,
    experiment: str | None = None,
) -> None:
    """Check the data as a fit of `model` reads it — the coordinate `coord`, which data
    variables are observed and how (`observe`, or `None`), their values, `weights` and
    `sigma` — without solving anything (what `difsim check` runs on a config's data).

    **Raises:** `ValueError`/`TypeError` naming the culprit, as [`fit`][] would."""
    coords = coordinate_values(dataset, coord, increasing=increasing)
    pairs = observation_map(dataset, coord, model, observe)
    if experiment is None and "experiment" in dataset.dims and coord != "experiment":
        experiment = "experiment"
    if experiment is None:
        parts = [dataset]
    else:  # each experiment's series (the fit checks the experiments' own values)
        if experiment not in dataset.dims:
            raise ValueError(f"the data have no dimension {experiment!r} of experiments")
        over = [n for n, v in dataset.data_vars.items() if v.dims == (experiment, coord)]
        parts = [dataset[over].isel({experiment: i}) for i in range(dataset.sizes[experiment])]
    for part in parts:
        fit_data(part, coord, coords, pairs, noise=noise, weights=weights, sigma=sigma,
                 dtype=jnp.result_type(float), host=True)  # fmt: skip
