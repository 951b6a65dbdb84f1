"""One vocabulary of adjoint names for every entry point that differentiates a solve.

`ds.simulate`, `ds.simulate_ensemble` and `ds.fit` (with their config keys) each take an
`adjoint=` name. A name means the same thing wherever it is taken, and an entry point that
does not take a name refuses it by name, saying which entry points do, instead of a bare
"unknown adjoint". The objects a name builds differ per entry point (a diffrax adjoint for
`simulate`, an ensemble adjoint for `simulate_ensemble`), the meaning does not.
"""

import dataclasses

ENTRY_POINTS = ("simulate", "simulate_ensemble", "fit")
"""The entry points that take an `adjoint=` name: `ds.simulate`, `ds.simulate_ensemble`,
`ds.fit`."""


@dataclasses.dataclass(frozen=True)
class AdjointName:
    """What an `adjoint=` name means and which entry points take it.

    - `meaning`: one line, the same for every entry point.
    - `taken_by`: the entry points (of [`ENTRY_POINTS`][]) that take the name.
    """

    meaning: str
    taken_by: tuple[str, ...]


ADJOINT_NAMES: dict[str, AdjointName] = {
    "auto": AdjointName(
        "forward mode for a few differentiated scalars, else 'discrete' (the choice is made "
        "when the solve is differentiated)",
        ("simulate_ensemble",),
    ),
    "checkpoint": AdjointName(
        "reverse mode by JAX through checkpointed step loops (diffrax's "
        "RecursiveCheckpointAdjoint in simulate)",
        ENTRY_POINTS,
    ),
    "forward": AdjointName(
        "forward mode, one tangent per differentiated scalar (jax.jvp, jax.jacfwd): "
        "cheapest for a few parameters",
        ENTRY_POINTS,
    ),
    "discrete": AdjointName(
        "reverse mode by the discrete adjoint of the ensemble engine's own steps: bounded "
        "memory, cost independent of the number of parameters (ODEs the engine runs)",
        ENTRY_POINTS,
    ),
    "direct": AdjointName("both modes through diffrax's DirectAdjoint; more memory", ("simulate",)),
    "backsolve": AdjointName(
        "continuous adjoint solved backwards in time: O(1) memory, not for stiff problems",
        ("simulate",),
    ),
}
"""Every `adjoint=` name: its [`AdjointName`][] (meaning, and the entry points that take it).
`difsim solvers` prints this table."""


def adjoint_names(entry: str) -> tuple[str, ...]:
    """The names `entry` (one of [`ENTRY_POINTS`][]) takes, in the table's order."""
    return tuple(name for name, a in ADJOINT_NAMES.items() if entry in a.taken_by)


def check_adjoint_name(name: object, entry: str) -> None:
    """Refuse an adjoint name that `entry` does not take.

    **Raises:** `ValueError` naming the entry points that take a known name, or listing
    `entry`'s names for an unknown one; nothing when `entry` takes `name`.
    """
    known = ADJOINT_NAMES.get(name) if isinstance(name, str) else None
    if known is not None and entry in known.taken_by:
        return
    choices = ", ".join(repr(n) for n in adjoint_names(entry))
    if known is None:
        raise ValueError(f"unknown adjoint {name!r} for {entry}; choose one of {choices}")
    others = " and ".join(known.taken_by)
    raise ValueError(
        f"{entry} does not take adjoint={name!r} ({known.meaning}), which {others} "
        f"take{'s' if len(known.taken_by) == 1 else ''}; choose one of {choices}"
    )
