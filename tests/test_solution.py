"""`Solution` and its labelled output: `to_xarray`, batches, netCDF round trips, dtypes."""

from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds

TS = np.linspace(0.0, 2.0, 5)
N = 4


class Cooling(ds.Model):
    """Newton's law of cooling on a rod of N points.

    T_i' = -k (T_i - T_env); a scalar heat counter Q' = k mean(T - T_env).
    """

    k: float = ds.param(0.5, units="1/s", description="cooling rate")
    T_env: float = ds.param(1.0, units="K")
    state = ds.State(
        T=ds.Var(np.linspace(2.0, 5.0, N), units="K", description="temperature", dims=("x",)),
        Q=ds.Var(0.0, units="K"),
    )
    time_units: ClassVar[str] = "s"

    def coords(self):
        return {"x": np.arange(N) * 0.25}

    def rhs(self, t, s):
        excess = s.T - self.T_env
        return dict(T=-self.k * excess, Q=self.k * jnp.mean(excess))


def _exact_T(k, t, T_env=1.0):
    return T_env + np.outer(np.exp(-k * t), np.linspace(2.0, 5.0, N) - T_env)


class Decay(ds.Model):
    # No docstring on purpose: no auto-generated signature may end up as the title.
    k: float = 0.5
    state = ds.State(y=1.0)

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)


TIGHT = dict(rtol=1e-10, atol=1e-10)


@pytest.fixture(scope="module")
def sol():
    return ds.simulate(Cooling(), t=TS, **TIGHT)


# ------------------------------------------------------------------------------ Solution
def test_solution_fields(sol):
    assert sol.names == ("T", "Q") and set(sol.ys) == {"T", "Q"}
    assert sol.ts.shape == (5,) and sol.T.shape == (5, N) and sol.Q.shape == (5,)
    np.testing.assert_allclose(sol.T, _exact_T(0.5, TS), rtol=1e-9)
    # Q = mean(T(0) - T_env) (1 - exp(-k t)).
    np.testing.assert_allclose(sol.Q, 2.5 * (1 - np.exp(-0.5 * TS)), rtol=1e-9, atol=1e-12)
    assert sol.T is sol.ys["T"]
    assert int(sol.status) == 0 and bool(sol.ok) and sol.message() == "solved successfully"
    np.testing.assert_array_equal(sol.final["T"], sol.T[-1])
    assert sol.solver == "Tsit5" and isinstance(sol.model, Cooling)
    with pytest.raises(
        AttributeError,
        match=r"Solution has no attribute 'P'; state variables "
        r"are T, Q",
    ):
        sol.P


def test_status_enum():
    assert int(ds.Status.SUCCESS) == 0 and ds.Status.SUCCESS.ok and ds.Status.EVENT.ok
    assert not ds.Status.MAX_STEPS.ok
    assert all(isinstance(s.message, str) and s.message for s in ds.Status)


# ------------------------------------------------------------------------------ to_xarray
def test_to_xarray_labels_everything(sol):
    data = sol.to_xarray()
    assert isinstance(data, xr.Dataset)
    assert data["T"].dims == ("time", "x") and data["Q"].dims == ("time",)
    np.testing.assert_array_equal(data["time"], TS)
    np.testing.assert_array_equal(data["x"], np.arange(N) * 0.25)
    np.testing.assert_allclose(data["T"], _exact_T(0.5, TS), rtol=1e-9)
    assert data["time"].attrs["units"] == "s"
    assert data["T"].attrs == dict(units="K", long_name="temperature")
    assert data["Q"].attrs == dict(units="K")
    assert int(data["status"]) == 0
    assert data["status"].attrs["flag_values"].tolist() == [int(s) for s in ds.Status]
    assert data["status"].attrs["flag_values"].dtype == data["status"].dtype == np.int32
    assert data["status"].attrs["flag_meanings"].split()[:3] == ["success", "event", "max_steps"]
    assert int(data["num_steps"]) == int(sol.num_steps)
    attrs = data.attrs
    assert attrs["model"] == "Cooling" and attrs["solver"] == "Tsit5"
    assert attrs["title"] == "Newton's law of cooling on a rod of N points."
    assert attrs["k"] == 0.5 and attrs["k_units"] == "1/s" and attrs["T_env_units"] == "K"
    assert attrs["parameters"] == "k T_env" and attrs["status_message"] == "solved successfully"
    assert attrs["difsim_version"]
    xr.testing.assert_identical(ds.to_xarray(sol), data)


def test_to_xarray_arrays_are_the_datasets_own(sol):
    # Writable (masking in place works), and shared with nothing: writing into the Dataset
    # leaves the solution's buffers as they were, and a new Dataset is built from them.
    data = sol.to_xarray()
    for name, var in data.variables.items():
        if name not in data.indexes:
            assert var.values.flags.writeable, name
    data["T"][:] = np.nan
    data["Q"].values[0] = -1.0
    data["status"][...] = int(ds.Status.NONFINITE)
    np.testing.assert_allclose(sol.T, _exact_T(0.5, TS), rtol=1e-9)
    assert float(sol.Q[0]) == 0.0 and int(sol.status) == 0
    np.testing.assert_allclose(sol.to_xarray()["T"], _exact_T(0.5, TS), rtol=1e-9)


def test_no_docstring_no_title():
    data = ds.simulate(Decay(), t=TS).to_xarray()
    assert "title" not in data.attrs and data["y"].dims == ("time",)
    assert data["time"].attrs["units"] == "1"  # no time_units declared: model units


def test_unnamed_axes_get_default_dims():
    class Grid(ds.Model):
        state = ds.State(u=np.ones((2, 3)))

        def rhs(self, t, s):
            return dict(u=-s.u)

    data = ds.simulate(Grid(), t=TS).to_xarray()
    assert data["u"].dims == ("time", "u_dim0", "u_dim1")
    np.testing.assert_allclose(data["u"][:, 1, 2], np.exp(-TS), rtol=1e-5)


@pytest.fixture(scope="module")
def batched():
    """Three rates solved in one vmapped (compiled) solve, for every batched test."""
    ks = np.array([0.2, 0.5, 1.0])
    return ks, jax.vmap(lambda k: ds.simulate(Cooling(k=k), t=TS, **TIGHT))(jnp.asarray(ks))


def test_batched_solution_to_xarray(batched):
    ks, sols = batched
    data = sols.to_xarray(batch_dims=["k"], batch_coords={"k": ks})
    assert data["T"].dims == ("k", "time", "x") and data["status"].dims == ("k",)
    np.testing.assert_array_equal(data["k"], ks)
    assert data["k"].attrs["units"] == "1/s"  # the swept parameter labels its coordinate
    assert data.attrs["T_env"] == 1.0 and data.attrs["T_env_units"] == "K"  # constant: attr
    assert "status_message" not in data.attrs
    for i, k in enumerate(ks):
        np.testing.assert_allclose(data["T"].sel(k=k), _exact_T(k, TS), rtol=1e-9)
    unnamed = sols.to_xarray()
    assert unnamed["T"].dims == ("batch", "time", "x")
    assert unnamed["k"].dims == ("batch",)  # a varying parameter is a data variable
    np.testing.assert_array_equal(unnamed["k"], ks)
    with pytest.raises(ValueError, match=r"solution has 1 batch axes but batch_dims"):
        sols.to_xarray(batch_dims=["a", "b"])


def test_event_end_time_in_dataset():
    class Fall(ds.Model):
        state = ds.State(h=1.0)

        def rhs(self, t, s):
            return dict(h=-1.0 + 0 * s.h)

    sol = ds.simulate(Fall(), t=TS, event=ds.Event(lambda t, s, m: s.h), **TIGHT)
    data = sol.to_xarray()
    np.testing.assert_allclose(float(data["t_end"]), 1.0, rtol=1e-10)
    assert int(data["status"]) == ds.Status.EVENT
    assert np.isnan(data["h"].values[TS > 1.0]).all()


# ------------------------------------------------------------------------------ netCDF
def test_netcdf_round_trip(sol, tmp_path):
    data = sol.to_xarray()
    path = tmp_path / "cooling.nc"
    data.to_netcdf(path, engine="h5netcdf")
    with xr.open_dataset(path, engine="h5netcdf") as back:
        back = back.load()
    xr.testing.assert_allclose(back, data, rtol=0, atol=0)
    for name in ("T", "Q", "status", "time"):
        assert back[name].attrs.keys() == data[name].attrs.keys(), name
    assert back["T"].attrs["units"] == "K" and back["T"].attrs["long_name"] == "temperature"
    assert list(back["status"].attrs["flag_values"]) == [int(s) for s in ds.Status]
    # CF: flag_values of the variable's own type, also in the file (not int64).
    assert back["status"].attrs["flag_values"].dtype == back["status"].dtype == np.int32
    for key in ("model", "solver", "title", "k", "k_units", "parameters", "difsim_version"):
        assert back.attrs[key] == data.attrs[key], key


def test_batched_netcdf_round_trip(batched, tmp_path):
    ks, sols = batched
    data = sols.to_xarray(batch_dims=["k"], batch_coords={"k": ks})
    data.to_netcdf(tmp_path / "sweep.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "sweep.nc", engine="h5netcdf") as back:
        xr.testing.assert_identical(back.load(), data)


# ------------------------------------------------------------------------------ dtype
def test_float32_inputs_give_float32_outputs(tmp_path):
    model = Cooling(
        k=jnp.float32(0.5),
        state=ds.State(
            T=ds.Var(jnp.linspace(2.0, 5.0, N, dtype=jnp.float32), units="K", dims=("x",)),
            Q=jnp.float32(0.0),
        ),
    )
    sol = ds.simulate(model, t=TS, rtol=1e-5, atol=1e-5)  # float64 times follow the state
    assert sol.ts.dtype == jnp.float32
    assert sol.T.dtype == jnp.float32 and sol.Q.dtype == jnp.float32
    np.testing.assert_allclose(sol.T, _exact_T(0.5, TS), rtol=1e-4)
    data = sol.to_xarray()
    assert data["T"].dtype == np.float32 and data["time"].dtype == np.float32
    data.to_netcdf(tmp_path / "f32.nc", engine="h5netcdf")
    with xr.open_dataset(tmp_path / "f32.nc", engine="h5netcdf") as back:
        assert back["T"].dtype == np.float32
    final = ds.simulate(model, t0=0.0, t1=2.0, save="final", rtol=1e-5, atol=1e-5)
    assert final.ts.dtype == jnp.float32 and final.Q.dtype == jnp.float32


def test_batched_save_times_that_differ_are_kept_per_trajectory():
    # A ball dropped from different heights stops at its own time sqrt(2h/g): with
    # save="final" each trajectory's time coordinate must be its own stop time.
    class Fall(ds.Model):
        g: float = 9.81
        state = ds.State(h=1.0, v=0.0)

        def rhs(self, t, s):
            return dict(h=s.v, v=-self.g + 0.0 * s.h)

    heights = jnp.array([1.0, 2.0, 5.0])

    def drop(h0):
        model = Fall().replace(**{"state.h": h0})
        return ds.simulate(
            model, t0=0.0, t1=10.0, save="final", event=lambda t, s, m: s.h, rtol=1e-10, atol=1e-10
        )

    data = jax.vmap(drop)(heights).to_xarray(batch_dims=["h0"], batch_coords={"h0": heights})
    assert data["time"].dims == ("h0", "time")
    np.testing.assert_allclose(
        data["time"][:, 0], np.sqrt(2 * np.asarray(heights) / 9.81), rtol=1e-8
    )


def test_a_failed_solution_keeps_diffrax_outcome_and_words():
    # Several diffrax outcomes share one Status: the solution keeps diffrax's own index, and
    # its message quotes diffrax's text (read from diffrax's table, the independent reference).
    sol = ds.simulate(ds.models.Lorenz(), t0=0.0, t1=10.0, save="final", max_steps=5, throw=False)
    assert int(sol.status) == ds.Status.MAX_STEPS
    assert int(sol.result) == dfx.RESULTS.max_steps_reached._value
    own = dfx.RESULTS._index_to_message[int(sol.result)]
    # The MAX_STEPS text is fitted to the case (an explicit solver here) and counts steps.
    text = sol.message()
    assert text.startswith("the maximum number of steps was reached") and own in text
    assert f"({int(sol.num_accepted_steps)} steps accepted, " in text
    ok = ds.simulate(ds.models.Lorenz(), t0=0.0, t1=0.1, save="final", throw=False)
    assert int(ok.result) == 0 and ok.message() == ds.Status.SUCCESS.message
