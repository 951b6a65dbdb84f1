"""Fixed-step solves as scans: same answers as diffrax's loop, gradients, bounded memory."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._core import _fixed_step as fixed_step
from difsim._core._fixed_step import plan_scan

from .helpers import central_difference
from .pde_helpers import Heat1D


def _plan(ts=None, t0=0.0, t1=1.0, dt0=0.1, **kw):
    options = dict(
        final_only=ts is None, fixed_step=True, event=None,
        adjoint=dfx.RecursiveCheckpointAdjoint(), progress=False, max_steps=1000,
    )  # fmt: skip
    options.update(kw)
    return plan_scan(None if ts is None else np.asarray(ts), t0, t1, dt0, **options)


def test_plan_eligibility():
    assert _plan() == (10, 0, 1, True, 0.1)
    assert _plan(np.linspace(0.0, 1.0, 6)) == (0, 2, 6, True, 0.1)
    assert _plan([0.3, 0.6, 1.0]) is None  # 0.3→0.6→1.0 is not evenly spaced
    assert _plan([0.25, 1.0]) is None  # 0.25 is not a multiple of dt0
    assert _plan(fixed_step=False) is None
    assert _plan(event=object()) is None
    assert _plan(progress=True) is None
    assert _plan(adjoint=dfx.BacksolveAdjoint()) is None
    assert _plan(max_steps=5) is None  # diffrax's loop reports MAX_STEPS
    assert _plan(adjoint=dfx.ForwardMode()).checkpoint is False
    assert _plan(dt0=jax.core.ShapedArray((), jnp.float64)) is None


@pytest.mark.parametrize("save", ["final", 11])
def test_scan_equals_diffrax_loop(save):
    model = Heat1D()
    scan = ds.simulate(model, t0=0.0, t1=0.01, save=save)
    loop = ds.simulate(model, t0=0.0, t1=0.01, save=save, progress=True)  # diffrax's loop
    np.testing.assert_allclose(scan.ys["u"], loop.ys["u"], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(scan.ts, loop.ts)
    assert int(scan.num_steps) == int(loop.num_steps) == 100


@pytest.mark.parametrize("adjoint", ["checkpoint", "forward", "direct"])
def test_gradients_match_finite_differences(adjoint):
    def loss(D):
        sol = ds.simulate(Heat1D(D=D), t0=0.0, t1=0.01, save="final", adjoint=adjoint)
        return jnp.sum(sol.ys["u"][-1] ** 2)

    grad = jax.jacfwd(loss) if adjoint == "forward" else jax.grad(loss)
    np.testing.assert_allclose(grad(1.0), central_difference(loss, 1.0), rtol=1e-7)


def test_failure_is_reported_and_later_saves_blanked():
    class Blowup(ds.Model):
        state = ds.State(u=1.0)
        solver_defaults = {"solver": "euler", "dt0": 0.01, "controller": "constant"}

        def rhs(self, t, s):
            return dict(u=s.u**3)  # u = 1/sqrt(1 - 2t): blows up at t = 1/2

    scan = ds.simulate(Blowup(), t0=0.0, t1=2.0, save=5, throw=False)
    loop = ds.simulate(Blowup(), t0=0.0, t1=2.0, save=5, throw=False, progress=True)
    assert scan.status == loop.status == ds.Status.NONFINITE
    np.testing.assert_array_equal(np.isnan(scan.ys["u"]), np.isnan(loop.ys["u"]))


def test_gradient_memory_grows_like_sqrt_steps(monkeypatch):
    # Compiled temporary memory of a reverse-mode gradient: ~√n for n steps (checkpointed
    # blocks), where storing every step would grow like n. (Small solves store every step:
    # turned off here so that both sizes checkpoint.)
    monkeypatch.setattr(fixed_step, "_STORE_ALL", 0)

    def memory(n):
        def loss(D):
            sol = ds.simulate(Heat1D(D=D), t0=0.0, t1=n * 1e-4, save="final")
            return jnp.sum(sol.ys["u"][-1] ** 2)

        compiled = jax.jit(jax.grad(loss)).lower(1.0).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    small, large = memory(256), memory(4096)  # 16x the steps
    assert large / small < 6  # √16 = 4, plus fixed costs; n-linear storage would be ~16
