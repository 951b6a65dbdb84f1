"""Fit checkpoints (`difsim._fit._checkpoint`): the file format, its version and its checks.

Resuming a real fit from a checkpoint and getting the uninterrupted fit's numbers is
`tests/test_fit.py::test_checkpoint_resume_equals_uninterrupted`; these tests need no fit.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from difsim._fit._checkpoint import check_checkpoint, load_checkpoint, save_checkpoint
from difsim._io import OutputError

HEADER = {"free": ["alpha", "beta"], "optimizer": "adam", "shape": [2], "coord": "time", "n": 9}


def _carry(scale=1.0, p=2):
    """A loop state with the leaf kinds a fit's carry has (floats, ints, bools, nesting)."""
    return {
        "u": jnp.arange(p, dtype=jnp.float64) * scale - 0.1,
        "state": (jnp.full((p,), 1e-300 * scale), jnp.asarray(7, jnp.int32)),
        "done": jnp.asarray(False),
    }


def _history(steps=5):
    rng = np.random.default_rng(0)
    history = rng.normal(size=(steps, 3))
    history[1, 0] = np.nan  # a rejected step's loss
    return history


def test_round_trip_is_exact(tmp_path):
    path = tmp_path / "fit.ckpt"
    history, carry = _history(), _carry(3.0)
    save_checkpoint(path, HEADER, history, carry)
    back_history, back = load_checkpoint(path, HEADER, _carry())
    np.testing.assert_array_equal(back_history, history)  # NaN included, bit for bit
    assert back_history.dtype == history.dtype
    for key in ("u", "done"):
        np.testing.assert_array_equal(back[key], carry[key])
        assert back[key].dtype == carry[key].dtype
    np.testing.assert_array_equal(back["state"][0], carry["state"][0])
    assert int(back["state"][1]) == 7 and back["state"][1].dtype == jnp.int32
    # Saving again replaces the checkpoint atomically (no temp file left behind).
    save_checkpoint(path, HEADER, _history(8), carry)
    assert load_checkpoint(path, HEADER, _carry())[0].shape == (8, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.ckpt"]


@pytest.mark.parametrize("version", [1, 2])
def test_older_formats_are_recognised_and_refused(tmp_path, version):
    path = tmp_path / "old.ckpt"
    path.write_bytes(b"DIFSIM-FIT-CHECKPOINT %d\n{}\n" % version)
    assert check_checkpoint(path) == path  # a difsim checkpoint: may be replaced
    with pytest.raises(ValueError, match=f"older difsim \\(format version {version}, this"):
        load_checkpoint(path, HEADER, _carry())


def test_another_fit_or_state_is_refused(tmp_path):
    path = tmp_path / "fit.ckpt"
    save_checkpoint(path, HEADER, _history(), _carry())
    with pytest.raises(ValueError, match="different fit \\(optimizer: 'adam' there, 'lbfgs'"):
        load_checkpoint(path, {**HEADER, "optimizer": "lbfgs"}, _carry())
    # The same header but a loop state of other shapes (equinox's check, in our words).
    with pytest.raises(ValueError, match="does not hold this fit's loop state"):
        load_checkpoint(path, HEADER, _carry(p=3))
    # A damaged file (cut short) is refused, not half-read.
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match="does not hold this fit's loop state"):
        load_checkpoint(path, HEADER, _carry())


def test_other_files_are_never_read_or_replaced(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a checkpoint")
    with pytest.raises(OutputError, match="not a difsim fit checkpoint"):
        check_checkpoint(notes)
    with pytest.raises(OutputError, match="not a regular file"):
        check_checkpoint(tmp_path)
    assert notes.read_text() == "not a checkpoint"
