"""The code of docs/events.md runs, and its numbers hold against closed forms.

The runner and its conventions are in test_docs.py; this file runs in its own process.
"""

import numpy as np
import pytest

from .test_docs import run_doc as run_doc, workdir as workdir  # noqa: F401 (fixtures)

HERE = ["docs/events.md"]
G, H0 = 9.81, 10.0


def landings(n, e=0.8, h0=H0):
    t1 = np.sqrt(2 * h0 / G)
    k = np.arange(n)
    return t1 * (1 + 2 * e * (1 - e**k) / (1 - e))


@pytest.mark.parametrize("name", HERE)
def test_every_python_block_runs(run_doc, name):
    assert "ds" in run_doc(name)


def test_events_doc_numbers(run_doc):
    doc = run_doc("docs/events.md")
    np.testing.assert_allclose(doc["data"]["event_time"].values, landings(4), rtol=1e-9)
    # Zeno: the 21st landing is over the cap of 20 and ends the solve, just before it.
    zeno = doc["zeno"]
    assert doc["ds"].Status(int(zeno.status)).name == "EVENT_LIMIT"
    np.testing.assert_allclose(float(zeno.t_end), landings(21)[-1], rtol=1e-9)
    # Landing-time derivatives: dt_n/dh0 = t_n / (2 h0), dt_n/de = 2 t_1 sum_{k<n} k e^(k-1).
    t1 = np.sqrt(2 * H0 / G)
    np.testing.assert_allclose(np.asarray(doc["d_h0"]), landings(3) / (2 * H0), rtol=1e-7)
    d_e = [2 * t1 * sum(k * 0.8 ** (k - 1) for k in range(1, n)) for n in (1, 2, 3)]
    np.testing.assert_allclose(np.asarray(doc["d_e"]), d_e, rtol=1e-7)
    # The thermostat: the period of its closed form.
    k, t_out, p = 0.1, 5.0, 3.0
    t_inf = t_out + p / k
    period = (np.log((21 - t_out) / (19 - t_out)) + np.log((t_inf - 19) / (t_inf - 21))) / k
    assert doc["switches"][:4] == ["off", "on", "off", "on"]
    np.testing.assert_allclose(float(doc["room"].period()), period)
    # The sweep's peak concentrations: the maximum of the Bateman sums on the saved grid.
    pk = doc["pk"]
    ka, ke, V, D = (float(getattr(pk, n)) for n in ("ka", "ke", "V", "dose"))
    sweep = doc["sweep"]
    assert sweep.attrs["engine"] == "diffrax" and "has events" in sweep.attrs["engine_fallback"]
    grid = np.linspace(0.0, 96.0, 961)
    for tau, c_max in zip([6.0, 8.0, 12.0, 24.0], sweep["c_max"].values):
        dt = grid[:, None] - np.arange(0.0, 96.0 + 1e-9, tau)[None, :]
        c = D * ka / (V * (ka - ke)) * (np.exp(-ke * dt) - np.exp(-ka * dt))
        np.testing.assert_allclose(c_max, np.where(dt >= 0, c, 0).sum(axis=1).max(), rtol=1e-7)
    # Dense output: the interpolant at t = 1 s and just after the first landing.
    dense = doc["sol"]
    np.testing.assert_allclose(float(dense.evaluate(1.0)["h"]), H0 - G / 2, atol=1e-9)
    np.testing.assert_allclose(float(dense.evaluate(t1)["v"]), 0.8 * G * t1, rtol=1e-8)
    assert doc["fine"].sizes["time"] == 5001
