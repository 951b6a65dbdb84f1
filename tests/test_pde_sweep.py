"""A sweep over PDE parameters runs through the sweep machinery as any model does."""

import numpy as np

import difsim as ds
from difsim.models import GrayScott


def test_gray_scott_sweep_equals_individual_solves():
    model = GrayScott(grid=ds.Grid.periodic((16, 16), 0.16), square=0.05)
    settings = dict(t0=0.0, t1=40.0, solver="etdrk4", dt0=1.0, controller="constant")
    spec = ds.GridSweep({"F": [0.03, 0.05], "k": [0.06]})
    out = ds.sweep(model, spec, save="final", keep=["v_final", "v_contrast", "v_coverage"],
                   **settings)  # fmt: skip
    assert out["v_final"].dims == ("F", "k", "x", "y")
    np.testing.assert_array_equal(out["x"], model.grid.axis("x"))
    for i, F in enumerate([0.03, 0.05]):
        sol = ds.simulate(model.replace(F=F, k=0.06), save="final", **settings)
        v = np.asarray(sol.ys["v"][-1])
        np.testing.assert_allclose(out["v_final"][i, 0], v, rtol=0, atol=1e-12)
        np.testing.assert_allclose(out["v_contrast"][i, 0], np.std(v), rtol=1e-10)
        np.testing.assert_allclose(out["v_coverage"][i, 0], np.mean(v > 0.1), rtol=1e-12)
    assert np.all(out["status"] == ds.Status.SUCCESS)
    assert float(out["v_contrast"].max()) > 0
