"""Fitting robustness (issue 14, point 9): difsim's trust-region Levenberg–Marquardt
(`TrustRegionLM`, `fit`'s default `"trust_region"`, and `"minpack"`) against scipy's
`least_squares` on classic test problems, the default against the issue's Lotka–Volterra
case, and the float32 warning. The success rates over random starts are the benchmark's
(`experiments/benchmarks/bench_fit_robustness.py`, `docs/benchmarks.md`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
import xarray as xr
from scipy.optimize import least_squares

import difsim as ds
from difsim._fit._fit import prepare_fit
from difsim._fit._lm import TrustRegionLM

# Moré, Garbow & Hillstrom (1981) test problems: residuals and standard starts.
MGH = {
    "rosenbrock": (lambda x: jnp.stack([10 * (x[1] - x[0] ** 2), 1 - x[0]]), [-1.2, 1.0]),
    # A local minimum (cost 24.49) that Levenberg–Marquardt methods find from this start.
    "freudenstein_roth": (
        lambda x: jnp.stack([
            -13 + x[0] + ((5 - x[1]) * x[1] - 2) * x[1],
            -29 + x[0] + ((x[1] + 1) * x[1] - 14) * x[1],
        ]),
        [0.5, -2.0],
    ),  # fmt: skip
    "powell_badly_scaled": (
        lambda x: jnp.stack([1e4 * x[0] * x[1] - 1, jnp.exp(-x[0]) + jnp.exp(-x[1]) - 1.0001]),
        [0.0, 1.0],
    ),
    "brown_badly_scaled": (
        lambda x: jnp.stack([x[0] - 1e6, x[1] - 2e-6, x[0] * x[1] - 2]),
        [1.0, 1.0],
    ),
}
POLICIES = {
    # difsim's policy: (solver, scipy's method with the same rules)
    "trf": (TrustRegionLM(rtol=1e-10, atol=1e-10, factor=1.0, scaled=False, policy="trf"),
            dict(method="trf")),
    "minpack": (TrustRegionLM(rtol=1e-10, atol=1e-10), dict(method="lm", x_scale="jac")),
}  # fmt: skip


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", sorted(MGH))
def test_trust_region_lm_follows_scipy(name, policy):
    residuals, x0 = MGH[name]
    solver, options = POLICIES[policy]
    out = optx.least_squares(lambda y, args: residuals(y), solver, jnp.array(x0),
                             max_steps=500, throw=False)  # fmt: skip
    jac = jax.jit(jax.jacfwd(residuals))
    ref = least_squares(lambda x: np.asarray(residuals(jnp.array(x))), x0,
                        jac=lambda x: np.asarray(jac(jnp.array(x))), xtol=1e-10, ftol=1e-10,
                        gtol=1e-10, **options)  # fmt: skip
    assert out.result == optx.RESULTS.successful
    # The same point (both converge to the same minimum, global or local) ...
    np.testing.assert_allclose(out.value, ref.x, rtol=1e-6, atol=1e-9)
    cost = 0.5 * float(jnp.sum(residuals(out.value) ** 2))
    assert cost == pytest.approx(ref.cost, rel=1e-6, abs=1e-20)
    # ... at the same cost in evaluations: scipy trf's rules are followed step for step
    # (each difsim step is one evaluation, the first one at the start).
    steps = int(out.stats["num_steps"])
    if policy == "trf":
        assert abs(steps - ref.nfev) <= 2, (steps, ref.nfev)
    else:  # the multiplier search differs in detail from MINPACK's lmpar
        assert steps <= 3 * ref.nfev, (steps, ref.nfev)


def test_float32_fit_warns_and_names_the_fix():
    data = xr.Dataset({"y": ("time", np.exp(-np.linspace(0.0, 1.0, 5)))},
                      coords={"time": np.linspace(0.0, 1.0, 5)})  # fmt: skip
    with jax.enable_x64(False):
        model = ds.models.ExponentialDecay(k=0.5)
        with pytest.warns(UserWarning, match=r"fitting ExponentialDecay in float32") as record:
            prepare_fit(model, data, {"k": ds.Positive()})
    text = str(record[0].message)
    assert 'jax.config.update("jax_enable_x64", True)' in text and "float64" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float64: no warning
        prepare_fit(ds.models.ExponentialDecay(k=0.5), data, {"k": ds.Positive()})
