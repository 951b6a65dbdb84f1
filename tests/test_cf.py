"""CF-style outputs: a single run, a sweep and a fit, written to netCDF and read back, carry
`Conventions`, `history`, `source` and valid units on every variable and coordinate; the
history's timestamp follows SOURCE_DATE_EPOCH, and a resumed sweep keeps its first run's."""

import datetime
import re

import cf_xarray  # noqa: F401  (the `.cf` accessor)
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._app._cli import main
from difsim._io import recording_command
from difsim._sweep import run_sweep
from difsim.models import ExponentialDecay, Heat, Kepler, Lorenz
from tests.test_units import unit_problem

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def cf_problems(dataset: xr.Dataset) -> list[str]:
    """What keeps `dataset` from our CF rules: global attributes, and valid units on every
    numeric variable and coordinate (flag variables excepted; entries over `parameter`
    may carry their units in the `parameter_units` coordinate instead); flag variables
    whose `flag_values` have the variable's own type (CF 2.5) and one meaning each."""
    problems = []
    attrs = dataset.attrs
    if attrs.get("Conventions") != "CF-1.11":
        problems.append(f"Conventions = {attrs.get('Conventions')!r}")
    if not re.fullmatch(STAMP + r": .+", str(attrs.get("history", ""))):
        problems.append(f"history = {attrs.get('history')!r}")
    for package in ("difsim", "jax", "diffrax", "equinox"):
        if f"{package} " not in str(attrs.get("source", "")):
            problems.append(f"source lacks {package}: {attrs.get('source')!r}")
    for name, da in dataset.variables.items():
        if "flag_values" in da.attrs:
            problems += _flag_problems(name, dataset[name])
            continue
        if not np.issubdtype(da.dtype, np.number):
            continue
        if "units" not in da.attrs and "parameter" in da.dims and "parameter_units" in dataset:
            per_entry = [unit_problem(str(u)) for u in dataset["parameter_units"].values]
            problems += [f"{name}: {p}" for p in per_entry if p]
            continue
        if (why := unit_problem(da.attrs.get("units"))) is not None:
            problems.append(f"{name}: {why}")
    return problems


def _flag_problems(name: str, da: xr.DataArray) -> list[str]:
    values = np.asarray(da.attrs["flag_values"])
    problems = []
    if values.dtype != da.dtype:
        problems.append(f"{name}: flag_values are {values.dtype}, the variable {da.dtype}")
    # (cf-xarray's `flags` fails on a one-value flag_values, read back as a scalar.)
    if not da.cf.is_flag_variable or len(da.attrs["flag_meanings"].split()) != values.size:
        problems.append(f"{name}: flag_meanings do not name each of flag_values")
    return problems


def _roundtrip(dataset: xr.Dataset, path) -> xr.Dataset:
    dataset.to_netcdf(path, engine="h5netcdf")
    with xr.open_dataset(path, engine="h5netcdf") as f:
        return f.load()


def test_a_single_run_is_cf(tmp_path):
    sol = ds.simulate(Kepler(), t=jnp.linspace(0.0, 2 * np.pi, 41), rtol=1e-10, atol=1e-10)
    data = _roundtrip(sol.to_xarray(), tmp_path / "kepler.nc")
    assert cf_problems(data) == []
    assert data.attrs["history"] == "2026-01-01T00:00:00Z: difsim.simulate(Kepler)"
    assert data.attrs["title"] == (
        "Kepler problem: a body orbiting a fixed centre of attraction, with GM = 1."
    )  # plain text, not LaTeX
    assert data.time.attrs == {"long_name": "time", "units": "1"}  # dimensionless: no axis T
    # The declared invariants are kept, and equal the closed forms of the saved states.
    q1, q2, p1, p2 = (data[k].values for k in ("q1", "q2", "p1", "p2"))
    np.testing.assert_allclose(data.energy, 0.5 * (p1**2 + p2**2) - 1 / np.hypot(q1, q2))
    np.testing.assert_allclose(data.angular_momentum, q1 * p2 - q2 * p1)
    assert data.energy.attrs["difsim_role"] == "invariant"
    assert data.attrs["plot_phase"] == "q1 q2" and data.attrs["plot_phase_aspect"] == "equal"


def test_grid_and_time_coordinates_carry_units(tmp_path):
    model = Heat(grid=ds.Grid.dirichlet(8, 0.1, units="m"))
    sol = ds.simulate(model, t=jnp.linspace(0.0, 1.0, 3))
    data = _roundtrip(sol.to_xarray(), tmp_path / "h.nc")
    assert cf_problems(data) == []
    assert data.x.attrs == {"long_name": "x coordinate", "units": "m", "axis": "X"}
    time = {"long_name": "time", "units": "s", "standard_name": "time", "axis": "T"}
    assert data.time.attrs == time
    assert "0.1 m" in data.attrs["grid"]
    # A grid made without units is dimensionless, and keeps its units when changed.
    assert ds.Grid.periodic(4).units == "1"
    assert model.grid.with_shape(16).units == "m" and model.grid.with_bc("neumann").units == "m"
    with pytest.raises(ValueError, match="grid units"):
        ds.Grid.periodic(4, units="")


def test_a_sweep_is_cf_in_memory_and_on_disk(tmp_path):
    spec = ds.GridSweep({"rho": np.linspace(1.0, 21.0, 4)})
    kw = dict(t0=0.0, t1=0.5, save=3, rtol=1e-8, atol=1e-8, progress=False)
    memory = ds.sweep(Lorenz(), spec, **kw)
    assert cf_problems(memory) == []
    assert memory.attrs["history"] == "2026-01-01T00:00:00Z: difsim.sweep(Lorenz)"
    disk, _ = run_sweep(Lorenz(), spec, output=tmp_path / "s.nc", **kw)
    assert cf_problems(disk.load()) == []
    assert disk.rho.attrs["units"] == "1" and disk.num_steps.attrs["units"] == "1"
    # Fields on a grid: the grid's coordinate with its units, and the run's own attributes.
    heat = Heat(grid=ds.Grid.dirichlet(8, 0.1, units="m"))
    fields = ds.sweep(heat, ds.GridSweep({"D": [1e-4, 2e-4]}), t0=0.0, t1=1.0, progress=False)
    assert cf_problems(fields) == [] and fields.u.dims == ("D", "x")
    assert fields.x.attrs["units"] == "m" and fields.attrs["sweep_kind"] == "grid"


def test_history_takes_the_clock_without_source_date_epoch(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    data = ds.simulate(ExponentialDecay(), t=jnp.linspace(0.0, 1.0, 3)).to_xarray()
    after = datetime.datetime.now(datetime.UTC)
    stamp, command = data.attrs["history"].split(": ", 1)
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    assert before <= moment <= after and command == "difsim.simulate(ExponentialDecay)"
    with recording_command("difsim run decay.toml"):
        data = ds.simulate(ExponentialDecay(), t=jnp.linspace(0.0, 1.0, 3)).to_xarray()
    assert data.attrs["history"].endswith(": difsim run decay.toml")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(ValueError, match="SOURCE_DATE_EPOCH"):
        ds.simulate(ExponentialDecay(), t=jnp.linspace(0.0, 1.0, 3)).to_xarray()


class Stop(Exception):
    pass


def test_a_resumed_sweep_keeps_its_first_runs_history(tmp_path, monkeypatch):
    spec = ds.GridSweep({"rho": np.linspace(0.0, 21.0, 12)})
    kw = dict(t0=0.0, t1=0.5, rtol=1e-8, atol=1e-8, chunk_size=4, progress=False)

    def stop(i):
        if i == 1:
            raise Stop

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1000000000")  # 2001-09-09T01:46:40Z
    run_sweep(Lorenz(), spec, output=tmp_path / "whole.nc", **kw)
    with pytest.raises(Stop):
        run_sweep(Lorenz(), spec, output=tmp_path / "resumed.nc", on_chunk=stop, **kw)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "2000000000")  # the resume runs later
    _, report = run_sweep(Lorenz(), spec, output=tmp_path / "resumed.nc", **kw)
    assert report.reused == 2
    with xr.open_dataset(tmp_path / "resumed.nc", engine="h5netcdf") as f:
        assert f.attrs["history"] == "2001-09-09T01:46:40Z: difsim.sweep(Lorenz)"
    # As if never interrupted: the same bytes as the uninterrupted run begun at that time.
    assert (tmp_path / "resumed.nc").read_bytes() == (tmp_path / "whole.nc").read_bytes()


@pytest.fixture(scope="module")
def decay_fit():
    """y0 fitted to exact data of k = 0.5 plus fixed noise (gaussian, units "1")."""
    t = np.linspace(0.5, 4.0, 8)
    noise = np.array([0.03, -0.02, 0.01, 0.04, -0.03, 0.0, 0.02, -0.01])
    y = 2.0 * np.exp(-0.5 * t) + noise
    data = xr.Dataset(
        {"y_obs": ("t", y, {"long_name": "counted amount", "comment": "synthetic"})},
        coords={"t": ("t", t, {"long_name": "time since the start"})},
        attrs={"title": "synthetic decay"},
    )
    model = ExponentialDecay(k=0.5)
    fit = ds.fit(model, data, free={"state.y": ds.Identity()}, observe={"y_obs": "y"},
                 rtol=1e-10, atol=1e-10)  # fmt: skip
    return fit, t, y


def test_a_fit_is_cf_and_keeps_the_datas_attributes(decay_fit, tmp_path):
    fit, t, y = decay_fit
    data = _roundtrip(fit.to_xarray(points=21), tmp_path / "fit.nc")
    assert cf_problems(data) == []
    assert data.attrs["history"] == "2026-01-01T00:00:00Z: difsim.fit(ExponentialDecay)"
    assert data.attrs["data_title"] == "synthetic decay" and data.attrs["difsim_output"] == "fit"
    assert data.y_obs.attrs == {"units": "1", "long_name": "counted amount", "comment": "synthetic"}
    # The data's coordinate keeps its attributes; units come from the model's time units.
    assert data.t.attrs["long_name"] == "time since the start" and data.t.attrs["units"] == "s"
    assert data.parameter_units.values.tolist() == ["1"]
    assert "parameter_" not in data.dims
    assert data.correlation.dims == ("parameter", "parameter2")
    # Covariance = correlation · stderr_i · stderr_j, and the values are the fit's.
    se = data.stderr.values
    np.testing.assert_allclose(data.correlation * np.outer(se, se), fit.covariance, rtol=1e-12)
    # Independent reference: y = y0 e^{-kt} is linear in y0, so least squares is closed form.
    basis = np.exp(-0.5 * (t - t[0]))  # the fit starts its solves at the first datum
    y0 = basis @ y / (basis @ basis)
    sigma2 = np.sum((y - y0 * basis) ** 2) / (len(t) - 1)
    np.testing.assert_allclose(data.value, [y0], rtol=1e-8)
    np.testing.assert_allclose(data.stderr, [np.sqrt(sigma2 / (basis @ basis))], rtol=1e-6)
    np.testing.assert_allclose(data.y_obs_residual, y - y0 * basis, atol=1e-8)


def test_the_prediction_band_is_the_linear_models(decay_fit):
    fit, t, y = decay_fit
    data = fit.to_xarray(points=21)
    tc = data.t_curve.values
    basis, dense = np.exp(-0.5 * (t - t[0])), np.exp(-0.5 * (tc - t[0]))
    y0 = basis @ y / (basis @ basis)
    sigma2 = np.sum((y - y0 * basis) ** 2) / (len(t) - 1)
    # Var(prediction) = dense² Var(y0) + sigma²: parameter and noise variance.
    half = 1.959963984540054 * np.sqrt(dense**2 * sigma2 / (basis @ basis) + sigma2)
    np.testing.assert_allclose(data.y_obs_curve, y0 * dense, rtol=1e-8)
    np.testing.assert_allclose(data.y_obs_upper - data.y_obs_curve, half, rtol=1e-6)
    np.testing.assert_allclose(data.y_obs_curve - data.y_obs_lower, half, rtol=1e-6)


def test_a_cli_run_records_its_command_and_config(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "decay.toml").write_text(
        '[model]\nname = "exponential_decay"\n[time]\nt0 = 0.0\nt1 = 1.0\nsave = 5\n'
        '[output]\npath = "decay.nc"\nplot = false\n'
    )
    assert main(["run", "decay.toml"]) == 0
    with xr.open_dataset(tmp_path / "decay.nc", engine="h5netcdf") as f:
        data = f.load()
    assert cf_problems(data) == []
    assert data.attrs["history"] == "2026-01-01T00:00:00Z: difsim run decay.toml"
    assert 'name = "exponential_decay"' in data.attrs["config"]


def test_a_fit_figure_shows_estimates_residuals_and_a_band(decay_fit):
    fit, _, _ = decay_fit
    fig = fit.plot(points=21)
    text = "\n".join(t.get_text() for ax in fig.axes for t in ax.texts)
    value, se = fit.parameters["state.y"], fit.stderr["state.y"]
    assert f"state.y = {value:.4g} ± {se:.2g}" in text  # dimensionless: no units after it
    (main,) = [ax for ax in fig.axes if ax.get_ylabel() == "y_obs [1]"]
    (band,) = main.collections  # the shaded prediction band
    assert band.get_label() == "95 % prediction band"
    np.testing.assert_allclose(band.get_paths()[0].vertices[:, 0].min(), 0.5)  # the data's span
    residuals = [ax for ax in fig.axes if ax.get_ylabel().startswith("data − fit")]
    assert len(residuals) == 1
    labels = [t for ax in fig.axes if ax.axison for t in (ax.get_xlabel(), ax.get_ylabel()) if t]
    assert all(re.search(r"\[[^\]]+\]$", t) for t in labels), labels  # units on every axis


def test_time_is_the_cf_t_axis_of_simulate_and_sweep_outputs(tmp_path):
    # cf_xarray (an independent CF reader) finds `time` as the T axis of each output whose
    # model declares time units: a single run, a saved-series sweep (in memory and on
    # disk) and a Monte Carlo sweep's statistics over time.
    sir = ds.models.SIR()
    kw = dict(t0=0.0, t1=10.0, save=5, rtol=1e-8, atol=1e-8, progress=False)
    spec = ds.GridSweep({"beta": [1.0, 2.0]})
    outputs = {
        "simulate": ds.simulate(sir, t=jnp.linspace(0.0, 10.0, 5)).to_xarray(),
        "sweep": ds.sweep(sir, spec, keep="trajectory", **kw),
        "sweep on disk": run_sweep(sir, spec, output=tmp_path / "s.nc", keep="trajectory", **kw)[
            0
        ].load(),
        "monte carlo": ds.sweep(
            ds.models.StochasticSIR(), spec, samples=4, keep=["I_mean"], dt0=0.1, **kw
        ),  # fmt: skip
    }
    for what, data in outputs.items():
        assert data.cf.axes.get("T") == ["time"], what
        assert data.time.attrs["axis"] == "T" and data.time.attrs["standard_name"] == "time"
        assert data.time.attrs["units"] == "day" and cf_problems(data) == [], what
    # Model time ("1") is no CF time (CF 4.4 needs time units): difsim declares no T axis
    # (cf_xarray still guesses one from the name `time`, which the attributes cannot stop).
    lorenz_time = ds.simulate(Lorenz(), t=jnp.linspace(0.0, 1.0, 3)).to_xarray().time.attrs
    assert lorenz_time["units"] == "1" and not {"axis", "standard_name"} & set(lorenz_time)
