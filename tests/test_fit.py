"""`fit` on Lotka–Volterra: gradients, recovery, optimizers, multistart, multiple shooting,
checkpoints.

Data come from scipy's `solve_ivp` (DOP853 at 1e-12): an independent reference, never from
difsim itself. All fits share one problem shape (9 times, 2 observed variables), so the
compiled loss, Jacobian and optimizer blocks are reused from test to test.
"""

import dataclasses
import json
import re
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
import xarray as xr

import difsim as ds
from difsim._app._run import execute
from difsim._config._load import load_config
from difsim._fit._drivers import value_and_grad
from difsim._fit._fit import fit
from difsim._fit._transforms import Positive
from tests.helpers import scipy_reference

TRUE = ds.models.LotkaVolterra()
TRUTH = dict(alpha=0.55, beta=0.028, gamma=0.80, delta=0.024, **{"state.prey": 30.0})
T = np.linspace(0.0, 8.0, 9)
TOL = dict(rtol=1e-10, atol=1e-10)
OBS = {"hare": "prey", "lynx": "predator"}
# Every fit here uses the same options, so that compiled code is shared between tests.
KW = dict(observe=OBS, noise="lognormal", **TOL)
FREE = {name: Positive() for name in TRUTH}
# A start 30 % away from the truth in every free variable.
FACTORS = dict(alpha=1.3, beta=0.7, gamma=1.3, delta=0.7, **{"state.prey": 1.3})
START = TRUE.replace(**{k: TRUTH[k] * FACTORS[k] for k in TRUTH})


def lv_solution(p, t, y0=(30.0, 4.0)):
    a, b, g, d = p["alpha"], p["beta"], p["gamma"], p["delta"]

    def rhs(_, y):
        return [(a - b * y[1]) * y[0], (-g + d * y[0]) * y[1]]

    return scipy_reference(rhs, (t[0], t[-1]), y0, t)


def lv_data(t=T, noise=0.0, seed=0):
    y = lv_solution(TRUTH, t)
    if noise:
        y = y * np.exp(noise * np.random.default_rng(seed).standard_normal(y.shape))
    return xr.Dataset({"hare": ("time", y[:, 0]), "lynx": ("time", y[:, 1])}, coords={"time": t})


def rel_err(fitted, truth=TRUTH):
    return {k: abs(fitted[k] / truth[k] - 1) for k in truth}


@eqx.filter_jit
def _value_and_grad(problem, u, adjoint):
    return value_and_grad(problem, u, adjoint)


@pytest.mark.parametrize("adjoint", ["checkpoint", "forward"])
def test_loss_and_gradient_against_references(adjoint):
    data = lv_data()
    res = fit(START, data, FREE, adjoint=adjoint, steps=0, **KW)
    problem, u = res.problem, jnp.asarray(res.u)
    loss, grad = _value_and_grad(problem, u, adjoint)
    # The loss: ½ Σ (log model - log data)², the model solved by scipy at the start values.
    start = {k: TRUTH[k] * FACTORS[k] for k in TRUTH}
    y = lv_solution(start, T, (start["state.prey"], 4.0))
    expected = 0.5 * np.sum((np.log(y) - np.log(np.column_stack([data.hare, data.lynx]))) ** 2)
    assert float(loss) == pytest.approx(expected, rel=1e-8)
    # The gradient (w.r.t. the unconstrained log-values): central finite differences.
    h = 1e-5

    def loss_at(v):
        return float(_value_and_grad(problem, v, adjoint)[0])  # reuses the compiled code

    for i in range(u.shape[0]):
        e = jnp.zeros_like(u).at[i].set(h)
        fd = (loss_at(u + e) - loss_at(u - e)) / (2 * h)
        assert float(grad[i]) == pytest.approx(fd, rel=1e-6), (adjoint, res.names[i])


def test_recovers_noise_free_parameters_levenberg_marquardt():
    res = fit(START, lv_data(), FREE, **KW)
    assert res.status is ds.Status.CONVERGED, res.message
    assert max(rel_err(res.parameters).values()) <= 1e-4
    assert res.loss < 1e-14
    assert isinstance(res.model, ds.models.LotkaVolterra)
    assert float(res.model.alpha) == res.parameters["alpha"]
    assert float(res.model.state["prey"]) == res.parameters["state.prey"]
    assert float(res.model.state["predator"]) == 4.0  # fixed: not free
    assert res.num_steps == len(res.loss_history) < 50


ADAM = dict(adjoint="forward", **KW)  # forward mode: the cheaper compile for 5 parameters


@pytest.fixture(scope="module")
def noisy_lm():
    return fit(START, lv_data(noise=0.05), FREE, **KW)


def test_optax_and_optimistix_reach_the_same_optimum(noisy_lm):
    data = lv_data(noise=0.05)
    assert noisy_lm.status is ds.Status.CONVERGED
    reference = noisy_lm.parameters
    # Reverse mode: with forward-mode gradients BFGS can stall at the optimum on some CPUs
    # (its line search rejects every trial step once the loss is flat to rounding, which
    # ends the fit as diverged; see the DIVERGED message), a known limitation.
    bfgs = fit(START, data, FREE, optimizer="bfgs", **KW)
    assert bfgs.status is ds.Status.CONVERGED, bfgs.message
    assert max(rel_err(bfgs.parameters, reference).values()) < 1e-6
    adam = fit(START, data, FREE, optimizer="adam", learning_rate=0.05, steps=700, **ADAM)
    assert adam.status is ds.Status.COMPLETED
    assert max(rel_err(adam.parameters, reference).values()) < 1e-5
    assert adam.loss == pytest.approx(noisy_lm.loss, rel=1e-8)
    # Gradient descent took the loss down from the start to the optimum.
    assert adam.loss_history[0] > 100 * adam.loss_history[-1]


def test_noisy_fits_cover_the_truth_within_standard_errors():
    """Over several seeded noise draws, the Gauss–Newton standard errors are calibrated:
    the fitted values lie within 2 standard errors about as often as they should (95 %)."""
    z = []
    for seed in range(6):
        res = fit(START, lv_data(noise=0.05, seed=seed), FREE, **KW)
        assert res.status is ds.Status.CONVERGED
        z += [(res.parameters[k] - TRUTH[k]) / res.stderr[k] for k in TRUTH]
    z = np.abs(np.array(z))
    assert np.all(np.isfinite(z))
    assert np.mean(z < 2.0) >= 0.8, z
    assert np.all(z < 3.5), z


def test_multistart_keeps_the_best_and_reports_all(noisy_lm):
    data = lv_data(noise=0.05)
    res = fit(START, data, FREE, multistart=(4, jax.random.key(1)), **KW)
    assert res.start_losses.shape == (4,)
    assert res.best_start == int(np.nanargmin(res.start_losses))
    assert res.loss == np.nanmin(res.start_losses)
    # Start 0 is the unperturbed guess: it lands where the single fit does.
    for k in TRUTH:
        assert res.start_parameters[k].shape == (4,)
        assert res.start_parameters[k][0] == pytest.approx(noisy_lm.parameters[k], rel=1e-7)
    assert res.loss <= noisy_lm.loss * (1 + 1e-9)
    # The other starts really were different.
    assert np.ptp(res.start_parameters["alpha"]) > 0 or np.ptp(res.start_losses) > 0


def test_multiple_shooting_recovers_a_longer_series():
    t = np.linspace(0.0, 16.0, 17)
    data = lv_data(t)
    res = fit(START, data, FREE, multiple_shooting=4, **KW)
    assert res.status is ds.Status.CONVERGED, res.message
    assert max(rel_err(res.parameters).values()) <= 1e-4
    # The segment initial states (extra free variables) sit on the true trajectory.
    problem = res.problem
    extra = np.asarray(problem.natural(jnp.asarray(res.u)))[len(FREE) :].reshape(3, 2)
    true_traj = lv_solution(TRUTH, t)
    bounds = np.round(np.linspace(0, 16, 5)).astype(int)[1:-1]
    np.testing.assert_allclose(extra, true_traj[bounds], rtol=1e-4)
    assert problem.extra_names[:2] == ("segment1.prey", "segment1.predator")


def test_checkpoint_resume_equals_uninterrupted(tmp_path, caplog, monkeypatch):
    data = lv_data(noise=0.05)
    kw = dict(optimizer="adam", learning_rate=0.05, **ADAM)
    path = tmp_path / "fit.ckpt"
    first = fit(START, data, FREE, steps=60, checkpoint=path, **kw)
    assert path.exists() and first.num_steps == 60
    monkeypatch.setenv("DIFSIM_PROGRESS_INTERVAL", "0")  # a progress line per block
    with caplog.at_level("INFO", logger="difsim.progress"):
        resumed = fit(START, data, FREE, steps=130, checkpoint=path, progress=True, **kw)
    # The display resumed at step 60: its first line is after the next block (110 steps).
    lines = [r.getMessage() for r in caplog.records if r.name == "difsim.progress"]
    assert lines[0].startswith("fit (adam): 110 of 130 steps (85%), loss ")
    assert lines[-1].startswith("fit (adam): done, 130 of 130 steps in ")
    straight = fit(START, data, FREE, steps=130, **kw)
    assert resumed.num_steps == straight.num_steps == 130
    np.testing.assert_array_equal(resumed.loss_history, straight.loss_history)
    for k in TRUTH:
        assert resumed.parameters[k] == straight.parameters[k]
    # A finished checkpoint returns at once, and a different fit refuses it.
    again = fit(START, data, FREE, steps=130, checkpoint=path, **kw)
    assert again.parameters == resumed.parameters
    with pytest.raises(ValueError, match="belongs to a different fit"):
        fit(START, data, {"alpha": Positive()}, steps=10, checkpoint=path, **kw)
    # One bit flipped at 30 % or 50 % of this real checkpoint: refused naming the file
    # (both were resumed from before it had a checksum).
    intact = path.read_bytes()
    for where in (0.3, 0.5):
        damaged = bytearray(intact)
        damaged[int(where * len(damaged))] ^= 0x01
        path.write_bytes(bytes(damaged))
        with pytest.raises(ValueError, match=re.escape(f"checkpoint '{path}' is corrupt")):
            fit(START, data, FREE, steps=130, checkpoint=path, **kw)
    path.write_bytes(intact)
    assert fit(START, data, FREE, steps=130, checkpoint=path, **kw).parameters == again.parameters
    # The same settings over edited data, another fixed value of the model (its predators'
    # start) or another model class: another fit, never resumed from (it used to be).
    edited = data.copy(deep=True)
    edited["hare"][3] = edited["hare"][3] * 1.01
    other = START.replace(**{"state.predator": 4.5})

    class Renamed(type(START)):
        pass

    renamed = Renamed(**{f.name: getattr(START, f.name) for f in dataclasses.fields(START)})
    for model, observed in ((START, edited), (other, data), (renamed, data)):
        with pytest.raises(ValueError, match="the data, the model's parameters or initial"):
            fit(model, observed, FREE, steps=130, checkpoint=path, **kw)
    assert path.read_bytes() == intact


def test_result_outputs(noisy_lm, tmp_path):
    text = noisy_lm.summary()
    for k in TRUTH:
        assert k in text
    assert "converged" in text
    dataset = noisy_lm.to_xarray()
    np.testing.assert_allclose(dataset["value"].sel(parameter="beta"), noisy_lm.parameters["beta"])
    # The file holds the correlation (dimensionless); covariance = corr_ij · se_i · se_j.
    se = dataset["stderr"].values
    np.testing.assert_allclose(np.diag(dataset["correlation"].values), 1.0, rtol=1e-12)
    np.testing.assert_allclose(
        dataset["correlation"].values * np.outer(se, se), noisy_lm.covariance, rtol=1e-12
    )
    assert dataset["hare_fit"].dims == ("time",)
    nc = noisy_lm.save(tmp_path / "fit.nc")
    with xr.open_dataset(nc) as back:
        np.testing.assert_array_equal(back["value"].values, dataset["value"].values)
    js = noisy_lm.save(tmp_path / "fit.json")
    assert '"state.prey"' in js.read_text()
    # An earlier fit output is replaced only with overwrite=True; other files never.
    with pytest.raises(ValueError, match="earlier difsim fit output"):
        noisy_lm.save(nc)
    assert noisy_lm.save(js, overwrite=True) == js
    (notes := tmp_path / "notes.json").write_text("{}")
    with pytest.raises(ValueError, match="not a difsim fit summary output"):
        noisy_lm.save(notes, overwrite=True)
    assert notes.read_text() == "{}"
    noisy_lm.plot(tmp_path / "fit.png")
    assert (tmp_path / "fit.png").stat().st_size > 1000


LYNX = Path(__file__).resolve().parents[1] / "data" / "lynx_hare.nc"
RATES = ("alpha", "beta", "gamma", "delta")
NONFINITE_INPUT = optx.RESULTS._index_to_message[int(optx.RESULTS.nonfinite_input._value)]


def test_failed_gauss_newton_on_lynx_hare_returns_a_failed_result(tmp_path):
    # Gauss–Newton has no trust region, and Identity no bounds: from alpha = 0.3 it steps
    # to rates whose solve blows up, and optimistix reports a non-finite linear solve.
    # This used to raise AttributeError (an optimistix message looked up in a list).
    res = fit(
        TRUE.replace(alpha=0.3),
        str(LYNX),
        {name: ds.Identity() for name in RATES},
        observe=OBS,
        optimizer="gauss_newton",
        steps=50,
        solver="tsit5",  # what the config below resolves to: the compiled fit is shared
    )
    assert res.status is ds.Status.OPTIMIZER_FAILED and res.status.text == "failed"
    assert not res.ok
    assert "the optimizer failed" in res.message and NONFINITE_INPUT in res.message
    # The best parameters found so far are kept: the lowest finite loss of the history.
    assert np.isfinite(res.loss) and res.loss == np.nanmin(res.loss_history)
    assert np.isnan(res.loss_history[-1]) and res.num_steps == len(res.loss_history)
    # Outputs keep the status text they always had.
    assert json.loads(res.save(tmp_path / "fit.json").read_text())["status"] == "failed"
    assert res.to_xarray().attrs["status"] == "failed"
    assert "(gauss_newton): failed" in res.summary()


def test_config_fit_reports_the_fits_own_status():
    config = {
        "model": {"name": "lotka_volterra", "parameters": {"alpha": 0.3}},
        "fit": {
            "data": str(LYNX),
            "optimizer": "gauss_newton",
            "steps": 50,
            "free": {name: "identity" for name in RATES},
            "observe": OBS,
        },
    }
    result = execute(load_config(config), plot=False)
    assert result.status is ds.Status.OPTIMIZER_FAILED and result.status is result.fit.status
    assert result.dataset.attrs["status"] == "failed"
    with pytest.raises(RuntimeError, match="ended failed: the optimizer failed"):
        ds.run_config(config, plot=False)


def test_an_unfinished_fit_has_the_step_budget_status():
    data = lv_data()
    lm = fit(START, data, FREE, steps=0, **KW)
    assert lm.status is ds.Status.FIT_MAX_STEPS and lm.status.text == "max_steps" and not lm.ok
    assert lm.to_dict()["status"] == "max_steps"
    adam = fit(START, data, FREE, steps=0, optimizer="adam", **ADAM)
    assert adam.status is ds.Status.COMPLETED and adam.status.text == "completed" and adam.ok


def test_a_checkpoint_of_an_older_format_is_refused(tmp_path):
    path = tmp_path / "old.ckpt"
    path.write_bytes(b"DIFSIM-FIT-CHECKPOINT 1\n{}\n")
    with pytest.raises(ValueError, match="written by an older difsim .*; delete it"):
        fit(START, lv_data(), FREE, steps=10, checkpoint=path, **KW)
