"""[`Discovery`][]: the sparse model [`discover`][] found, as equations, a labelled dataset
and a function of the state."""

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import xarray as xr

from difsim._io import cf_attrs
from difsim._learn._library import AbstractLibrary, state_of
from difsim._learn._samples import sample_columns


class Discovery(eqx.Module):
    r"""The outcome of [`discover`][]: a sparse linear combination of library terms for
    each target, $y_k \approx \sum_j \xi_{kj}\,\Theta_j(x)$.

    **Fields:**

    - `coefficients`: $\xi$, shape `(targets, terms)`, in the targets' and states' own
      units (not normalised); exactly `0.0` for a term that was dropped.
    - `terms`: the library's term names (`"1"`, `"u"`, `"u*v"`, `"u^2"`, ...).
    - `targets`: the names of the learned term's outputs (`"d_u"`, ...).
    - `variables`: the state variables the terms are written in, in the library's order.
    - `r2`: the coefficient of determination per target, $1 - SS_\mathrm{res}/SS_\mathrm{tot}$
      (NaN for a constant target).
    - `rmse`: the root-mean-square residual per target, in the target's units.
    - `iterations`: the thresholding rounds each target took.
    - `converged`: whether each target's set of terms stopped changing within `max_iter`.
    - `threshold`, `num_samples`, `library`: the settings and data size used.

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    x = np.random.default_rng(0).uniform(-2, 2, size=(200, 2))  # samples of (u, v)
    term = np.stack([-0.9 * x[:, 0] * x[:, 1], 0.8 * x[:, 0] * x[:, 1]], axis=1)
    found = ds.discover(term, x, names=("u", "v"), library=ds.PolynomialLibrary(degree=2))
    assert isinstance(found, ds.Discovery) and np.all(found.r2 > 0.999)
    print(found)  # one equation per target: the kept terms and their coefficients
    ```
    """

    coefficients: np.ndarray
    r2: np.ndarray
    rmse: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    terms: tuple[str, ...] = eqx.field(static=True)
    targets: tuple[str, ...] = eqx.field(static=True)
    variables: tuple[str, ...] = eqx.field(static=True)
    threshold: float = eqx.field(static=True)
    num_samples: int = eqx.field(static=True)
    library: AbstractLibrary = eqx.field(static=True)

    def active(self, target: str) -> dict[str, float]:
        """`{term: coefficient}` of the terms kept for `target`."""
        if target not in self.targets:
            raise KeyError(f"no target {target!r}; targets are {', '.join(self.targets)}")
        row = self.coefficients[self.targets.index(target)]
        return {term: float(c) for term, c in zip(self.terms, row) if c != 0.0}

    def equations(self, precision: int = 4) -> tuple[str, ...]:
        """One line per target, e.g. `"d_u = -0.9 u*v"`, coefficients to `precision`
        significant digits."""
        lines = []
        for target in self.targets:
            parts = []
            for term, c in self.active(target).items():
                number = f"{abs(c):.{precision}g}"
                body = number if term == "1" else f"{number} {term}"
                sign = "-" if c < 0 else "+"
                parts.append((sign, body))
            if not parts:
                lines.append(f"{target} = 0")
                continue
            text = ("-" if parts[0][0] == "-" else "") + parts[0][1]
            text += "".join(f" {sign} {body}" for sign, body in parts[1:])
            lines.append(f"{target} = {text}")
        return tuple(lines)

    def __str__(self) -> str:
        head = (
            f"Discovery (STLSQ, threshold {self.threshold:g} of each target's RMS): "
            f"{len(self.terms)} candidate terms, {self.num_samples} samples"
        )
        lines = self.equations()
        width = max(len(line) for line in lines)
        rows = [
            f"  {line:<{width}}   R² = {r2:.6f}, RMS residual {rmse:.3g}"
            + ("" if ok else f" (not converged in {n} rounds)")
            for line, r2, rmse, ok, n in zip(
                lines, self.r2, self.rmse, self.converged, self.iterations
            )
        ]
        return "\n".join([head, *rows])

    def predict(self, states: Any) -> Any:
        """The discovered term at `states`, shape `(..., targets)`.

        `states` takes the forms [`discover`][] takes (a [`Solution`][], a dataset, a
        mapping such as a model's state `s`, an array whose last axis is `variables`), and
        may hold JAX tracers: inside a model's `rhs`, `found.predict(s)` is the discovered
        term at the current state (shape `(targets,)`).
        """
        columns = sample_columns(states, self.variables, xp=jnp)
        theta = jnp.stack(
            [jnp.broadcast_to(c, jnp.shape(columns[self.variables[0]])) for c in
             self.library.columns(state_of(columns))],
            axis=-1,
        )  # fmt: skip
        return theta @ jnp.asarray(self.coefficients).T

    def to_xarray(self) -> xr.Dataset:
        """The discovery as an `xarray.Dataset`: `coefficients` over (`target`, `term`),
        `r2`, `rmse`, `iterations` and `converged` over `target`; the equations, threshold,
        variables and sample count as attributes."""
        coords = dict(target=list(self.targets), term=list(self.terms))
        data_vars = dict(
            coefficients=(("target", "term"), self.coefficients, dict(long_name=(
                "coefficient of each library term in each target (0: dropped)"))),
            r2=(("target",), self.r2, dict(long_name="coefficient of determination",
                                           units="1")),
            rmse=(("target",), self.rmse, dict(long_name="root-mean-square residual")),
            iterations=(("target",), self.iterations, dict(long_name="thresholding rounds")),
            converged=(("target",), self.converged.astype(np.int8), dict(
                long_name="support stopped changing within max_iter (1) or not (0)")),
        )  # fmt: skip
        attrs = cf_attrs("difsim.discover(STLSQ)")
        attrs.update(
            title="sparse regression of a learned term on a library (STLSQ)",
            equations="\n".join(self.equations()),
            threshold=self.threshold,
            threshold_meaning="fraction of each target's RMS below which a term is dropped",
            variables=" ".join(self.variables),
            num_samples=self.num_samples,
        )
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)
