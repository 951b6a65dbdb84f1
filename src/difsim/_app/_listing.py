"""The listings of `difsim models` and `difsim solvers`: what a config can name."""

import dataclasses
import shutil
import textwrap

from difsim import solvers
from difsim._io import plain_text
from difsim.models import MODELS


def _table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths[:-1]) + "  {}"
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    return "\n".join([*lines, *(fmt.format(*r) for r in rows)])


def print_models() -> int:
    """`difsim models`: every zoo model with its state and description (plain text,
    wrapped at the terminal's width, never cut)."""
    rows = []
    for name, cls in MODELS.items():
        state = {f.name: f.default for f in dataclasses.fields(cls)}.get("state")
        names = " ".join(getattr(state, "names", ()))
        rows.append((name, cls.__name__, names, plain_text(cls.__doc__ or "")))
    # The description column wraps at the terminal's width (120 when not a terminal):
    # never cut, never wider than the screen. On a narrow screen it goes below its row.
    table = _table([r[:3] + ("",) for r in rows], ("name", "class", "state", "description"))
    lines = table.splitlines()
    indent = len(lines[0]) - len("description")
    columns = shutil.get_terminal_size((120, 24)).columns
    below = columns - indent < 30
    if below:
        indent, lines = 4, _table([r[:3] for r in rows], ("name", "class", "state")).splitlines()
    width = max(columns - indent, 20)
    out = lines[:2]
    for line, row in zip(lines[2:], rows):
        wrapped = textwrap.wrap(row[3], width, break_on_hyphens=False) or [""]
        if below:
            out += [line.rstrip()] + [" " * indent + text for text in wrapped]
        else:
            out.append(line.rstrip().ljust(indent) + wrapped[0])
            out += [" " * indent + more for more in wrapped[1:]]
    print("\n".join(out))
    return 0


def print_solvers() -> int:
    """`difsim solvers`: the named solvers, SDE solvers, controllers and adjoints."""
    yes = {True: "yes", False: "-"}
    rows = [
        (i.name, str(i.order), yes[i.adaptive], yes[i.implicit], yes[i.imex], i.description)
        for i in solvers.SOLVERS.values()
    ]
    print("Solvers ([solver] name)\n")
    print(_table(rows, ("name", "order", "adaptive", "implicit", "imex", "description")))
    print("\nSDE solvers ([solver] name of a model with noise; orders strong/weak)\n")
    print(_table(_sde_rows(), ("name", "calculus", "general", "commutative", "additive",
                               "adaptive", "description")))  # fmt: skip
    print("\nStep-size controllers ([solver] controller)\n")
    print(_table(list(solvers.CONTROLLERS.items()), ("name", "description")))
    print("\nAdjoints (adjoint= of simulate, simulate_ensemble and fit; [solver] adjoint)\n")
    rows = [
        (name, *("yes" if e in a.taken_by else "-" for e in solvers.ENTRY_POINTS), a.meaning)
        for name, a in solvers.ADJOINT_NAMES.items()
    ]
    print(_table(rows, ("name", *solvers.ENTRY_POINTS, "meaning")))
    return 0


def _sde_rows() -> list[tuple[str, ...]]:
    def orders(info, noise: str) -> str:
        return f"{info.strong[noise]:g}/{info.weak[noise]:g}" if noise in info.strong else "-"

    return [
        (i.name, i.calculus if not i.additive_only else "additive noise", orders(i, "general"),
         orders(i, "commutative"), orders(i, "additive"), "yes" if i.adaptive else "-",
         i.description)
        for i in solvers.SDE_SOLVERS.values()
    ]  # fmt: skip
