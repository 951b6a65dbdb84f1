"""The MAX_STEPS message fits the case (issue 14, point 8): it suggests an implicit solver
only to users of an explicit one, says when most steps were rejected, and reports the
accepted and rejected step counts."""

import pytest

import difsim as ds
from difsim._status import Status, max_steps_message
from difsim.models import ExponentialDecay

STIFF = dict(t0=0.0, t1=1.0, save="final")


def test_message_by_solver_kind():
    explicit = max_steps_message(implicit=False, mostly_rejected=True)
    assert "implicit solver such as 'kvaerno5'" in explicit
    for rejected in (False, True):
        assert "kvaerno5" not in max_steps_message(implicit=True, mostly_rejected=rejected)
    rejected = max_steps_message(implicit=True, mostly_rejected=True)
    assert "Most steps were rejected" in rejected and "root_tol=0.1" in rejected
    assert max_steps_message(implicit=None, mostly_rejected=True) == Status.MAX_STEPS.message


def test_explicit_solver_is_pointed_at_implicit_ones_with_step_counts():
    # y' = -1e4 y on [0, 1]: Tsit5's stability limit needs ~3000 steps.
    sol = ds.simulate(ExponentialDecay(k=1e4), **STIFF, max_steps=40, throw=False)
    assert int(sol.status) == Status.MAX_STEPS
    accepted, rejected = int(sol.num_accepted_steps), int(sol.num_rejected_steps)
    assert accepted + rejected == 40
    text = sol.message()
    assert "implicit solver such as 'kvaerno5'" in text
    assert f"({accepted} steps accepted, {rejected} rejected)" in text


def test_implicit_solver_with_rejected_steps_is_told_about_its_root_finds():
    # A first step of 100 on a decay of rate 1e4: Kvaerno5 rejects it and its next tries.
    with pytest.raises(ds.SolveError) as info:
        ds.simulate(ExponentialDecay(k=1e4), **STIFF, solver="kvaerno5", dt0=100.0, max_steps=3)
    text = str(info.value)
    assert "failed [MAX_STEPS]" in text and "Most steps were rejected" in text
    assert "such as 'kvaerno5'" not in text


def test_rosenbrock_solver_is_not_pointed_at_kvaerno5():
    # Rodas5P is a stiff solver too (linearly implicit): it gets the stiff solvers' advice,
    # with the counts, in the message and in the raised error.
    sol = ds.simulate(ExponentialDecay(k=1e4), **STIFF, solver="rodas5p", dt0=100.0,
                      max_steps=3, throw=False)  # fmt: skip
    assert int(sol.status) == Status.MAX_STEPS
    accepted, rejected = int(sol.num_accepted_steps), int(sol.num_rejected_steps)
    text = sol.message()
    assert "kvaerno5" not in text and f"({accepted} steps accepted, {rejected} rejected)" in text
    with pytest.raises(ds.SolveError) as info:
        ds.simulate(ExponentialDecay(k=1e4), **STIFF, solver="rodas5p", dt0=100.0, max_steps=3)
    assert "such as 'kvaerno5'" not in str(info.value)
