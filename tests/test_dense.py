"""Dense output (`save="dense"`): the solver's interpolant against closed forms, its
observed order per method, under `vmap` and `grad`, and the errors for what it cannot do.
(Across event restarts: the bouncing ball of docs/events.md, checked in
test_docs_events.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds

OSC = ds.models.HarmonicOscillator(zeta=0.0, omega=1.0)  # x = cos(omega t), v = -omega sin
T = 4.0


def _fixed_step_errors(solver: str, hs) -> tuple[np.ndarray, np.ndarray]:
    """Max errors of the interpolant at step midpoints and at step ends, fixed steps `hs`
    (one compile per solver: the step is a traced value)."""
    mids, ends = [], []
    for h in hs:
        sol = ds.simulate(
            OSC, t0=0.0, t1=T, save="dense", solver=solver, controller="constant", dt0=h,
            rtol=1e-13, atol=1e-13, max_steps=128,
        )  # fmt: skip
        n = int(round(T / h))
        # Repeated up to one length: one compiled evaluation for every step size.
        mid, end = (np.resize((np.arange(n) + s) * h, 80) for s in (0.5, 1.0))
        mids.append(np.max(np.abs(np.asarray(sol.evaluate(mid)["x"]) - np.cos(mid))))
        ends.append(np.max(np.abs(np.asarray(sol.evaluate(end)["x"]) - np.cos(end))))
    return np.asarray(mids), np.asarray(ends)


# Observed order of the interpolant's error between steps (a local error O(h^(q+1)) of a
# continuous extension of order q on top of the global error O(h^p) of the steps):
# Tsit5 and Dopri5 carry 4th-order extensions (error ~h^5, that of their 5th-order steps);
# Kvaerno5 interpolates with a cubic Hermite polynomial (error ~h^4); Dopri8's 7th-order
# extension gives ~h^7 below its 8th-order steps; Bosh3's cubic Hermite polynomial ~h^4,
# hidden under its 3rd-order steps. (The table in docs/events.md.)
@pytest.mark.parametrize(
    "solver, order, step_order, hs",
    [
        ("tsit5", 5, 5, [0.4, 0.2, 0.1, 0.05]),
        ("dopri5", 5, 5, [0.4, 0.2, 0.1, 0.05]),
        ("kvaerno5", 4, 5, [0.4, 0.2, 0.1, 0.05]),
        ("dopri8", 7, 8, [0.8, 0.4, 0.2, 0.1]),  # at 0.05 its steps are at rounding
        ("bosh3", 3, 3, [0.4, 0.2, 0.1, 0.05]),
    ],
)
def test_interpolant_order_per_method(solver, order, step_order, hs):
    hs = np.asarray(hs)
    mids, ends = _fixed_step_errors(solver, hs)
    slope = np.polyfit(np.log(hs), np.log(mids), 1)[0]
    assert abs(slope - order) < 0.3, (solver, slope, mids)
    # The steps themselves, above the rounding floor of float64 (~1e-15 here): at least
    # their order (Dopri8's errors at these steps still fall faster, like h^8.9).
    above = ends > 1e-14
    end_slope = np.polyfit(np.log(hs[above]), np.log(ends[above]), 1)[0]
    assert np.sum(above) >= 3 and end_slope > step_order - 0.4, (solver, end_slope)
    assert solver == "dopri8" or end_slope < step_order + 0.4, (solver, end_slope)


def test_evaluate_on_a_vmapped_solution_and_through_grad():
    omegas = jnp.array([0.5, 1.0, 2.0])
    t = np.array([0.3, 1.7, 3.9])

    def solve(w):
        return ds.simulate(OSC.replace(omega=w), t0=0.0, t1=T, save="dense", rtol=1e-10,
                           atol=1e-10)  # fmt: skip

    sols = jax.vmap(solve)(omegas)
    x = np.asarray(sols.evaluate(t)["x"])
    assert x.shape == (3, 3)
    np.testing.assert_allclose(x, np.cos(np.outer(omegas, t)), atol=1e-8)
    # Outside [t0, t1]: eagerly an error, traced (jit) NaN on every row, never a number.
    with pytest.raises(ValueError, match=r"t = 4.5 lies outside the solved span"):
        sols.evaluate(4.5)
    outside = jax.jit(lambda s, t: s.evaluate(t)["x"])(sols, jnp.array([-0.5, 1.0, T + 0.5]))
    assert np.all(np.isnan(np.asarray(outside)[:, [0, 2]]))
    np.testing.assert_allclose(np.asarray(outside)[:, 1], np.cos(omegas), atol=1e-8)
    # d/d omega of x(t) = cos(omega t) is -t sin(omega t), through the interpolant.
    # (Jitted whole: a derivative taken outside jit compiles the solve's forward and backward
    # halves as separate programs.)
    dx = jax.jit(jax.grad(lambda w: solve(w).evaluate(1.7)["x"]))(1.0)
    np.testing.assert_allclose(float(dx), -1.7 * np.sin(1.7), rtol=1e-6)


def test_dense_errors_are_clear():
    sol = ds.simulate(OSC, t0=0.0, t1=1.0, save="dense")
    with pytest.raises(ValueError, match=r"t = 1.5 lies outside the solved span \[t0, t1\]"):
        sol.evaluate(1.5)
    # Without an interpolant: refused by what the solution holds, not by its values (a
    # traced solve, not compiled).
    plain = jax.eval_shape(lambda: ds.simulate(OSC, t0=0.0, t1=1.0, save="final"))
    with pytest.raises(ValueError, match='simulate with save="dense"'):
        plain.evaluate(0.5)
    with pytest.raises(ValueError, match='samples the interpolant: simulate with save="dense"'):
        plain.to_xarray(times=[0.5])
    with pytest.raises(ValueError, match="give either t .* or t0/t1/save, not t and save"):
        ds.simulate(OSC, t=[0.0, 1.0], save="dense")
    with pytest.raises(ValueError, match="save='dense' keeps the solver's interpolant"):
        ds.sweep(OSC, ds.GridSweep({"omega": [1.0, 2.0]}), t0=0.0, t1=1.0, save="dense")
    with pytest.raises(ValueError, match="save='dense' keeps the solver's interpolant"):
        ds.simulate_ensemble(OSC, {"omega": [1.0, 2.0]}, t0=0.0, t1=1.0, save="dense")


class _ProtheroRobinson(ds.Model):
    """x' = -lam (x - cos t) - sin t: stiff for large `lam`, with x = cos t exactly."""

    lam: float = 1e3
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=-self.lam * (s.x - jnp.cos(t)) - jnp.sin(t))


# Their root finders take the step-size controller's tolerances, which diffrax fills in
# inside its solve: reading the dense info's shapes outside it divided by the placeholder
# (a TypeError for every named implicit solver with save="dense").
@pytest.mark.parametrize("solver", ["implicit_euler", "kvaerno3", "kvaerno4", "kvaerno5"])
def test_dense_output_of_implicit_solvers(solver):
    sol = ds.simulate(
        _ProtheroRobinson(), t0=0.0, t1=2.0, save="dense", solver=solver, rtol=1e-8, atol=1e-8
    )
    assert int(sol.status) == int(ds.Status.SUCCESS)
    t = np.linspace(0.0, 2.0, 201)
    err = np.max(np.abs(np.asarray(sol.evaluate(t)["x"]) - np.cos(t)))
    # Between its steps the interpolant is within a small multiple of the tolerance of the
    # true solution (measured: 1e-8 for kvaerno3 to 3.7e-7 for kvaerno4).
    assert err < 1e-6, (solver, err)
