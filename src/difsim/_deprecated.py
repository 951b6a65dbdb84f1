"""The top-level names that moved, kept as deprecated aliases (docs/versions.md).

The PDE operators were 26 top-level names under three naming schemes (`laplacian`,
`spectral_laplacian`, `laplacian_symbol`); since 0.1 they live in two namespaces,
`ds.fd` (grid-point operators) and `ds.spectral` (Fourier operators), where one name means
one operator. The old spellings resolve through the package's `__getattr__`, warn, and are
removed in 0.3.
"""

import importlib
import warnings

# old top-level name -> (namespace, name there)
MOVED: dict[str, tuple[str, str]] = {
    **{
        n: ("fd", n)
        for n in (
            "advection", "biharmonic", "conservative_divergence", "derivative",
            "divergence", "gradient", "laplacian", "solve_poisson",
        )
    },
    **{
        n: ("spectral", n)
        for n in (
            "dealias", "dealias_mask", "derivative_symbol", "inverse_laplacian",
            "inverse_laplacian_symbol", "irfftn", "laplacian_symbol", "rfftn", "wavenumbers",
        )
    },
    "spectral_derivative": ("spectral", "derivative"),
    "spectral_gradient": ("spectral", "gradient"),
    "spectral_laplacian": ("spectral", "laplacian"),
}  # fmt: skip


def moved(name: str) -> object:
    """The object an old top-level `name` now is, with a `DeprecationWarning` naming it."""
    namespace, new = MOVED[name]
    warnings.warn(
        f"ds.{name} is deprecated since difsim 0.1 and will be removed in 0.3: use "
        f"ds.{namespace}.{new}",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(f"difsim.{namespace}"), new)
