"""Fit checkpoints (`difsim._fit._checkpoint`): the file format, its version and its checks.

Resuming a real fit from a checkpoint and getting the uninterrupted fit's numbers is
`tests/test_fit.py::test_checkpoint_resume_equals_uninterrupted`; these tests need no fit.
"""

import hashlib

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


@pytest.mark.parametrize("version", [1, 2, 3])
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
    # A damaged file (cut short) is refused, not half-read: its checksum fails.
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(ValueError, match="is corrupt: its SHA-256 checksum does not match"):
        load_checkpoint(path, HEADER, _carry())


def test_other_files_are_never_read_or_replaced(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a checkpoint")
    with pytest.raises(OutputError, match="not a difsim fit checkpoint"):
        check_checkpoint(notes)
    with pytest.raises(OutputError, match="not a regular file"):
        check_checkpoint(tmp_path)
    assert notes.read_text() == "not a checkpoint"


# ------------------------------------------------------------------ damage (issue 27.6)
def _saved(tmp_path, name="fit.ckpt"):
    path = tmp_path / name
    save_checkpoint(path, HEADER, _history(40), _carry(p=64))
    return path


def _refused(path, match):
    """Loading `path` raises a ValueError that names the file and matches `match`."""
    with pytest.raises(ValueError, match=match) as info:
        load_checkpoint(path, HEADER, _carry(p=64))
    assert str(path) in str(info.value)
    return str(info.value)


def test_file_layout_and_checksum(tmp_path):
    # Magic line, checksum line (of everything after it), JSON header, equinox payload.
    data = _saved(tmp_path).read_bytes()
    magic, checksum, rest = data.split(b"\n", 2)
    assert magic == b"DIFSIM-FIT-CHECKPOINT 4"
    assert checksum == b"sha256 " + hashlib.sha256(rest).hexdigest().encode()
    assert rest.startswith(b'{"free": ["alpha", "beta"]')


@pytest.mark.parametrize("where", [0.3, 0.5, 0.05, 0.9, "checksum", "header", "last"])
def test_a_flipped_byte_anywhere_is_refused_naming_the_file(tmp_path, where):
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    magic_end = data.index(b"\n") + 1
    checksum_end = data.index(b"\n", magic_end) + 1
    at = {
        "checksum": magic_end + 20,
        "header": checksum_end + 3,
        "last": len(data) - 1,
    }.get(where) or int(where * len(data))
    assert at >= magic_end  # past the magic line (whose damage is another message)
    data[at] ^= 0x01  # one bit: the least a copy can get wrong
    path.write_bytes(bytes(data))
    message = _refused(path, "is corrupt: its SHA-256 checksum does not match")
    assert "delete it (the fit then starts afresh)" in message


@pytest.mark.parametrize("keep", [0.3, 0.99, "two lines"])
def test_a_truncated_file_is_refused_naming_the_file(tmp_path, keep):
    path = _saved(tmp_path)
    data = path.read_bytes()
    end = data.index(b"\n", data.index(b"\n") + 1) + 1 if keep == "two lines" else None
    path.write_bytes(data[: end or int(keep * len(data))])
    _refused(path, "is corrupt")


def test_a_damaged_magic_line_is_not_taken_for_a_checkpoint(tmp_path):
    path = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[3] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(OutputError, match=f"checkpoint {path} exists and is not a difsim"):
        load_checkpoint(path, HEADER, _carry(p=64))


def test_a_newer_format_says_so(tmp_path):
    path = tmp_path / "new.ckpt"
    path.write_bytes(b"DIFSIM-FIT-CHECKPOINT 7\nsha256 0\n{}\n")
    expected = (
        f"checkpoint {path} was written by a newer difsim (format 7, this one reads 4); "
        f"upgrade difsim or delete {path}"
    )
    for call in (lambda: check_checkpoint(path), lambda: load_checkpoint(path, HEADER, _carry())):
        with pytest.raises(OutputError) as info:
            call()
        assert str(info.value) == expected


def test_a_broken_header_names_the_file(tmp_path):
    path = tmp_path / "broken.ckpt"
    for body in (b'{"free": ["alpha", \n', b"[1, 2]\n"):
        # A header that is not the fit's JSON, behind a matching checksum (so only the
        # header is wrong), and the same without one.
        digest = hashlib.sha256(body).hexdigest().encode()
        path.write_bytes(b"DIFSIM-FIT-CHECKPOINT 4\nsha256 " + digest + b"\n" + body)
        _refused(path, "has a broken header")
        path.write_bytes(b"DIFSIM-FIT-CHECKPOINT 4\n" + body)
        _refused(path, "is corrupt")
