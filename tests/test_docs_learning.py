"""The code of docs/learning.md runs, and the numbers it states hold: the learned friction
against the exact linear friction of the data's closed-form solution, the refusal of a
start outside a transform's range, the output variables of a free network.

The runner and its conventions are in test_docs.py; this file runs in its own process.
"""

import numpy as np

from .test_docs import run_doc as run_doc, workdir as workdir  # noqa: F401 (fixtures)

HERE = ["docs/learning.md"]
DOC = "docs/learning.md"


def test_every_python_block_runs(run_doc):
    assert "ds" in run_doc(DOC)


def test_learned_friction_is_the_true_one(run_doc):
    doc = run_doc(DOC)
    # The doc says ~5e-4 on |v| <= 1.5, against a friction force of up to 0.45.
    assert doc["friction_error"] < 1e-3
    assert "25 values (MLP)" in doc["result"].summary()
    assert np.all(np.isnan(doc["result"].covariance))


def test_refusal_and_outputs(run_doc):
    doc = run_doc(DOC)
    assert "1 of the 3 initial values of c lie outside the range (0, inf)" in doc["refused"]
    weights = doc["weights"]
    assert weights.shape == (8, 1) and weights.attrs["path"] == "friction.layers[0].weight"
    np.testing.assert_array_equal(weights.values, doc["result"].model.friction.layers[0].weight)
    losses = doc["adam_losses"]
    assert losses.shape == (100,) and losses[-1] < 0.5 * losses[0]


def test_discovery_finds_the_linear_friction(run_doc):
    doc = run_doc(DOC)
    found = doc["found"]
    assert list(found.active("d_v")) == ["v"]  # only the linear term survives the threshold
    assert abs(doc["linear"] + 0.3) < 3e-3  # the data's friction is -0.3 v


def test_experiments_fit(run_doc):
    doc = run_doc(DOC)
    assert abs(doc["k_fitted"] - 0.8) < 1e-3  # the data decay at k = 0.8
    history = doc["held_out"]
    assert history.shape[1] == 2 and history[-1, 1] < history[0, 1]


def test_burgers_closure_model(run_doc):
    # The docs say 1,553 weights.
    doc = run_doc(DOC)
    assert doc["closure_weights"] == 1553
