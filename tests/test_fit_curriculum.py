"""A curriculum of growing horizons (`difsim._fit._curriculum`, `[fit] curriculum`): a
spring's frequency from a guess where Adam on the whole horizon stalls in a local minimum
(omega 1.29, measured; R² < 0), recovered stage by stage; the loss of each stage is that of
its own data (closed form cos(omega t)); the stages are recorded in the result, its
netCDF and message; bad curricula are errors naming them."""

import numpy as np
import pytest
import xarray as xr

import difsim as ds

from .config_helpers import config_error

T = np.linspace(0.0, 20.0, 81)
DATA = xr.Dataset({"x": ("time", np.cos(2.0 * T))}, coords={"time": T})
SETTINGS = dict(optimizer="adam", learning_rate=0.02, rtol=1e-8, atol=1e-8, progress=False)


class Spring(ds.Model):
    omega: float = ds.param(1.2, units="1/s")
    state = ds.State(x=1.0, v=0.0)
    time_units = "s"

    def rhs(self, t, s):
        return {"x": s.v, "v": -(self.omega**2) * s.x}


@pytest.fixture(scope="module")
def result():
    return ds.fit(Spring(), DATA, {"omega": "positive"}, steps=801, curriculum=[2.0, 5.0, 10.0],
                  **SETTINGS)  # fmt: skip


def test_curriculum_reaches_the_true_frequency(result):
    assert result.parameters["omega"] == pytest.approx(2.0, abs=1e-5)
    # The stages: 801 // 4 = 200 steps each, the rest in the last (to the data's end, 20).
    np.testing.assert_array_equal(
        result.curriculum, [[0, 2.0], [200, 5.0], [400, 10.0], [600, 20.0]]
    )
    assert "curriculum of 4 stages (horizon 2 from step 0, 5 from step 200" in result.message
    # Step 0 fits the data up to t = 2 only: the closed form at the guess, on those points.
    first = T <= 2.0
    expected = 0.5 * np.sum((np.cos(1.2 * T[first]) - np.cos(2.0 * T[first])) ** 2)
    assert result.loss_history[0] == pytest.approx(expected, rel=1e-6)
    # The result is of the last stage: its loss is on all the data.
    full = 0.5 * np.sum((np.cos(result.parameters["omega"] * T) - np.cos(2.0 * T)) ** 2)
    assert result.loss == pytest.approx(full, rel=1e-3, abs=1e-12)


def test_stages_in_the_outputs(result):
    out = result.to_xarray()
    np.testing.assert_array_equal(out["curriculum_horizon"].values, [2.0, 5.0, 10.0, 20.0])
    np.testing.assert_array_equal(out["curriculum_start_step"].values, [0, 200, 400, 600])
    assert out["curriculum_horizon"].attrs["units"] == "s"
    figure = ds.plot(out)
    loss_ax = next(ax for ax in figure.axes if ax.get_title().startswith("loss history"))
    assert [t.get_text() for t in loss_ax.texts] == [" to 5", " to 10", " to 20"]


@pytest.mark.parametrize(
    "curriculum, settings, message",
    [
        ([2.0, 30.0], {}, "horizon 30 is beyond the data (last time 20)"),
        ([5.0, 2.0], {}, "the horizons must increase, got [5.0, 2.0]"),
        ([-1.0], {}, "horizon -1 is before the first data time"),
        (0, {}, "expected at least 1 stage"),
        ("2", {}, "expected a number of stages"),
        (4, {"steps": 3}, "4 stages need at least as many steps (steps=3)"),
        (2, {"optimizer": "trust_region"}, "curriculum needs an optax optimizer"),
    ],
)
def test_bad_curricula(curriculum, settings, message):
    with pytest.raises(ValueError) as info:
        ds.fit(Spring(), DATA, {"omega": "positive"}, curriculum=curriculum,
               **{**SETTINGS, "steps": 10, **settings})  # fmt: skip
    assert message in str(info.value)


def test_curriculum_count_is_even_horizons():
    from difsim._fit._curriculum import _horizons

    assert _horizons(4, 0.0, T) == [5.0, 10.0, 15.0, 20.0]
    assert _horizons([2.0, 5.0], 0.0, T) == [2.0, 5.0, 20.0]


def fit_config(**fit) -> dict:
    return {
        "model": {"name": "lotka_volterra"},
        "solver": {"dtype": "float64"},
        "fit": {"data": "data/lynx_hare.nc", "free": {"alpha": "positive"},
                "observe": {"hare": "prey", "lynx": "predator"}, **fit},
    }  # fmt: skip


def test_config_key():
    from difsim._config._load import load_config

    spec = load_config(fit_config(optimizer="adam", curriculum=[1850.0, 1900.0])).fit
    assert spec.kwargs()["curriculum"] == [1850.0, 1900.0]
    error = config_error(fit_config(optimizer="adam", curriculum=[1900.0, 1850.0]))
    assert error.key == "fit.curriculum" and "must increase" in str(error)
    error = config_error(fit_config(curriculum=3))
    assert error.key == "fit.curriculum" and "applies to an optax optimizer" in str(error)
    error = config_error(fit_config(optimizer="adam", curriculum=True))
    assert error.key == "fit.curriculum"
