"""Adjoints under which [`simulate`][] integrates with difsim's own step loop.

`simulate` hands its solve to diffrax, whose adjoints differentiate diffrax's loop. The
ensemble engine's discrete adjoint (`adjoint="discrete"`) differentiates the engine's own
steps instead: under it, `simulate` runs the model as an ensemble of one trajectory. The
engine sits above this package (it is built on it), so it registers that strategy here
when it is imported ([`register_own_steps`][]); `import difsim` imports it.
"""

from collections.abc import Callable
from typing import Any

from difsim._core._model import Model

# `(name, adjoint class, solve)`: `solve(model, times, settings, adjoint) -> Solution`, for
# the adjoint given by its name (a fresh instance of the class) or as an instance.
_REGISTERED: list[tuple[str, type, Callable]] = []


def register_own_steps(name: str, cls: type, solve: Callable) -> None:
    """Make `simulate(..., adjoint=name)` and `adjoint=cls(...)` call `solve`."""
    if all(entry[0] != name for entry in _REGISTERED):
        _REGISTERED.append((name, cls, solve))


def own_steps(adjoint: Any) -> tuple[Any, Callable] | None:
    """`(adjoint object, solve)` when `adjoint` (as given to `simulate`) is one of the
    registered adjoints, else `None` (a diffrax adjoint or one of its names)."""
    for name, cls, solve in _REGISTERED:
        if isinstance(adjoint, str) and adjoint == name:
            return cls(), solve
        if isinstance(adjoint, cls):
            return adjoint, solve
    return None


def check_own_steps(name: str, *, key, event, dense: bool, sharding, progress: bool,
                    model: Model) -> None:  # fmt: skip
    """Refuse what the engine's single-trajectory solve does not do, naming it and the
    adjoint that does. `name`: the adjoint's name. (A model's own events, and its solver
    and controller, are the engine's to judge: `_ensemble.unsupported`.)"""
    what = None
    if key is not None:
        what = f"a stochastic model ({type(model).__name__} has diffusion)"
    elif event is not None:
        what = "events"
    elif dense:
        what = 'save="dense"'
    elif sharding is not None:
        what = "a sharded solve"
    elif progress:
        what = "progress=True"
    if what is not None:
        raise ValueError(
            f"simulate: adjoint={name!r} (the ensemble engine's own steps) does not handle "
            f"{what}; use adjoint='checkpoint' (diffrax's, the default)"
        )
