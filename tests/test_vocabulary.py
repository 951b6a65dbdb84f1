"""One adjoint vocabulary (`difsim.solvers._vocabulary`, issue 32.4): each name means one
thing, the table says which entry point takes it, and an entry point refuses the names it
does not take by name, saying who takes them."""

from pathlib import Path

import diffrax as dfx
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim import solvers
from difsim._core._own_steps import own_steps
from difsim._ensemble import ADJOINTS as ENSEMBLE_ADJOINTS
from difsim._fit import ADJOINTS as FIT_ADJOINTS
from difsim.solvers import ADJOINT_NAMES, ENTRY_POINTS, adjoint_names

MODEL = ds.models.ExponentialDecay()
DATA = xr.Dataset({"y": ("time", np.exp(-np.linspace(0.0, 1.0, 5)))},
                  coords={"time": np.linspace(0.0, 1.0, 5)})  # fmt: skip


def _takes(entry: str, name: str) -> bool:
    """Whether `entry`'s own resolver (not the table) accepts `name`."""
    if entry == "simulate":
        return name in solvers.ADJOINTS or own_steps(name) is not None
    return name in {"simulate_ensemble": ENSEMBLE_ADJOINTS, "fit": FIT_ADJOINTS}[entry]


def test_the_table_says_what_each_entry_point_takes():
    # Every name some entry point takes is in the table, with that entry point listed.
    for entry in ENTRY_POINTS:
        taken = {n for n in ADJOINT_NAMES if _takes(entry, n)}
        assert set(adjoint_names(entry)) == taken, entry
    every = {*solvers.ADJOINTS, *ENSEMBLE_ADJOINTS, *FIT_ADJOINTS, "discrete"}
    assert every == set(ADJOINT_NAMES)
    # The shared names mean one thing: reverse or forward mode wherever they are taken.
    assert all(set(ADJOINT_NAMES[n].taken_by) == set(ENTRY_POINTS)
               for n in ("checkpoint", "forward", "discrete"))  # fmt: skip


CALLS = {
    "simulate": lambda a: ds.simulate(MODEL, t0=0.0, t1=1.0, adjoint=a),
    "simulate_ensemble": lambda a: ds.simulate_ensemble(
        MODEL, {"k": jnp.array([1.0, 2.0])}, t0=0.0, t1=1.0, adjoint=a
    ),
    "fit": lambda a: ds.fit(MODEL, DATA, ["k"], adjoint=a),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_each_entry_point_refuses_the_names_it_does_not_take_saying_who_does(entry):
    for name, a in ADJOINT_NAMES.items():
        if entry in a.taken_by:
            continue
        takers = " and ".join(a.taken_by)
        with pytest.raises(ValueError, match=f"{entry} does not take adjoint='{name}'") as info:
            CALLS[entry](name)
        assert f"which {takers} take" in str(info.value), str(info.value)
        assert repr(adjoint_names(entry)[0]) in str(info.value)  # the choices it has
    with pytest.raises(ValueError, match=f"unknown adjoint 'magic' for {entry}; choose one of"):
        CALLS[entry]("magic")


def test_a_diffrax_adjoint_is_simulates_not_the_engines():
    with pytest.raises(ValueError, match=r"a diffrax adjoint \(ds.simulate's\)"):
        CALLS["simulate_ensemble"](dfx.RecursiveCheckpointAdjoint())


def test_the_reliability_page_shows_the_table():
    page = (Path(__file__).parents[1] / "docs" / "reliability.md").read_text()
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4 and cells[0].strip("`") in ADJOINT_NAMES:
            rows[cells[0].strip("`")] = [c.startswith("yes") for c in cells[1:]]
    assert rows == {n: [e in a.taken_by for e in ENTRY_POINTS] for n, a in ADJOINT_NAMES.items()}
    message = str(pytest.raises(ValueError, CALLS["simulate_ensemble"], "backsolve").value)
    assert f"ValueError: {message}" in page  # the example is the real message
