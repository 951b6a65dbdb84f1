"""`_core/_terms.py`: a solve's controller takes its tolerances as arguments of the
compiled program (`traced_tolerances`), so another tolerance reuses the program."""

import jax.monitoring
import numpy as np

import difsim as ds

_COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda name, secs, **kw: _COMPILES.append(name) if "backend_compile" in name else None
)


def test_another_tolerance_reuses_the_compiled_solve_and_is_obeyed():
    model = ds.models.ExponentialDecay(k=1.5)
    exact = np.exp(-1.5 * 4.0)
    errors, steps, compiles = [], [], []
    for tol in (1e-6, 1e-8, 1e-10):
        before = len(_COMPILES)
        sol = ds.simulate(model, t0=0.0, t1=4.0, save="final", rtol=tol, atol=tol)
        compiles.append(len(_COMPILES) - before)
        errors.append(abs(float(sol.final["y"]) - exact) / exact)
        steps.append(int(sol.num_steps))
    assert compiles[0] > 0 and compiles[1:] == [0, 0]
    assert steps[0] < steps[1] < steps[2]
    for tol, err in zip((1e-6, 1e-8, 1e-10), errors):
        assert err < 100 * tol
    assert errors[2] < errors[1] < errors[0]
