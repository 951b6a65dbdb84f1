"""Monte Carlo sweeps of stochastic models: per-path keys, streamed statistics against the
same paths kept whole and against the exact Ornstein–Uhlenbeck law, identical results for any
chunking, device count and resume, configs, and the errors that name the culprit.

Statistical tolerances are 5 standard errors of the estimate: `sqrt(var / n)` for a mean,
`var sqrt(2 / (n - 1))` for a variance, `sqrt(p (1 - p)) / (f(q) sqrt(n))` for a p-quantile
of a density f.
"""

import jax
import numpy as np
import pytest
from scipy.stats import norm

import difsim as ds
from difsim._sweep import SweepOutputError, run_sweep
from difsim._sweep._statistics import BINS
from difsim.models import OrnsteinUhlenbeck

SIGMAS = [0.3, 0.6]
COMMON = dict(t0=0.0, t1=1.0, save=5, solver="euler", dt0=0.05, brownian="steps")
KEEP = ["x_mean", "x_var", "x_std", "x_min", "x_max", "x_q05", "x_median", "x_q95"]
MODEL = OrnsteinUhlenbeck(mu=0.5)


def _stats(samples=600, **kw):
    spec = ds.GridSweep({"sigma": SIGMAS})
    return ds.sweep(MODEL, spec, samples=samples, seed=3, keep=KEEP, **{**COMMON, **kw})


@pytest.fixture(scope="module")
def stats():
    return _stats()


@pytest.fixture(scope="module")
def paths():
    spec = ds.GridSweep({"sigma": SIGMAS})
    return ds.sweep(MODEL, spec, samples=600, seed=3, keep="trajectory", **COMMON)


def test_statistics_have_the_grid_and_time_dims_only(stats):
    for name in KEEP:
        assert stats[name].dims == ("sigma", "time")
    assert "path" not in stats.dims
    np.testing.assert_array_equal(stats["n_paths"], [600, 600])
    np.testing.assert_allclose(stats["time"], np.linspace(0.0, 1.0, 5))
    assert stats.attrs["samples"] == 600 and stats.attrs["seed"] == 3
    long_name = "position: variance over the paths (unbiased, n - 1)"
    assert stats["x_var"].attrs["long_name"] == long_name


def test_statistics_equal_those_of_the_same_paths_kept_whole(stats, paths):
    # Same seed, same global indices: the per-path sweep holds the very paths the
    # statistics streamed over.
    x = paths["x"].transpose("sigma", "path", "time").values
    assert paths["x"].dims == ("sigma", "path", "time")
    np.testing.assert_allclose(stats["x_mean"], x.mean(axis=1), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(stats["x_var"], x.var(axis=1, ddof=1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(stats["x_std"], x.std(axis=1, ddof=1), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(stats["x_min"], x.min(axis=1))
    np.testing.assert_array_equal(stats["x_max"], x.max(axis=1))
    # Streamed quantiles: within one histogram bin plus the gap between the order
    # statistics around the quantile (where sample-quantile definitions differ).
    for p, name in ((0.05, "x_q05"), (0.5, "x_median"), (0.95, "x_q95")):
        got = stats[name].values[:, 1:]  # t = 0 is the fixed initial state
        ranked = np.sort(x[:, :, 1:], axis=1)
        k = int(p * (ranked.shape[1] - 1))
        gap = ranked[:, k + 2] - ranked[:, max(k - 1, 0)]
        width = 1.5 * (ranked[:, -1] - ranked[:, 0]) / BINS
        exact = np.quantile(x[:, :, 1:], p, axis=1)
        assert np.all(np.abs(got - exact) <= gap + width), (got, exact)
    np.testing.assert_allclose(stats["x_median"].values[:, 0], 1.0, atol=1e-12)


def test_statistics_match_the_exact_ornstein_uhlenbeck_law():
    # 4000 paths per point; Euler's bias in the variance (θ dt / 2 = 2.5 %) is well inside
    # 5 standard errors of the variance (11 %), and likewise for the quantiles.
    out = _stats(samples=4000)
    n = 4000
    for i, sigma in enumerate(SIGMAS):
        model = MODEL.replace(sigma=sigma)
        for j, t in enumerate(np.linspace(0.0, 1.0, 5)[1:], start=1):
            mean, var = float(model.mean(t)), float(model.variance(t))
            sd = np.sqrt(var)
            assert abs(float(out["x_mean"][i, j]) - mean) < 5 * np.sqrt(var / n)
            assert abs(float(out["x_var"][i, j]) - var) < 5 * var * np.sqrt(2 / (n - 1))
            for p, name in ((0.05, "x_q05"), (0.95, "x_q95")):
                q = mean + sd * norm.ppf(p)
                se = np.sqrt(p * (1 - p)) / (norm.pdf(norm.ppf(p)) / sd * np.sqrt(n))
                assert abs(float(out[name][i, j]) - q) < 5 * se


def test_each_path_has_the_key_of_its_global_index(paths):
    # Path s of point p: key fold_in(key(seed), p * samples + s), whatever the chunking.
    for p, s in ((0, 0), (1, 17), (1, 599)):
        key = jax.random.fold_in(jax.random.key(3), p * 600 + s)
        sol = ds.simulate(MODEL.replace(sigma=SIGMAS[p]), key=key, **COMMON)
        # (A batch may round differently from one path in the last bit: XLA vectorises.)
        np.testing.assert_allclose(paths["x"].values[p, s], sol.ys["x"], rtol=1e-14)


def test_statistics_do_not_depend_on_chunks_or_devices(stats):
    # The same paths (keys of their global indices) and the same block merges, in the same
    # order: equal up to the last bit a differently sized batch may round differently.
    # (The fixture ran on every device, with chunks from the memory budget.)
    other = _stats(chunk_size=256, devices=jax.devices()[:1])
    assert len(jax.devices()) > 1
    for name in KEEP:
        np.testing.assert_allclose(other[name], stats[name], rtol=1e-13, atol=1e-15)


def test_a_killed_statistics_sweep_resumes_to_the_same_result(tmp_path):
    out = tmp_path / "ou.nc"
    spec = ds.GridSweep({"sigma": SIGMAS})
    # One device and chunks of 256, as in the test above: its compiled chunk serves here.
    kw = dict(samples=600, seed=3, keep=KEEP, chunk_size=256, devices=jax.devices()[:1], **COMMON)
    whole, report = run_sweep(MODEL, spec, **kw)
    assert report.computed_points == len(SIGMAS) * 600  # paths, not padded lanes

    def stop(i):
        if i == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(MODEL, spec, output=out, on_chunk=stop, **kw)
    assert not out.exists() and (tmp_path / "ou.nc.mcstate.npz").exists()
    resumed, report = run_sweep(MODEL, spec, output=out, **kw)
    assert report.reused == 2 and report.computed == tuple(range(2, report.n_chunks))
    assert 0 < report.computed_points < len(SIGMAS) * 600
    for name in KEEP:  # the same chunks merged in the same order: bit for bit
        np.testing.assert_array_equal(resumed[name], whole[name])
    assert not (tmp_path / "ou.nc.mcstate.npz").exists()
    again, report = run_sweep(MODEL, spec, output=out, **kw)  # finished: nothing computed
    assert report.computed == () and report.computed_points == 0
    np.testing.assert_array_equal(again["x_q95"], whole["x_q95"])
    with pytest.raises(SweepOutputError, match="holds the result of a different sweep"):
        run_sweep(MODEL, spec, output=out, **{**kw, "samples": 300})


def test_monte_carlo_sweeps_are_checked():
    spec = ds.GridSweep({"sigma": SIGMAS})
    with pytest.raises(ValueError, match="is stochastic.*samples=<paths per point>"):
        ds.sweep(MODEL, spec, keep=["x_mean"], **COMMON)
    with pytest.raises(ValueError, match="Lorenz has no noise"):
        ds.sweep(ds.models.Lorenz(), spec, samples=10, t0=0.0, t1=1.0)
    with pytest.raises(ValueError, match="'x_final' is not a statistic over the paths"):
        ds.sweep(MODEL, spec, samples=10, keep=["x_mean", "x_final"], **COMMON)
    with pytest.warns(DeprecationWarning, match="'x.q05' is spelled 'x_q05'"):  # before 0.1
        with pytest.raises(ValueError, match="'x_final' is not a statistic over the paths"):
            ds.sweep(MODEL, spec, samples=10, keep=["x.q05", "x_final"], **COMMON)
    with pytest.raises(ValueError, match="'x.q0' is not a statistic.*qNN"):
        ds.sweep(MODEL, spec, samples=10, keep=["x_mean", "x.q0"], **COMMON)
    with pytest.raises(ValueError, match="samples must be a positive number of paths"):
        ds.sweep(MODEL, spec, samples=0, keep=["x_mean"], **COMMON)
    with pytest.raises(ValueError, match="'ensemble' cannot run this sweep: brownian='tree'"):
        ds.sweep(MODEL, spec, samples=10, engine="ensemble", **{**COMMON, "brownian": "tree"})


def test_langevin_ensemble_config_runs_and_draws_a_fan_chart(tmp_path):
    out = tmp_path / "langevin.nc"
    overrides = {"sweep.samples": 64, "time.t1": 1.0, "time.save": 5, "solver.dt0": 0.05}
    data = ds.run_config("experiments/langevin_ensemble.toml", overrides=overrides, output=out)
    assert data["x_q95"].dims == ("D", "time") and data.sizes["D"] == 5
    assert out.exists() and out.with_suffix(".png").exists()
    assert np.all(data["x_q05"] <= data["x_mean"]) and np.all(data["x_mean"] <= data["x_q95"])


def test_config_monte_carlo_sections_are_checked():
    base = {"model": {"name": "double_well"}, "time": {"t1": 1.0}}
    with pytest.raises(ds.ConfigError, match=r"\[sweep\] samples: .*Monte Carlo paths"):
        ds.load_config({**base, "sweep": {"D": [0.1, 0.2]}})
    with pytest.raises(ds.ConfigError, match=r"\[sweep\] kind: .*not lhs parameter draws"):
        ds.load_config({**base, "sweep": {"kind": "lhs", "samples": 5, "D": {"uniform": [0, 1]}}})
    with pytest.raises(ds.ConfigError, match=r"\[sweep\] keep: 'x.p05' is not a statistic"):
        ds.load_config({**base, "sweep": {"samples": 5, "keep": ["x_mean", "x.p05"]}})
    with pytest.raises(ds.ConfigError, match=r"\[solver\] name: .*'tsit5' \(an ODE solver\)"):
        ds.load_config({**base, "solver": {"name": "tsit5"}})
    with pytest.raises(ds.ConfigError, match=r"\[solver\] name: 'shark' is an SDE solver"):
        ds.load_config({**base, "model": {"name": "lorenz"}, "solver": {"name": "shark"}})
    experiment = ds.load_config({**base, "sweep": {"samples": 5, "keep": ["x_mean"]}})
    assert experiment.solver.name == "shark"
    assert experiment.sweep.paths() == {"samples": 5, "seed": 0}
    assert ds.load_config(experiment.to_dict()) == experiment


def test_a_config_runs_one_path_of_a_stochastic_model():
    config = {
        "model": {"name": "ornstein_uhlenbeck"},
        "time": {"t1": 1.0, "save": 5},
        "solver": {"name": "euler", "dt0": 0.05, "seed": 3, "dtype": "float64"},
    }
    data = ds.run_config(config, plot=False)
    sol = ds.simulate(OrnsteinUhlenbeck(), t0=0.0, t1=1.0, save=5, key=jax.random.key(3),
                      solver="euler", dt0=0.05)  # fmt: skip
    np.testing.assert_allclose(data["x"], sol.ys["x"], rtol=1e-14)
    assert data.attrs["noise"] == "diagonal, Itô" and data.attrs["calculus"] == "ito"
    with pytest.raises(ds.ConfigError, match=r"\[solver\] seed: .*Lorenz has no noise"):
        ds.load_config({"model": {"name": "lorenz"}, "time": {"t1": 1.0}, "solver": {"seed": 1}})
