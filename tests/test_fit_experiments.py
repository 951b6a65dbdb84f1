"""Fits to several experiments (`difsim._fit._experiments`): each from its own initial
value and control, against scipy's least squares on the closed form; minibatches against
the experiments' own losses; validation picking the result and stopping early; outputs
over (experiment, time); errors.

Data are the closed form u0 exp(-k c t) of exponential decay, never difsim's own solves.
"""

import numpy as np
import pytest
import scipy.optimize as so
import xarray as xr

import difsim as ds
from difsim._fit._fit import prepare_fit

E, K = 12, 0.8
T = np.linspace(0.0, 2.0, 9)
RNG = np.random.default_rng(1)
U0, C = RNG.uniform(0.5, 2.0, E), RNG.uniform(0.5, 1.5, E)
NOISE = 0.01 * RNG.standard_normal((E, T.size))
TOL = dict(rtol=1e-10, atol=1e-10, progress=False)


class Decay(ds.Model):
    k: float = 0.3
    c: float = 1.0  # each experiment's own rate multiplier (a control)
    state = ds.State(u=1.0)

    def rhs(self, t, s):
        return {"u": -self.k * self.c * s.u}


def closed_form(k, u0=U0, c=C):
    return u0[:, None] * np.exp(-k * c[:, None] * T[None, :])


def experiments(k=K, noise=NOISE, u0=U0, c=C):
    labels = [f"run{i}" for i in range(len(u0))]
    return xr.Dataset(
        {"u": (("experiment", "time"), closed_form(k, u0, c) + noise),
         "state.u": ("experiment", u0), "c": ("experiment", c)},
        coords={"time": T, "experiment": labels},
    )  # fmt: skip


def test_shared_rate_matches_scipy_least_squares():
    data = experiments()
    result = ds.fit(Decay(), data, ["k"], **TOL)
    y = data["u"].values
    ref = so.least_squares(lambda p: (closed_form(p[0]) - y).ravel(), [0.3], xtol=1e-15,
                           ftol=1e-15, gtol=1e-15)  # fmt: skip
    dof = y.size - 1
    cov = np.sum(ref.fun**2) / dof * np.linalg.inv(ref.jac.T @ ref.jac)
    assert result.status is ds.Status.CONVERGED
    assert result.parameters["k"] == pytest.approx(ref.x[0], rel=1e-8)
    assert result.stderr["k"] == pytest.approx(np.sqrt(cov[0, 0]), rel=1e-5)
    # The outputs over (experiment, time): test_validation_picks_the_result_and_stops_early.


def test_minibatch_is_the_scaled_sum_of_its_experiments():
    setup = prepare_fit(Decay(), experiments(), ["k"], optimizer="adam", batch_size=3, seed=5,
                        **{k: v for k, v in TOL.items() if k != "progress"})  # fmt: skip
    problem, u = setup.problem, setup.u0
    # Each experiment's own loss at the start k = 0.3, from the closed form.
    alone = 0.5 * np.sum((closed_form(0.3) - experiments()["u"].values) ** 2, axis=1)
    assert float(problem.full().loss(u)) == pytest.approx(alone.sum(), rel=1e-8)
    for step in (0, 1, 7):
        batch = problem.at_step(step)
        values = np.asarray(batch.data.values)  # which experiments: match their data rows
        rows = [int(np.argmin(np.abs(np.asarray(problem.data.values) - v).sum((1, 2))))
                for v in values]  # fmt: skip
        assert len(set(rows)) == 3  # without replacement
        expected = E / 3 * sum(alone[i] for i in rows)
        assert float(batch.loss(u)) == pytest.approx(expected, rel=1e-8)
        again = np.asarray(problem.at_step(step).data.values)
        np.testing.assert_array_equal(again, values)  # the step's own key: reproducible


def test_validation_picks_the_result_and_stops_early():
    # Training experiments decay at k = 0.8, the held-out two at k = 0.3 (the start): every
    # step towards the training optimum worsens the validation loss.
    data = experiments()
    data["u"][-2:] = closed_form(0.3)[-2:]
    result = ds.fit(Decay(), data, ["k"], optimizer="adam", learning_rate=0.01, steps=1000,
                    validation=["run10", "run11"], patience=2, **TOL)  # fmt: skip
    history = result.monitor_history
    assert result.status is ds.Status.COMPLETED and result.num_steps == 150  # 3 blocks of 50
    assert history.shape == (3, 2) and np.all(np.diff(history[:, 1]) > 0)
    assert "stopped early: no lower validation loss in 2 evaluations" in result.message
    assert "after 50 steps" in result.message
    assert 0.3 < result.parameters["k"] < 0.8
    out = result.to_xarray()
    np.testing.assert_array_equal(out["validation_loss"].values, history[:, 1])
    # Held out: not trained on, nor in the outputs over (experiment, time).
    assert list(out["experiment"].values) == [f"run{i}" for i in range(10)]
    assert out["u_fit"].dims == ("experiment", "time") and out["u_curve"].dims[0] == "experiment"
    fit = closed_form(result.parameters["k"])[:10]
    np.testing.assert_allclose(out["u_fit"].values, fit, rtol=1e-8)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(batch_size=4), "batch_size needs an optax optimizer"),
        (dict(optimizer="adam", batch_size=12), "is not below the 12 training experiments"),
        (dict(validation=["run99"]), "validation names 'run99', which is not an experiment"),
        (dict(validation=1.5), r"validation must be a fraction in \(0, 1\)"),
        (dict(patience=3), "patience stops on the validation loss"),
        (dict(multistart=4), "multistart do not apply"),
    ],
)
def test_bad_experiment_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ds.fit(Decay(), experiments(), ["k"], **kwargs, **TOL)


def test_experiment_values_must_name_what_they_set():
    data = experiments().rename({"c": "gain"})
    with pytest.raises(ValueError, match="'gain' over 'experiment' alone is neither a parameter"):
        ds.fit(Decay(), data, ["k"], **TOL)
    single = xr.Dataset({"u": ("time", closed_form(K)[0])}, coords={"time": T})
    with pytest.raises(ValueError, match="apply to data of several experiments"):
        ds.fit(Decay(), single, ["k"], optimizer="adam", batch_size=2, **TOL)


def test_config_fits_experiments(tmp_path):
    experiments().to_netcdf(tmp_path / "runs.nc")
    (tmp_path / "decay.py").write_text(
        "import difsim as ds\n\n\nclass Decay(ds.Model):\n    k: float = 0.3\n"
        "    c: float = 1.0\n    state = ds.State(u=1.0)\n\n    def rhs(self, t, s):\n"
        "        return {'u': -self.k * self.c * s.u}\n"
    )
    config = {
        "model": {"name": str(tmp_path / "decay.py") + ":Decay"},
        "solver": {"rtol": 1e-8, "atol": 1e-8, "dtype": "float64"},
        "fit": {"data": str(tmp_path / "runs.nc"), "free": {"k": "positive"},
                "validation": ["run10", "run11"]},
        "output": {"path": str(tmp_path / "fit.nc"), "plot": False},  # no figure: its time
    }  # fmt: skip
    out = ds.run_config(config)  # the trust region converges within the first block
    assert out.attrs["status"] == "converged" and out["u_fit"].dims == ("experiment", "time")
    assert out["validation_loss"].shape == (1,) and out.sizes["experiment"] == 10
    assert abs(float(out["value"].sel(parameter="k")) - K) < 5e-3  # noise 0.01
    assert (tmp_path / "fit.nc").is_file() and not (tmp_path / "fit.png").exists()
