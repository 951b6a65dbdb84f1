"""`SweepOptions`: a sweep's settings checked and parsed once, at construction; the `on_chunk`
callback; `run_sweep` given an options object; byte sizes and chunk boundaries."""

import dataclasses
from pathlib import Path

import jax
import numpy as np
import pytest

import difsim as ds
from difsim._sweep import (
    DEFAULT_MEMORY_BUDGET,
    SweepOptions,
    check_chunk_size,
    parse_bytes,
    run_sweep,
)
from difsim._sweep._chunking import Chunking
from difsim._sweep._options import sweep_options
from difsim.models import ExponentialDecay

TIMES = dict(t0=0.0, t1=1.0)


def test_construction_parses_and_normalises_once():
    options = SweepOptions(
        **TIMES, memory_budget="512MiB", chunk_size=np.int64(16), output="runs/x.nc",
        devices=jax.devices()[:2], attrs={"config": "text"},
    )  # fmt: skip
    assert options.memory_budget == 512 * 2**20 and type(options.memory_budget) is int
    assert options.chunk_size == 16 and type(options.chunk_size) is int
    assert options.output == Path("runs/x.nc")
    assert options.devices == tuple(jax.devices()[:2])
    assert dict(options.attrs) == {"config": "text"}
    with pytest.raises(TypeError):
        options.attrs["other"] = 1  # read-only: the caller's dict is copied
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.chunk_size = 8
    # Defaults are those of `ds.sweep`; an int budget is taken as it is.
    plain = SweepOptions(**TIMES, memory_budget=4096)
    assert plain.memory_budget == 4096 and plain.output is None and plain.devices is None
    assert SweepOptions(**TIMES).memory_budget == DEFAULT_MEMORY_BUDGET == 2**30
    assert (plain.resume, plain.overwrite, plain.progress, dict(plain.attrs)) == (
        True, False, None, {},
    )  # fmt: skip
    # Rebuilding from already-normalised values changes nothing.
    assert dataclasses.replace(options) == options


@pytest.mark.parametrize(
    "kw, error, fragments",
    [
        (dict(chunk_size=0), ValueError, ["chunk_size must be a positive integer, got 0"]),
        (dict(chunk_size=True), ValueError, ["chunk_size", "got True"]),
        (dict(chunk_size=2.5), ValueError, ["chunk_size", "got 2.5"]),
        (dict(memory_budget="lots"), ValueError, ["memory_budget", "'lots'"]),
        (dict(memory_budget=0), ValueError, ["memory_budget", "got 0"]),
        (dict(resume="yes"), TypeError, ["resume must be True or False", "'yes'"]),
        (dict(overwrite=1), TypeError, ["overwrite must be True or False", "got 1"]),
        (dict(progress="auto"), TypeError, ["progress", "'auto'"]),
        (dict(output=3), TypeError, ["output must be a path", "got 3"]),
        (dict(attrs=["a"]), TypeError, ["attrs must be a dict", "['a']"]),
        (dict(on_chunk=5), TypeError, ["on_chunk must be a function", "got 5"]),
        (dict(rtoll=1e-8), TypeError, ["rtoll"]),
    ],
)
def test_bad_options_name_the_culprit(kw, error, fragments):
    with pytest.raises(error) as info:
        SweepOptions(**TIMES, **kw)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_parse_bytes_units_and_errors():
    cases = {
        "1": 1, "10B": 10, "3kb": 3000, "2MB": 2 * 10**6, "1.5GB": 15 * 10**8, "1TB": 10**12,
        "2KiB": 2048, "0.5MiB": 2**19, "1GiB": 2**30, "1TiB": 2**40, "1e3": 1000,
    }  # fmt: skip
    for text, expected in cases.items():
        assert parse_bytes(text) == expected, text
    assert parse_bytes(np.int32(7)) == 7
    for bad in ["0MiB", "-1KiB", "1 XB", "", "MiB", True, 0, -5, 1.5]:
        with pytest.raises(ValueError, match="budget_x: expected a positive number of bytes"):
            parse_bytes(bad, "budget_x")


def test_check_chunk_size():
    assert check_chunk_size(None) is None
    assert check_chunk_size(np.int64(3)) == 3 and type(check_chunk_size(np.int64(3))) is int
    for bad in [0, -8, False, 8.0, "8"]:
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            check_chunk_size(bad)


def test_chunk_boundaries():
    chunking = Chunking(38, 8)
    assert chunking.n_chunks == 5
    assert [chunking.start(i) for i in range(5)] == [0, 8, 16, 24, 32]
    assert [chunking.length(i) for i in range(5)] == [8, 8, 8, 8, 6]
    assert Chunking(8, 8).n_chunks == 1 and Chunking(8, 8).length(0) == 8


def test_on_chunk_is_called_once_per_chunk_in_order_and_options_run_the_sweep():
    k = np.linspace(0.5, 3.0, 20)  # 20 points in chunks of 8 (the 8 test devices): 3 chunks
    seen = []
    options = SweepOptions(
        **TIMES, rtol=1e-10, atol=1e-10, chunk_size=8, progress=False, on_chunk=seen.append
    )
    out, report = run_sweep(ExponentialDecay(), ds.GridSweep({"k": k}), options)
    assert seen == [0, 1, 2] and report.computed == (0, 1, 2) and report.n_chunks == 3
    np.testing.assert_allclose(out.y, np.exp(-k), rtol=1e-8)
    # The same sweep from keywords: the same options, the same result.
    again, _ = run_sweep(
        ExponentialDecay(), ds.GridSweep({"k": k}), **TIMES, rtol=1e-10, atol=1e-10,
        chunk_size=8, progress=False,
    )  # fmt: skip
    np.testing.assert_array_equal(again.y, out.y)
    with pytest.raises(TypeError, match="not both; got \\['rtol'\\]"):
        run_sweep(ExponentialDecay(), ds.GridSweep({"k": k}), options, rtol=1e-6)


def test_an_error_in_on_chunk_stops_the_sweep():
    class Stop(Exception):
        pass

    seen = []

    def stop(i):
        seen.append(i)
        if i == 1:
            raise Stop

    options = SweepOptions(**TIMES, chunk_size=8, progress=False, on_chunk=stop)
    with pytest.raises(Stop):
        run_sweep(ExponentialDecay(), ds.GridSweep({"k": np.linspace(0.5, 3.0, 20)}), options)
    assert seen == [0, 1]  # chunk 2 was dispatched but never stored


def test_plain_keywords_give_the_same_options_again_and_one_key_of_their_contents():
    first = sweep_options(**TIMES, rtol=1e-6, progress=False)
    assert sweep_options(**TIMES, rtol=1e-6, progress=False) is first
    # Types count (an int time is other keywords), and so does every value.
    assert sweep_options(t0=0, t1=1.0, rtol=1e-6, progress=False) is not first
    assert sweep_options(**TIMES, rtol=1e-7, progress=False) is not first
    # Values of other kinds are checked anew each time; a bad value is never remembered.
    attrs = dict(**TIMES, attrs={"config": "x"})
    assert sweep_options(**attrs) is not sweep_options(**attrs)
    for _ in range(2):
        with pytest.raises(ValueError, match="engine must be one of"):
            sweep_options(**TIMES, engine="fast")
    # The key of what shapes a setup: equal for equal contents, whatever the object; the
    # runtime options (progress, attrs, ...) are not in it; `None` with no content key.
    assert first.shaping_key == SweepOptions(**TIMES, rtol=1e-6).shaping_key
    assert first.shaping_key != SweepOptions(**TIMES, rtol=1e-6, keep="trajectory").shaping_key
    keep = dict(**TIMES, keep=["x_max", "y_mean"])
    assert SweepOptions(**keep).shaping_key == SweepOptions(**keep).shaping_key is not None
    assert SweepOptions(**TIMES, solver=object()).shaping_key is None
