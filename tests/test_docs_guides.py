"""The code of docs/configs.md, daes.md, gpu.md, models.md, pdes.md, sweeps.md and zoo.md runs,
and holds.

The runner and its conventions are in test_docs.py; this file runs in a second process.
"""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from .helpers import central_difference
from .test_docs import run_doc as run_doc, workdir as workdir  # noqa: F401 (fixtures)

HERE = [
    "docs/configs.md",
    "docs/daes.md",
    "docs/gpu.md",
    "docs/models.md",
    "docs/pdes.md",
    "docs/sweeps.md",
    "docs/zoo.md",
]


@pytest.mark.parametrize("name", HERE)
def test_every_python_block_runs(run_doc, name):
    assert "ds" in run_doc(name)  # every runnable doc imports difsim as ds


# --- docs/daes.md --------------------------------------------------------------------------


def test_daes_doc_numbers(run_doc):
    doc = run_doc("docs/daes.md")
    # The consistent initial value of the algebraic variable: z(0) = a x(0)² = 1.5.
    assert abs(float(doc["sol"].ys["z"][0]) - 1.5) < 1e-12
    # The stabilised pendulum (the loop's last, alpha = 10) holds its length to the step
    # errors, as the page's printed figures say.
    assert np.max(doc["drift"]) < 1e-8 and doc["alpha"] == 10.0


# --- docs/configs.md -----------------------------------------------------------------------


def test_configs_run_is_reproduced_from_its_output(run_doc):
    configs = run_doc("docs/configs.md")
    old, again = configs["old"], configs["again"]
    assert old.attrs["config"] == again.attrs["config"]
    np.testing.assert_array_equal(old.x.values, again.x.values)
    # rho = 20 < 24.74: the orbit spirals into the fixed point x = y = ±sqrt(beta (rho - 1)),
    # z = rho - 1 (still 1.4 % away at t = 25).
    final = configs["dataset"].isel(time=-1)
    np.testing.assert_allclose(abs(float(final.x)), np.sqrt(8 / 3 * 19), rtol=0.03)
    np.testing.assert_allclose(float(final.z), 19.0, rtol=0.03)


# --- docs/models.md ------------------------------------------------------------------------


def test_models_doc_hopf_bifurcation(run_doc):
    # Linear stability of (a, b/a) changes at b = 1 + a^2 = 2 (a = 1): no oscillation well
    # below it, a large limit cycle above it.
    models_doc = run_doc("docs/models.md")
    bs, amplitudes = np.asarray(models_doc["bs"]), np.asarray(models_doc["amplitudes"])
    assert np.all(amplitudes[bs <= 1.6] < 1e-2)
    assert np.all(amplitudes[bs >= 2.8] > 1.0)


def test_models_doc_fixed_point(run_doc):
    models_doc = run_doc("docs/models.md")
    ds, Brusselator = models_doc["ds"], models_doc["Brusselator"]
    a, b = 1.0, 1.5
    sol = ds.simulate(Brusselator(a=a, b=b), t0=0.0, t1=100.0, save="final", rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        [float(sol.final["u"]), float(sol.final["v"])], [a, b / a], atol=1e-7
    )


def test_models_doc_gradient(run_doc):
    models_doc = run_doc("docs/models.md")
    fd = central_difference(lambda b: float(models_doc["final_u"](jnp.asarray(b))), 2.5, h=1e-5)
    np.testing.assert_allclose(float(models_doc["du_db"]), fd, rtol=1e-4)


# --- docs/pdes.md --------------------------------------------------------------------------


def test_pdes_gray_scott_grows_from_the_square(run_doc):
    pdes = run_doc("docs/pdes.md")
    v = np.asarray(pdes["sol"].ys["v"])  # (time, x, y)
    assert v.shape == (5, 128, 128)
    assert np.count_nonzero(v[-1] > 0.1) > np.count_nonzero(v[0] > 0.1)  # the spot spreads


def test_pdes_spectral_hook_is_minus_u_ux(run_doc):
    # For u = cos(x/16)(1 + sin(x/16)) on L = 32 pi (modes 1 and 2: no aliasing on 64 points)
    # the hook's spectrum, transformed back, is -u u_x exactly.
    pdes = run_doc("docs/pdes.md")
    ds, model = pdes["ds"], pdes["KS"](grid=pdes["ds"].Grid.periodic(64, 32 * np.pi))
    s = model.initial_state()
    x = np.asarray(model.grid.x)
    u = np.cos(x / 16) * (1 + np.sin(x / 16))
    ux = (-np.sin(x / 16) * (1 + np.sin(x / 16)) + np.cos(x / 16) ** 2) / 16
    got = ds.spectral.irfftn(model.rhs_nonstiff_spectrum(0.0, s, None)["u"], model.grid)
    np.testing.assert_allclose(np.asarray(got), -u * ux, atol=1e-13)
    assert int(pdes["chaos"].status) == ds.Status.SUCCESS


def test_pdes_inverse_problem_recovers_copper(run_doc):
    result = run_doc("docs/pdes.md")["result"]
    D, se = float(result.parameters["D"]), float(result.stderr["D"])
    assert abs(D - 1.11e-4) < 3 * se and se < 0.02 * 1.11e-4


# --- docs/sweeps.md ------------------------------------------------------------------------


def test_sweeps_lorenz_at_rho_zero_decays_exactly(run_doc):
    # At rho = 0 from (1, 0, 0), y and z stay 0 and x = exp(-sigma t).
    out = run_doc("docs/sweeps.md")["out"]
    assert out.x.shape == (100_000,)
    np.testing.assert_allclose(float(out.x[0]), np.exp(-10.0), atol=1e-6)


def test_sweeps_store_is_read_chunk_by_chunk_while_the_sweep_runs(run_doc):
    sweeps = run_doc("docs/sweeps.md")
    assert sweeps["seen"] == [25_000, 50_000, 75_000, 100_000]
    # The file assembled from the store holds what the sweep in memory computes.
    np.testing.assert_allclose(sweeps["live"].x.values, sweeps["out"].x.values, rtol=1e-12)


def test_sweeps_observable_is_the_rate_over_the_drive_frequency(run_doc):
    sweeps = run_doc("docs/sweeps.md")
    locking, omega_d = sweeps["locking"], sweeps["Pendulum"]().omega_d
    np.testing.assert_allclose(locking.rotation, locking["theta_rate"] / omega_d, rtol=1e-12)
    assert float(abs(locking.rotation.sel(F=0.0))) < 1e-12  # undriven, at rest: no rotation


def test_sweeps_ensemble_gradient_matches_finite_differences(run_doc):
    ns = run_doc("docs/sweeps.md")
    model, eps = ns["ds"].models.Lorenz(), 1e-5
    loss = jax.jit(ns["ens_loss"])  # one compile for both (eagerly: one each)
    up, down = loss(model.replace(sigma=10.0 + eps)), loss(model.replace(sigma=10.0 - eps))
    assert ns["ens"].ys["x"].shape == (1000, 1)
    # The snippet solves at the default tolerance (1e-6): finite differences of it agree to
    # ~1e-5 (tests/test_ensemble_grad.py checks 1e-6 at rtol 1e-10).
    np.testing.assert_allclose(ns["ens_grads"].sigma, (up - down) / (2 * eps), rtol=1e-4)


def test_sweeps_documented_signature_is_the_real_one(run_doc):
    sweeps = run_doc("docs/sweeps.md")
    documented = inspect.signature(sweeps["sweep"]).parameters
    real = inspect.signature(sweeps["ds"].sweep).parameters
    assert [(p.name, p.kind, p.default) for p in documented.values()] == [
        (p.name, p.kind, p.default) for p in real.values()
    ]


# --- docs/zoo.md ---------------------------------------------------------------------------


def test_zoo_sir_conserves_the_population(run_doc):
    zoo = run_doc("docs/zoo.md")
    sol, sir = zoo["sol"], zoo["SIR"]()
    total = np.asarray(sol.ys["S"] + sol.ys["I"] + sol.ys["R"])
    np.testing.assert_allclose(total, total[0], rtol=1e-9)
    np.testing.assert_allclose(float(sir.R0), sir.beta / sir.gamma, rtol=1e-15)
    assert round(float(sir.R0), 3) == 3.652


# --- docs/gpu.md ---------------------------------------------------------------------------


def test_gpu_sharded_plate_equals_the_unsharded_one(run_doc):
    gpu = run_doc("docs/gpu.md")
    split, whole = gpu["split"], gpu["whole"]
    assert len(split.ys["u"].addressable_shards) == len(gpu["jax"].devices())
    np.testing.assert_allclose(np.asarray(split.ys["u"]), np.asarray(whole.ys["u"]), atol=1e-13)
    # The slowest mode of the plate decays as exp(-2 D pi^2 t / L^2); Euler's error is O(dt).
    decay = float(whole.ys["u"][-1].max() / whole.ys["u"][0].max())
    np.testing.assert_allclose(decay, np.exp(-2 * 1.11e-4 * np.pi**2 * 2.0 / 0.1**2), rtol=1e-2)
