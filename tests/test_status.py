"""One result scheme: `Status` and the maps from diffrax's and optimistix's results into it.

The references are the libraries' own enumerations: every member of `diffrax.RESULTS` and
`optimistix.RESULTS` must have a deliberate target, and its own message must stay
available. Steady states are checked on equations with known roots (or none).
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

import difsim as ds
from difsim._core._steady import solve_steady_state, steady_state
from difsim._status import (
    DIFFRAX_TARGETS,
    OPTIMISTIX_TARGETS,
    Status,
    _item,
    flag_attrs,
    library_message,
    optimistix_status,
    result_index,
    status_from_optimistix,
    status_from_result,
)

# The codes stored in sweep outputs before the fit and steady-state members joined.
STORED = dict(
    SUCCESS=0,
    EVENT=1,
    MAX_STEPS=2,
    DT_MIN=3,
    NONFINITE=4,
    NONLINEAR_SOLVER=5,
    LINEAR_SOLVER=6,
    MAX_REJECTED=7,
    INTERNAL=8,
)
# The texts `FitResult.status` held (and fit outputs store) before it became a Status.
FIT_TEXTS = dict(
    CONVERGED="converged",
    COMPLETED="completed",
    FIT_MAX_STEPS="max_steps",
    DIVERGED="diverged",
    OPTIMIZER_FAILED="failed",
)


def members(results) -> dict[str, int]:
    """`{name: index}` of an equinox enumeration, read from its items."""
    return {name: int(getattr(results, name)._value) for name in results._name_to_item}


def item(results, index: int):
    """The `results` member with `index`, as an (array-valued) enumeration item."""
    return results.where(
        jnp.asarray(True), getattr(results, _name(results, index)), results.successful
    )


def _name(results, index: int) -> str:
    return next(name for name, i in members(results).items() if i == index)


def test_stored_codes_are_unchanged_and_values_contiguous():
    for name, code in STORED.items():
        assert int(Status[name]) == code
    assert [int(s) for s in Status] == list(range(len(Status)))


def test_every_member_has_a_message_and_a_text():
    for s in Status:
        assert isinstance(s.message, str) and s.message
        assert str(s) == s.text == f"{s}"
    for name, text in FIT_TEXTS.items():
        assert Status[name].text == text
    assert {s for s in Status if s.ok} == {
        Status.SUCCESS,
        Status.EVENT,
        Status.CONVERGED,
        Status.COMPLETED,
    }


def test_a_member_equals_its_integer_and_hashes_as_it():
    s = Status.CONVERGED
    assert s == 9 and s != 10 and hash(s) == hash(9) and s.text == "converged"
    assert s != Status.COMPLETED and s == Status.CONVERGED
    assert {int(Status.MAX_STEPS): "n"}[Status.MAX_STEPS] == "n"  # keys int dicts
    assert Status(13) is Status.OPTIMIZER_FAILED
    assert bool(jnp.asarray(9) == s) and bool(s == jnp.asarray(9))
    # Every pair of members that compare equal hashes alike (Python's rule): now that
    # equality is by integer only, no two members are equal.
    assert len({int(m) for m in Status}) == len(Status) == len(set(Status))


def test_comparing_with_text_still_works_but_is_deprecated():
    s = Status.CONVERGED
    with pytest.warns(DeprecationWarning, match=r"0\.3: compare with ds\.Status\.CONVERGED"):
        assert s == "converged"
    with pytest.warns(DeprecationWarning):
        assert s != "diverged" and not (s != "converged")


def test_flag_attributes_list_every_member():
    attrs = flag_attrs()
    assert attrs["flag_values"].tolist() == list(range(len(Status)))
    # Of the status variable's type (CF): int32, or whatever type is asked for.
    assert attrs["flag_values"].dtype == np.int32
    assert flag_attrs(np.int16)["flag_values"].dtype == np.int16
    assert attrs["flag_meanings"].split() == [s.name.lower() for s in Status]


@pytest.mark.parametrize(
    "results, targets, convert",
    [
        (dfx.RESULTS, DIFFRAX_TARGETS, status_from_result),
        (optx.RESULTS, OPTIMISTIX_TARGETS, status_from_optimistix),
    ],
    ids=["diffrax", "optimistix"],
)
def test_every_library_outcome_has_a_definite_target(results, targets, convert):
    names = members(results)
    assert set(names) == set(targets), "a library outcome without a deliberate target"
    for name, index in names.items():
        got = Status(int(convert(item(results, index))))
        assert got is targets[name], name
        # The library's own words survive, however many outcomes share the target.
        assert library_message(results, index) == results._index_to_message[index]
    batched = jax.vmap(
        lambda i: convert(results.where(i == 0, results.successful, results.nonfinite))
    )
    codes = batched(jnp.arange(2))
    assert [Status(int(c)) for c in codes] == [Status.SUCCESS, targets["nonfinite"]]


@pytest.mark.parametrize("results", [dfx.RESULTS, optx.RESULTS], ids=["diffrax", "optimistix"])
def test_result_index_reads_each_members_integer_through_public_api(results):
    # difsim reads an item's integer as the one leaf of its pytree (no equinox accessor);
    # the reference is equinox's own private tables, so a change there fails loudly here.
    assert len(results) == len(members(results))
    for name, index in members(results).items():
        assert int(result_index(getattr(results, name))) == index, name
        assert results[_item(results, index)] == results._index_to_message[index]
    batched = results.where(jnp.asarray(True), results.nonfinite, results.successful)
    assert int(jax.jit(result_index)(batched)) == members(results)["nonfinite"]
    assert library_message(results, -1).startswith("unknown")


def test_host_side_optimistix_map_agrees_and_names_unknown_indices():
    for name, index in members(optx.RESULTS).items():
        assert optimistix_status(index) is OPTIMISTIX_TARGETS[name]
    assert optimistix_status(10_000) is Status.INTERNAL
    assert "outcome 10000" in library_message(optx.RESULTS, 10_000)


class Linear(ds.Model):
    """x' = 1 - a x: the root 1/a for a != 0, none for a = 0."""

    a: float = 2.0
    state = ds.State(x=0.0)

    def rhs(self, t, s):
        return dict(x=1.0 - self.a * s.x)


class NoRoot(ds.Model):
    """x' = 1 + x²: never zero."""

    state = ds.State(x=0.0)

    def rhs(self, t, s):
        return dict(x=1.0 + s.x**2)


class NaNRhs(ds.Model):
    """A right-hand side that is NaN everywhere."""

    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=jnp.nan * s.x)


def test_steady_state_reports_its_status():
    a = jnp.asarray([0.5, 2.0, 4.0])
    states, status, result = jax.vmap(lambda a: solve_steady_state(Linear(a=a)))(a)
    np.testing.assert_allclose(states["x"], 1.0 / np.asarray(a), rtol=1e-12)
    assert np.all(np.asarray(status) == Status.SUCCESS) and np.all(np.asarray(result) == 0)
    state, status, result = solve_steady_state(NoRoot(), max_steps=20)
    assert np.isnan(float(state["x"]))
    assert Status(int(status)) is Status.NEWTON_MAX_STEPS
    assert int(result) == members(optx.RESULTS)["nonlinear_max_steps_reached"]
    state, status, _ = solve_steady_state(NaNRhs())
    assert np.isnan(float(state["x"])) and Status(int(status)) is Status.NONFINITE


def test_steady_state_error_names_the_status_and_quotes_optimistix():
    message = optx.RESULTS._index_to_message[members(optx.RESULTS)["nonlinear_max_steps_reached"]]
    with pytest.raises(Exception) as error:
        steady_state(NoRoot(), max_steps=20)
    text = str(error.value)
    assert "steady_state(NoRoot) failed [NEWTON_MAX_STEPS]" in text
    assert Status.NEWTON_MAX_STEPS.message in text and message in text
    assert float(steady_state(Linear(a=4.0)).x) == pytest.approx(0.25, rel=1e-14)
