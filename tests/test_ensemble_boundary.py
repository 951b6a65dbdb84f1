"""Stage boundaries (`difsim._ensemble._boundary`): they change where a step's values are
computed, never what they are, and they reach the compiled step loop."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._ensemble import _field, simulate_ensemble
from difsim._ensemble._boundary import computed_once, stored

RHO = jnp.linspace(0.0, 21.0, 24)


def _lorenz(solver: str, save):
    return simulate_ensemble(
        ds.models.Lorenz(), {"rho": RHO}, t0=0.0, t1=1.0, save=save, solver=solver,
        rtol=1e-8, atol=1e-8,
    )  # fmt: skip


def test_computed_once_gives_the_function_or_zeros():
    x = {"a": jnp.arange(3.0), "b": jnp.ones((2, 2))}
    fn = lambda v: {"a": v["a"] ** 2, "b": 2 * v["b"]}  # noqa: E731
    on = jax.jit(lambda v, live: computed_once(live, fn, v, like=fn(v)))
    assert np.array_equal(on(x, True)["a"], [0.0, 1.0, 4.0])
    assert np.array_equal(on(x, True)["b"], np.full((2, 2), 2.0))
    assert all(not np.any(v) for v in jax.tree.leaves(on(x, False)))  # the unused branch
    assert np.array_equal(computed_once(None, fn, x, like=x)["a"], [0.0, 1.0, 4.0])
    assert stored(None, x) is x


@pytest.mark.parametrize("solver, save", [("tsit5", "final"), ("dopri5", 5)])
def test_boundaries_change_no_number(monkeypatch, solver, save):
    # The same solve without boundaries (what other backends compile): every value, step
    # count and status agrees to rounding (XLA may contract a multiply-add differently
    # when a kernel ends at another place).
    sol = _lorenz(solver, save)
    jax.clear_caches()
    monkeypatch.setattr(_field, "any_stepping", lambda active: None)
    plain = _lorenz(solver, save)
    for name in sol.ys:
        np.testing.assert_allclose(sol.ys[name], plain.ys[name], rtol=1e-12, atol=1e-12)
    for name in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        assert np.array_equal(getattr(sol, name), getattr(plain, name))
    assert np.array_equal(sol.status, plain.status)
    assert np.all(sol.status == ds.Status.SUCCESS)


def test_the_compiled_step_loop_keeps_its_boundaries():
    # Tsit5: six evaluations per step and the step's decision, each behind a conditional.
    # Were XLA to fold them (its conditional simplifier folds two identical branches), the
    # numbers would stay right and the engine would silently lose 1.4-4x (docs/benchmarks.md,
    # "stage boundaries"): this test says so first.
    if jax.default_backend() != "cpu":
        pytest.skip("boundaries are drawn on CPU only")
    solve = jax.jit(lambda rho: _lorenz_ys(rho))
    text = solve.lower(RHO).compile().as_text()
    assert text.count(" conditional(") >= 7


def _lorenz_ys(rho):
    return simulate_ensemble(
        ds.models.Lorenz(), {"rho": rho}, t0=0.0, t1=1.0, save="final", solver="tsit5"
    ).ys
