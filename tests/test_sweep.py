"""`ds.sweep`: results against analytic solutions and single runs, chunking, failures,
observables, errors, plots. Float64, small sweeps; chunk sizes are multiples of the 8 test
devices, and settings repeat so that compiled chunk functions are reused."""

import re

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import xarray as xr

import difsim as ds
from difsim._sweep import choose_chunk_size, parse_bytes, run_sweep
from difsim.models import ExponentialDecay, Lorenz

TOL = dict(rtol=1e-10, atol=1e-10)
RHO = np.linspace(0.0, 21.0, 37)
LORENZ = ds.GridSweep({"rho": RHO, "beta": [1.0, 8.0 / 3.0]})  # 74 points


class Oscillator(ds.Model):
    """A harmonic oscillator with a stiffness k, and two observables."""

    k: float = ds.param(1.0, units="N/m", description="stiffness")
    state = ds.State(x=ds.Var(1.0, units="m"), v=ds.Var(0.0, units="m/s"))

    def rhs(self, t, s):
        return dict(x=s.v, v=-self.k * s.x)

    @ds.observable(units="J", description="energy at the end")
    def energy(self, ts, ys):
        return 0.5 * (ys["v"][-1] ** 2 + self.k * ys["x"][-1] ** 2)

    @ds.observable
    def extremes(self, ts, ys):
        return jnp.stack([jnp.max(ys["x"]), jnp.min(ys["v"])])

    @ds.observable(description="sign changes of x (an integer, stored as a float)")
    def crossings(self, ts, ys):
        return jnp.sum(jnp.sign(ys["x"][1:]) != jnp.sign(ys["x"][:-1]))


def _lorenz(spec=LORENZ, **kw):
    return ds.sweep(Lorenz(), spec, t0=0.0, t1=1.0, progress=False, **{**TOL, **kw})


# Sweeps shared by several tests (each distinct sweep costs a compilation).
@pytest.fixture(scope="module")
def lorenz8():
    return _lorenz(chunk_size=8)  # 10 chunks of one trajectory per device, the last padded


FAILING = dict(t0=0.0, t1=1.0, save=3, max_steps=30, rtol=1e-6, atol=1e-6)
K_FAILING = np.array([0.5, 1.0, 500.0, 2.0])  # k = 500 needs more than 30 steps


@pytest.fixture(scope="module")
def failing():
    spec = ds.GridSweep({"k": K_FAILING})
    return ds.sweep(ExponentialDecay(), spec, keep=["y_max", "y_final"], **FAILING)


OBSERVED = ["x_max", "x_min", "x_mean", "x_rate", "v_final", "energy", "extremes", "crossings"]
OSC = dict(t0=0.0, t1=3.0, save=31, **TOL)


@pytest.fixture(scope="module")
def observed():
    spec = ds.GridSweep({"k": [1.0, 4.0], "state.x": [0.5, 1.0, 2.0]})
    return ds.sweep(Oscillator(), spec, keep=OBSERVED, **OSC)


@pytest.fixture(scope="module")
def random_draws():
    spec = ds.RandomSweep({"k": ds.LogUniform(0.1, 10.0)}, samples=20, seed=1, dim="draw")
    return spec, ds.sweep(ExponentialDecay(), spec, t0=0.0, t1=1.0, **TOL)


def test_grid_of_decays_matches_the_exact_solution():
    k, y0 = np.linspace(0.1, 3.0, 13), [0.5, 1.0, 2.0]
    spec = ds.GridSweep({"k": k, "state.y": y0})
    out = ds.sweep(ExponentialDecay(), spec, t0=0.0, t1=2.0, save=5, keep="trajectory", **TOL)
    assert out.y.dims == ("k", "state.y", "time") and out.y.shape == (13, 3, 5)
    np.testing.assert_array_equal(out.k, k)
    np.testing.assert_array_equal(out.time, np.linspace(0.0, 2.0, 5))
    exact = np.asarray(y0)[None, :, None] * np.exp(-k[:, None, None] * out.time.values)
    np.testing.assert_allclose(out.y, exact, rtol=1e-8, atol=1e-10)
    assert (out.status == 0).all() and out.attrs["n_success"] == 39
    assert out.k.attrs["units"] == "1/s" and out.time.attrs["units"] == "s"
    assert out.attrs["sweep_kind"] == "grid" and out.attrs["model"] == "ExponentialDecay"
    assert "k" not in out.attrs  # swept, so not a fixed parameter


def test_sweep_equals_separate_simulate_calls():
    spec = ds.ZipSweep({"rho": [5.0, 14.0, 28.0], "beta": [1.0, 2.0, 3.0], "state.x": [1, 2, 3]})
    out = ds.sweep(Lorenz(), spec, t0=0.0, t1=1.0, save="final", **TOL)
    assert out.x.dims == ("sample",) and list(out["state.x"].values) == [1.0, 2.0, 3.0]
    for i, (rho, beta, x0) in enumerate(zip(*spec.values.values())):
        model = Lorenz(rho=rho, beta=beta).replace(**{"state.x": x0})
        sol = ds.simulate(model, t0=0.0, t1=1.0, save="final", **TOL)
        for var in "xyz":
            np.testing.assert_allclose(out[var][i], sol.final[var], rtol=1e-9, atol=1e-12)
        assert int(out.num_steps[i]) == int(sol.num_steps)


def test_results_do_not_depend_on_chunking(lorenz8):
    reference = lorenz8
    out = _lorenz(chunk_size=None)  # one chunk of 80
    assert reference.x.dims == ("rho", "beta") and reference.x.shape == (37, 2)
    # Same steps; values equal to rounding (XLA's code differs with the batch per device).
    for name in ("status", "num_steps"):
        np.testing.assert_array_equal(out[name], reference[name], err_msg=name)
    for name in "xyz":
        np.testing.assert_allclose(out[name], reference[name], rtol=1e-12, atol=1e-13)


def test_a_tiny_memory_budget_means_one_trajectory_per_device():
    out, report = run_sweep(
        ExponentialDecay(), ds.GridSweep({"k": [1.0, 2.0, 3.0]}), t0=0.0, t1=1.0,
        memory_budget="1KiB", **TOL,
    )  # fmt: skip
    assert report.chunk_size == report.n_devices == 8 and report.n_chunks == 1
    np.testing.assert_allclose(out.y, np.exp(-np.array([1.0, 2.0, 3.0])), rtol=1e-8)


def test_failed_trajectories_are_reported_and_the_others_kept(failing):
    out, k = failing, K_FAILING
    assert list(out.status.values) == [0, 0, int(ds.Status.MAX_STEPS), 0]
    assert out.attrs["n_success"] == 3 and out.attrs["n_max_steps"] == 1
    ok = out.status.values == 0
    assert np.isnan(out["y_final"][2]) and np.isnan(out["y_max"][2])
    np.testing.assert_allclose(out["y_final"][ok], np.exp(-k[ok]), rtol=1e-5)
    np.testing.assert_allclose(out["y_max"][ok], 1.0, rtol=1e-12)
    # The kept series of a failed trajectory holds its values up to the failure.
    series = ds.sweep(ExponentialDecay(), ds.GridSweep({"k": k}), keep="trajectory", **FAILING)
    assert series.y[2, 0] == 1.0 and np.isnan(series.y[2, -1])


def test_observables_equal_reductions_of_the_saved_series(observed):
    spec = ds.GridSweep({"k": [1.0, 4.0], "state.x": [0.5, 1.0, 2.0]})
    series, out = ds.sweep(Oscillator(), spec, keep="trajectory", **OSC), observed
    x, v, t = series.x.values, series.v.values, series.time.values
    np.testing.assert_array_equal(out["x_max"], x.max(-1))
    np.testing.assert_array_equal(out["x_min"], x.min(-1))
    np.testing.assert_allclose(out["x_mean"], scipy.integrate.trapezoid(x, t) / 3.0, rtol=1e-13)
    np.testing.assert_allclose(out["x_rate"], (x[..., -1] - x[..., 0]) / 3.0, rtol=1e-13)
    np.testing.assert_array_equal(out["v_final"], v[..., -1])
    k = out.k.values[:, None]
    np.testing.assert_allclose(
        out.energy, 0.5 * (v[..., -1] ** 2 + k * x[..., -1] ** 2), rtol=1e-13
    )
    # Energy is conserved: an independent check of the whole chain.
    np.testing.assert_allclose(out.energy, 0.5 * k * out["state.x"].values[None, :] ** 2, rtol=1e-8)
    assert out.extremes.dims == ("k", "state.x", "extremes_dim0")
    np.testing.assert_array_equal(out.extremes[..., 1], v.min(-1))
    assert out.energy.attrs == {"units": "J", "long_name": "energy at the end"}
    crossings = (np.sign(x[..., 1:]) != np.sign(x[..., :-1])).sum(-1)
    assert out.crossings.dtype == np.float64 and (out.crossings == crossings).all()
    assert (crossings > 0).all()
    assert out["x_rate"].attrs["units"] == "m"  # per model time unit (undeclared: "1")
    assert "time" not in out.dims  # only the observables are kept


def test_dotted_observable_names_are_deprecated_spellings(observed):
    # "x.max" (before 0.1) names the CF-safe "x_max": the same sweep (the same compiled
    # function), a DeprecationWarning attributed to the caller's line, the new names out.
    spec = ds.GridSweep({"k": [1.0, 4.0], "state.x": [0.5, 1.0, 2.0]})
    dotted = [n.replace("_", ".") if n[:2] in ("x_", "v_") else n for n in OBSERVED]
    with pytest.warns(DeprecationWarning) as record:
        out = ds.sweep(Oscillator(), spec, keep=dotted, **OSC)
    assert len(record) == 5 and {w.filename for w in record} == {__file__}
    assert str(record[0].message).startswith("keep: 'x.max' is spelled 'x_max' since difsim 0.1")
    assert list(out.data_vars) == list(observed.data_vars)
    xr.testing.assert_identical(out.drop_attrs(), observed.drop_attrs())
    assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", str(n)) for n in OBSERVED)  # CF names
    np.testing.assert_array_equal(out.x_max, observed["x_max"])  # attribute access works


def test_an_observable_named_like_a_reduction_is_refused():
    class Shadow(Oscillator):
        @ds.observable
        def x_max(self, ts, ys):
            return jnp.max(ys["v"])

    with pytest.raises(ValueError, match=r"Shadow\.x_max .* built-in reduction 'x_max' of state"):
        ds.sweep(Shadow(), ds.GridSweep({"k": [1.0]}), keep=["x_max"], **OSC)


@pytest.mark.parametrize(
    "kw, error, fragments",
    [
        (dict(keep=["x.maxx"]), ValueError, ["'x.maxx'", "'x_max'?", "'energy'", "'extremes'"]),
        (dict(keep="trajectory", save="final"), ValueError, ["keep='trajectory'", "save = n"]),
        (dict(keep=["x_mean"], save=1), ValueError, ["'x_mean' reduces", "save = n"]),
        (dict(keep=["x_max", "x_max"]), ValueError, ["listed twice"]),
        (dict(keep="all"), ValueError, ["'final', 'trajectory'"]),
        (dict(t1=0.0), ValueError, ["t1 must be greater than t0"]),
        (dict(save=[0.5, 0.2]), ValueError, ["strictly increasing"]),
        (dict(chunk_size=0), ValueError, ["chunk_size", "positive integer"]),
        (dict(memory_budget="lots"), ValueError, ["memory_budget", "'512MiB'", "'lots'"]),
        (dict(solver="tsit6"), ValueError, ["tsit6"]),
        (dict(spec=ds.GridSweep({"kk": [1.0]})), ValueError, ["'kk'", "'k'?", "'state.x'"]),
        (dict(spec={"k": [1.0]}), TypeError, ["ds.GridSweep"]),
    ],
)
def test_bad_sweeps_raise_before_compiling(kw, error, fragments):
    kw = {"spec": ds.GridSweep({"k": [1.0]}), "t0": 0.0, "t1": 1.0, "save": 5, **kw}
    with pytest.raises(error) as info:
        ds.sweep(Oscillator(), kw.pop("spec"), **kw)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_random_sweep_labels_samples_with_their_parameters(random_draws):
    spec, out = random_draws
    assert out.y.dims == ("draw",) and out.k.dims == ("draw",)
    np.testing.assert_array_equal(out.k, spec.draws()["k"])
    np.testing.assert_allclose(out.y, np.exp(-out.k.values), rtol=1e-8, atol=1e-9)
    assert out.k.attrs["distribution"] == "loguniform(0.1, 10)"
    assert out.attrs["sweep_kind"] == "random" and out.attrs["seed"] == 1


def test_chunk_size_rules():
    assert choose_chunk_size(10, 8, 100, 2**30) == 16  # at most the whole sweep, rounded
    assert choose_chunk_size(10**6, 8, 100, 2**30) == 31256  # about 32 chunks
    assert choose_chunk_size(10**5, 1, 100, 2**30) == 3125
    assert choose_chunk_size(10**4, 1, 100, 2**30) == 1024  # never below 1024 by default
    assert choose_chunk_size(10**6, 4, 10**6, 2**30) == 1072  # the budget caps it
    assert choose_chunk_size(10**6, 4, 10**9, 2**30) == 4  # one per device at least
    assert choose_chunk_size(100, 8, 100, 2**30, chunk_size=10) == 16  # rounded up
    assert choose_chunk_size(10**6, 2, 100, 2**30, cpu=True) == 2048  # cache-sized on CPU
    assert choose_chunk_size(1000, 2, 100, 2**30, cpu=True) == 1000
    assert parse_bytes("512MiB") == 512 * 2**20 and parse_bytes("2GB") == 2 * 10**9
    assert parse_bytes(" 1.5 kib ") == 1536 and parse_bytes(4096) == 4096


def test_plots_by_kind(tmp_path, lorenz8, failing, observed):
    from matplotlib.figure import Figure

    spec = ds.RandomSweep({"rho": ds.LogUniform(1.0, 20.0), "beta": ds.Uniform(1.0, 3.0)}, 16)
    random = _lorenz(spec=spec, chunk_size=8)
    line = lorenz8.isel(beta=0, drop=True)
    line.attrs["sweep_keys"] = "rho"
    cases = dict(line=failing, heat=observed, heat2=lorenz8, scatter=random, line2=line)
    for name, data in cases.items():
        fig = ds.plot(data)
        assert isinstance(fig, Figure)
        ds.plot(data, path=tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    assert "1 failed" in ds.plot(failing)._suptitle.get_text()
    # v.final takes both signs: a diverging colour map centred on zero.
    mesh = ds.plot(observed[["v_final", "status"]]).axes[0].collections[0]
    assert mesh.get_cmap().name == "RdBu_r" and mesh.norm.vmin == -mesh.norm.vmax
    assert ds.plot(random).axes[0].get_xscale() == "log"  # rho is log-uniform


def test_dataset_round_trips_through_netcdf(tmp_path, observed):
    path = tmp_path / "observed.nc"
    observed.to_netcdf(path, engine="h5netcdf")
    with xr.open_dataset(path, engine="h5netcdf") as back:
        xr.testing.assert_identical(back.load(), observed)


def test_docs_observable_example_runs():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "sweeps.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "observable" in b)
    namespace = {"ds": ds, "np": np}
    exec(
        compile(block.replace("np.linspace(0, 2, 80)", "[1.2, 1.5]"), "sweeps.md", "exec"),
        namespace,
    )
    spec = ds.GridSweep({"F": [1.2, 1.5]})
    keep = ["rotation", "theta_rate"]
    out = ds.sweep(namespace["Pendulum"](), spec, t0=0.0, t1=300.0, save=[100.0, 300.0], keep=keep)
    np.testing.assert_allclose(out.rotation, out["theta_rate"] / out.attrs["omega_d"], rtol=1e-12)
