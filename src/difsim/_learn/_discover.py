r"""Equation discovery: sparse regression of a learned term on a library of candidate terms,
by the sequentially thresholded least squares (STLSQ) of SINDy (Brunton, Proctor & Kutz,
PNAS 113, 3932 (2016)).

Why difsim's own STLSQ, not pysindy's. pysindy (2.1) is the reference implementation and
stays the tests' reference (`tests/test_discover.py` checks the coefficients against its
`STLSQ`, with both normalisations, to 1e-10; it is in the `dev` extra). As a runtime
dependency it does not earn its place: STLSQ is a least-squares loop of a few lines over
NumPy, while `pip install pysindy` adds nine packages (scikit-learn, joblib, threadpoolctl,
narwhals, derivative, cloudpickle, lazy-importer, zipp, importlib-metadata: 63 MB with
pysindy, 51 MB of it scikit-learn), and importing it after difsim took 1.8-3.0 s more
(measured on 2 shared CPU cores, where importing difsim took 3-6 s). difsim's version
also takes difsim's inputs as they are (a `Solution`, a dataset, a model's network field),
names the terms after the state variables, and its result's `predict` runs under
`jax.jit` inside a model's `rhs`.
"""

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from difsim._learn._discovery import Discovery
from difsim._learn._library import PolynomialLibrary, as_library, state_of
from difsim._learn._samples import (
    check_finite,
    checked_columns,
    learned_values,
    sample_columns,
    target_names,
)


def discover(
    learned: Any,
    states: Any,
    *,
    field: str | None = None,
    library: Any = PolynomialLibrary(degree=2),
    threshold: float = 0.1,
    names: Sequence[str] | None = None,
    targets: Sequence[str] | None = None,
    max_iter: int = 20,
) -> Discovery:
    r"""Find a sparse formula for a learned term: sequentially thresholded least squares
    (SINDy's STLSQ) of the term's values on a library of candidate terms.

    At the samples $x_i$ of the state, the learned term's outputs $y_{ik}$ are regressed
    on the library's columns $\Theta_{ij} = \theta_j(x_i)$. Before thresholding, every
    column and every target is scaled to unit root-mean-square over the samples, so the
    threshold is scale-free: term $j$ is dropped from target $k$ when its RMS contribution
    $|\xi_{kj}|\,\mathrm{rms}(\Theta_j)$ is below `threshold` $\times\,\mathrm{rms}(y_k)$.
    Each round refits the kept terms by least squares and drops those below the threshold,
    until the kept set stops changing (at most `max_iter` rounds); the coefficients
    returned are the least-squares fit on the final set, in the original units.

    **Arguments:**

    - `learned`: the learned term, as one of
        - a model (or any equinox module) holding the network, with `field` naming it;
        - an equinox module that is callable (a network such as `eqx.nn.MLP`), called on
          one sample's state vector at a time (`eqx.filter_vmap` maps it);
        - a function of the samples, `f(x)` with `x` of shape `(samples, variables)`,
          returning `(samples, targets)` or a dict `{target: (samples,)}`;
        - its values at the samples, an array `(samples, targets)`.
    - `states`: samples of the state: a [`Solution`][] (e.g. of a simulation), an
      `xarray.Dataset`, a mapping `{variable: values}`, or an array of shape
      `(samples, variables)`. Arrays of any shape are flattened, one sample per element.
    - `field`: the attribute (dotted path allowed: `"closure.net"`) of `learned` holding
      the network; its input is the state vector in the order of `names`.
    - `library`: the candidate terms: a [`PolynomialLibrary`][] (default: degree 2, with
      interactions and a constant), a dict `{name: function of the state}` (see
      [`FunctionLibrary`][]), or a list of these side by side.
    - `threshold`: the sparsity threshold, a fraction of each target's RMS (default 0.1).
    - `names`: the state variables to use, in order (default: all of a solution's, the
      floating data variables with dimensions of a dataset, a mapping's keys; for an array
      they name its columns, default `x0, x1, ...`).
    - `targets`: names of the learned term's outputs (default: a dict output's keys;
      `d_<variable>` with one output per variable; else `y0, y1, ...`).
    - `max_iter`: the most thresholding rounds (default 20).

    **Returns:** a [`Discovery`][]: `coefficients` `(targets, terms)`, `terms`, `targets`,
    `r2` and `rmse` per target, `equations()`, `predict(states)` and `to_xarray()`.

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    x = np.random.default_rng(0).uniform(-2, 2, size=(200, 2))  # samples of (u, v)
    term = np.stack([-0.9 * x[:, 0] * x[:, 1], 0.8 * x[:, 0] * x[:, 1]], axis=1)
    found = ds.discover(term, x, names=("u", "v"), library=ds.PolynomialLibrary(degree=2))
    assert np.allclose(found.coefficients[:, found.terms.index("u*v")], [-0.9, 0.8])
    ```
    """
    _check_settings(threshold, max_iter)
    library = as_library(library)
    columns = checked_columns(sample_columns(states, names))
    variables = tuple(columns)
    terms = library.names(variables)
    if not terms:
        raise ValueError("discover: the library has no terms: give it a degree or functions")
    if len(set(terms)) != len(terms):
        twice = sorted({term for term in terms if terms.count(term) > 1})
        raise ValueError(f"discover: the library names term {twice[0]!r} twice")
    theta = _design(library, columns, terms)
    values, found = learned_values(learned, field, columns)
    labels = target_names(targets, found, values.shape[1], variables)
    check_finite(values, labels, "the learned target")
    samples = theta.shape[0]
    if samples < len(terms):
        raise ValueError(
            f"discover: {samples} samples for {len(terms)} library terms: give at least as "
            "many samples as terms (more states, or a smaller library)"
        )
    fits = [_stlsq(theta, values[:, k], threshold, max_iter) for k in range(values.shape[1])]
    coefficients = np.stack([coef for coef, _, _ in fits])
    converged = np.array([ok for _, _, ok in fits])
    for label, ok in zip(labels, converged):
        if not ok:
            warnings.warn(
                f"discover: the terms of target {label!r} still changed after {max_iter} "
                "rounds; raise max_iter or the threshold",
                stacklevel=2,
            )
    residual = values - theta @ coefficients.T
    spread = np.sum((values - values.mean(axis=0)) ** 2, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(spread > 0, 1.0 - np.sum(residual**2, axis=0) / spread, np.nan)
    return Discovery(
        coefficients=coefficients,
        r2=r2,
        rmse=np.sqrt(np.mean(residual**2, axis=0)),
        iterations=np.array([n for _, n, _ in fits]),
        converged=converged,
        terms=terms,
        targets=labels,
        variables=variables,
        threshold=float(threshold),
        num_samples=samples,
        library=library,
    )


def _check_settings(threshold: Any, max_iter: Any) -> None:
    if not isinstance(threshold, int | float) or isinstance(threshold, bool):
        raise TypeError(f"discover: threshold must be a number, got {threshold!r}")
    if not threshold >= 0:  # also refuses NaN
        raise ValueError(f"discover: threshold must be >= 0, got {threshold!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
        raise ValueError(f"discover: max_iter must be an integer >= 1, got {max_iter!r}")


def _design(library, columns: dict[str, np.ndarray], terms: tuple[str, ...]) -> np.ndarray:
    """The library's columns at the samples, `(samples, terms)`, in float64."""
    count = next(iter(columns.values())).size
    out = []
    for term, column in zip(terms, library.columns(state_of(columns)), strict=True):
        column = np.asarray(column, dtype=np.float64)
        if column.size == 1:  # a constant term
            column = np.full(count, column.reshape(()))
        if column.shape != (count,):
            raise ValueError(
                f"discover: library term {term!r} has shape {column.shape}, expected "
                f"({count},): one value per sample"
            )
        out.append(column)
    theta = np.stack(out, axis=-1)
    check_finite(theta, terms, "library term")
    return theta


def _stlsq(
    theta: np.ndarray, y: np.ndarray, threshold: float, max_iter: int
) -> tuple[np.ndarray, int, bool]:
    """STLSQ for one target: `(coefficients, rounds, converged)`, in original units."""
    scale = np.sqrt(np.mean(theta**2, axis=0))
    scale = np.where(scale > 0, scale, 1.0)  # an all-zero column stays zero (and drops)
    size = np.sqrt(np.mean(y**2))
    size = size if size > 0 else 1.0
    normed, target = theta / scale, y / size
    keep = np.ones(theta.shape[1], dtype=bool)
    coef = np.linalg.lstsq(normed, target, rcond=None)[0]
    for rounds in range(1, max_iter + 1):
        new = np.abs(coef) >= threshold
        if np.array_equal(new, keep):
            return coef * size / scale, rounds, True
        keep = new
        coef = np.zeros_like(coef)
        if keep.any():
            coef[keep] = np.linalg.lstsq(normed[:, keep], target, rcond=None)[0]
    return coef * size / scale, max_iter, False
