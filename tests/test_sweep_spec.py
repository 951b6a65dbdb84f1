"""Sweep specs: points and coordinates of grid/zip/random/LHS sweeps, and bad specs (no solving)."""

import copy
import itertools
import math
import pickle

import numpy as np
import pytest
import scipy.stats

import difsim as ds
from difsim._config._sweep import entry_values
from difsim._sweep import check_keys
from difsim.models import SIR, Lorenz

N = 2000


def test_grid_points_are_the_cartesian_product_in_c_order():
    a, x = [1.0, 2.0, 3.0], [10.0, 20.0]
    spec = ds.GridSweep({"rho": a, "state.x": x})
    assert spec.dims == ("rho", "state.x") and spec.shape == (3, 2) and spec.size == 6
    points = spec.points(0, 6, np.float64)
    assert list(zip(points["rho"], points["state.x"])) == list(itertools.product(a, x))
    # Any sub-range gives the same points as slicing the whole.
    part = spec.points(1, 5, np.float32)
    assert part["rho"].dtype == np.float32
    np.testing.assert_array_equal(part["state.x"], np.float32(points["state.x"][1:5]))
    coords = spec.coords(np.float64)
    assert coords["rho"][0] == ("rho",) and list(coords["state.x"][1]) == x


def test_zip_pairs_values_along_one_dim():
    spec = ds.ZipSweep({"rho": [1.0, 2.0, 3.0], "beta": [4.0, 5.0, 6.0]}, dim="run")
    assert spec.dims == ("run",) and spec.shape == (3,)
    points = spec.points(1, 3, np.float64)
    assert list(points["rho"]) == [2.0, 3.0] and list(points["beta"]) == [5.0, 6.0]
    assert spec.coords(np.float64)["beta"][0] == ("run",)
    with pytest.raises(ValueError, match="same number of values.*'rho': 3, 'beta': 2"):
        ds.ZipSweep({"rho": [1.0, 2.0, 3.0], "beta": [4.0, 5.0]})


@pytest.mark.parametrize(
    "spec",
    [ds.GridSweep({"rho": [1.0, 2.0], "state.x": [0.5]}), ds.ZipSweep({"rho": [1.0, 2.0]}, "run")],
)
def test_grid_and_zip_keys_are_fixed_and_specs_pickle(spec):
    # Keys and lengths are read by every sweep of the spec (computed once): they cannot
    # change under it; values may be written into (a sweep compares them).
    with pytest.raises(TypeError):
        spec.values["beta"] = np.ones(2)
    again = pickle.loads(pickle.dumps(spec))
    assert type(again) is type(spec) and (again.dims, again.shape) == (spec.dims, spec.shape)
    assert again.size == math.prod(spec.shape) and again.keys == spec.keys
    np.testing.assert_array_equal(again.values["rho"], [1.0, 2.0])
    assert copy.deepcopy(spec).coords(np.float64).keys() == spec.coords(np.float64).keys()


@pytest.mark.parametrize("method", ["random", "lhs"])
def test_random_draws_follow_their_distributions(method):
    dists = {
        "rho": ds.Uniform(2.0, 5.0),
        "beta": ds.LogUniform(0.1, 10.0),
        "sigma": ds.Normal(3.0, 0.5),
    }
    spec = ds.RandomSweep(dists, samples=N, seed=3, method=method)
    assert spec.kind == method and spec.dims == ("sample",) and spec.shape == (N,)
    draws = spec.draws()
    assert draws["rho"].min() >= 2.0 and draws["rho"].max() <= 5.0
    assert draws["beta"].min() >= 0.1 and draws["beta"].max() <= 10.0
    # Kolmogorov-Smirnov against scipy's distributions (an independent reference).
    refs = {
        "rho": scipy.stats.uniform(2.0, 3.0),
        "beta": scipy.stats.loguniform(0.1, 10.0),
        "sigma": scipy.stats.norm(3.0, 0.5),
    }
    for key, ref in refs.items():
        assert scipy.stats.kstest(draws[key], ref.cdf).pvalue > 1e-3, key
    # Moments of the normal, loosely (5 standard errors).
    assert abs(draws["sigma"].mean() - 3.0) < 5 * 0.5 / np.sqrt(N)
    assert abs(draws["sigma"].std() / 0.5 - 1.0) < 0.1
    # The keys are drawn independently (no correlation across keys).
    assert abs(np.corrcoef(draws["rho"], draws["sigma"])[0, 1]) < 5 / np.sqrt(N)


def test_lhs_puts_exactly_one_point_in_every_stratum():
    n = 500
    dists = {"a": ds.Uniform(-1.0, 3.0), "b": ds.LogUniform(1e-3, 1.0), "c": ds.Normal(0.0, 2.0)}
    draws = ds.RandomSweep(dists, samples=n, seed=11, method="lhs").draws()
    cdfs = {
        "a": scipy.stats.uniform(-1.0, 4.0).cdf,
        "b": scipy.stats.loguniform(1e-3, 1.0).cdf,
        "c": scipy.stats.norm(0.0, 2.0).cdf,
    }
    for key, cdf in cdfs.items():
        strata = np.floor(cdf(draws[key]) * n).astype(int)
        assert sorted(strata) == list(range(n)), key
    # Plain random sampling does not (with overwhelming probability).
    plain = ds.RandomSweep(dists, samples=n, seed=11).draws()
    assert len(set(np.floor(cdfs["a"](plain["a"]) * n).astype(int))) < n


def test_seed_determines_the_draws_bitwise_whatever_the_run_dtype():
    dists = {"beta": ds.LogUniform(0.2, 5.0), "gamma": ds.Uniform(0.1, 1.0)}
    a = ds.RandomSweep(dists, samples=64, seed=7, method="lhs")
    b = ds.RandomSweep(dict(dists), samples=64, seed=7, method="lhs")
    c = ds.RandomSweep(dists, samples=64, seed=8, method="lhs")
    for key in dists:
        np.testing.assert_array_equal(a.draws()[key], b.draws()[key])
        assert not np.array_equal(a.draws()[key], c.draws()[key])
        # float32 runs get the float64 draws rounded, not other draws.
        np.testing.assert_array_equal(
            a.points(0, 64, np.float32)[key], a.draws()[key].astype(np.float32)
        )
    assert a.fingerprint(np.float64) == b.fingerprint(np.float64) != c.fingerprint(np.float64)
    assert a.coords(np.float64)["beta"][2] == {"distribution": "loguniform(0.2, 5)"}


@pytest.mark.parametrize(
    "make, fragments",
    [
        (lambda: ds.GridSweep({"rho": []}), ["'rho'", "empty"]),
        (lambda: ds.GridSweep({"rho": [[1.0, 2.0]]}), ["'rho'", "1-D"]),
        (lambda: ds.GridSweep({"rho": [1.0, np.nan]}), ["'rho'", "finite"]),
        (lambda: ds.GridSweep({"rho": ["a"]}), ["'rho'", "numbers"]),
        (lambda: ds.GridSweep({}), ["non-empty dict"]),
        (lambda: ds.Uniform(2.0, 1.0), ["low < high"]),
        (lambda: ds.LogUniform(0.0, 1.0), ["0 < low < high"]),
        (lambda: ds.Normal(0.0, -1.0), ["std > 0"]),
        (lambda: ds.RandomSweep({"rho": ds.Uniform(0, 1)}, samples=0), ["samples", "positive"]),
        (lambda: ds.RandomSweep({"rho": [1.0, 2.0]}, samples=3), ["'rho'", "distribution"]),
        (lambda: ds.RandomSweep({"rho": ds.Uniform(0, 1)}, 3, method="sobol"), ["'sobol'"]),
        (lambda: ds.ZipSweep({"sample": [1.0]}), ["dim 'sample'", "swept key"]),
    ],
)
def test_bad_specs_raise_naming_the_culprit(make, fragments):
    with pytest.raises(ValueError) as info:
        make()
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_keys_are_checked_against_the_model():
    check_keys(["rho", "state.x"], Lorenz())
    check_keys(["beta", "state.I"], SIR)  # the class works too (configs check before building)
    with pytest.raises(ValueError) as info:
        ds.GridSweep({"rhoo": [1.0]}).check(Lorenz())
    message = str(info.value)
    for fragment in ["'rhoo'", "Lorenz has no such parameter", "'sigma'", "'state.x'", "'rho'?"]:
        assert fragment in message, (fragment, message)
    with pytest.raises(ValueError, match=r"state variables are swept as 'state\.x'"):
        check_keys(["x"], Lorenz())
    with pytest.raises(ValueError, match="no such state variable"):
        check_keys(["state.w"], Lorenz())


@pytest.mark.parametrize(
    "value, kind, expected",
    [
        ([1.0, 2.0], "grid", [1.0, 2.0]),
        ({"values": [3.0]}, "zip", [3.0]),
        ({"linspace": [0.0, 1.0, 5]}, "grid", np.linspace(0.0, 1.0, 5)),
        ({"logspace": [1e-3, 10.0, 5]}, "grid", [1e-3, 1e-2, 1e-1, 1.0, 10.0]),
    ],
)
def test_config_forms_give_values(value, kind, expected):
    np.testing.assert_allclose(entry_values("rho", value, kind), expected, rtol=1e-12)


def test_config_forms_give_distributions():
    assert entry_values("b", {"uniform": [1, 2]}, "random") == ds.Uniform(1.0, 2.0)
    assert entry_values("b", {"loguniform": [0.1, 2]}, "lhs") == ds.LogUniform(0.1, 2.0)
    assert entry_values("b", {"normal": [0, 2]}, "lhs") == ds.Normal(0.0, 2.0)


@pytest.mark.parametrize(
    "value, kind, fragments",
    [
        ({"linspace": [0.0, 1.0]}, "grid", ["[sweep] rho", "linspace takes [start, stop, n]"]),
        ({"linspace": [0.0, 1.0, 2.5]}, "grid", ["n must be an integer"]),
        ({"logspace": [-3, 1, 5]}, "grid", ["endpoints", "not exponents", "[0.001, 10.0, n]"]),
        ({"values": []}, "zip", ["non-empty list"]),
        ({"uniform": [0.0, 1.0]}, "grid", ['kind = "random" or "lhs"']),
        ([1.0, 2.0], "random", ["distribution", "{ uniform = [low, high] }"]),
        ({"linspace": [0, 1, 3]}, "lhs", ['kind = "grid" or "zip"']),
        ({"unifrom": [0, 1]}, "random", ["unknown form 'unifrom'", "'uniform'?"]),
        ({"uniform": [1.0, 0.0]}, "random", ["low < high"]),
        ({"values": [1.0], "linspace": [0, 1, 2]}, "grid", ["keys ['values', 'linspace']"]),
        ("1.0", "grid", ['"1.0" (a string)']),
    ],
)
def test_bad_config_forms_name_the_key(value, kind, fragments):
    with pytest.raises(ds.ConfigError) as info:
        entry_values("rho", value, kind)
    assert info.value.key == "sweep.rho"
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
