"""`difsim.solvers.Radau5` (solvers/_radau.py): Radau IIA of order 5.

References: the constants of Hairer & Wanner's RADAU5 code (published in its source and in
*Solving ODEs II*, §IV.8), scipy's DOP853 and Radau at tight tolerances, and the closed
form of a nonlinear index-1 DAE.
"""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from scipy.integrate import solve_ivp

from difsim import solvers
from difsim.solvers import _radau

TIGHT = solvers.StageNewton(rtol=1e-13, atol=1e-13, norm=optx.rms_norm)
SAVE = jnp.array([0.33, 1.77, 2.0])  # two between steps (dense output), the end


def test_the_coefficients_are_radau5s():
    s6 = np.sqrt(6.0)
    np.testing.assert_allclose(_radau.RADAU_C, [(4 - s6) / 10, (4 + s6) / 10, 1], rtol=1e-15)
    # RADAU5: U1 = 1/((6 + 81^(1/3) - 9^(1/3))/30); (ALPH ± i BETA) / (ALPH² + BETA²).
    u1 = 30 / (6 + 81 ** (1 / 3) - 9 ** (1 / 3))
    alph, beta = (
        (12 - 81 ** (1 / 3) + 9 ** (1 / 3)) / 60,
        (81 ** (1 / 3) + 9 ** (1 / 3)) * np.sqrt(3) / 60,
    )
    cno = alph**2 + beta**2
    assert abs(_radau.RADAU_GAMMA - u1) < 1e-13
    assert abs(_radau.RADAU_MU - complex(alph / cno, -beta / cno)) < 1e-13
    # DD1..3 of its error estimate, which the module derives from the order conditions.
    dd = [-(13 + 7 * s6) / 3, (-13 + 7 * s6) / 3, -1 / 3]
    np.testing.assert_allclose(_radau.RADAU_ERR, dd, rtol=1e-13)


def _ode(t, y, args):
    return jnp.stack([-y[1] * y[0], y[0] ** 2 - y[1] + jnp.cos(t)])


def _riccati(t, y, args):  # x' = -z, 0 = z - x²: x = 1/(1 + t), z = x²
    return jnp.stack([-y[1], y[1] - y[0] ** 2])


@eqx.filter_jit
def _fixed(field, solver, y0, dt):
    sol = dfx.diffeqsolve(dfx.ODETerm(field), solver, 0.0, 2.0, dt, y0,
                          stepsize_controller=dfx.ConstantStepSize(),
                          saveat=dfx.SaveAt(ts=SAVE), max_steps=100)  # fmt: skip
    return sol.ys


def _orders(errors):
    errors = np.asarray(errors)
    return np.log2(errors[:-1] / errors[1:])


def test_fixed_steps_converge_at_order_five_and_the_dense_output_at_four():
    ref = solve_ivp(lambda t, y: [-y[1] * y[0], y[0] ** 2 - y[1] + np.cos(t)], (0, 2),
                    [1.0, 0.5], t_eval=np.asarray(SAVE), method="DOP853", rtol=1e-13,
                    atol=1e-13).y.T  # fmt: skip
    solver = solvers.Radau5(root_finder=TIGHT)
    errs = [np.abs(np.asarray(_fixed(_ode, solver, jnp.array([1.0, 0.5]), 2.0 / n)) - ref)
            for n in (10, 20, 40, 80)]  # fmt: skip
    end = _orders([e[-1].max() for e in errs])
    dense = _orders([e[:-1].max() for e in errs])
    assert np.all(end > 4.7), end
    # The collocation polynomial errs by O(h^(s+1)) = O(h⁴) inside a step (3.5-3.6
    # measured from h = 0.1 to 0.025: not yet asymptotic; a quadratic would give 3).
    assert np.all(dense[1:] > 3.3), dense


def test_an_index_one_dae_converges_at_order_five_in_both_variables():
    solver = solvers.Radau5(root_finder=TIGHT, mass=(1.0, 0.0))
    x, z = 1 / 3, 1 / 9  # at t = 2
    # From h = 1/6: at h = 0.2 the first step's iteration, from Euler's guess, forecasts
    # no convergence to 1e-13 within its budget (as RADAU5's would) and fails; beyond
    # n = 20 the errors reach rounding.
    ends = [np.asarray(_fixed(_riccati, solver, jnp.array([1.0, 1.0]), 2.0 / n))[-1]
            for n in (12, 16, 20)]  # fmt: skip
    errors = np.abs(np.array(ends) - [x, z])
    orders = np.log(errors[:-1] / errors[1:]) / np.log([[16 / 12], [20 / 16]])
    # Stiffly accurate: order 5 for z as well (here the errors fall faster, ~8: this
    # problem's h⁵ term is small; a method of order 3 in z would fail).
    assert np.all(orders > 4.5), orders


@eqx.filter_jit
def _adaptive(rtol):
    mu = 10.0

    def vdp(t, y, args):
        return jnp.stack([y[1], mu * ((1 - y[0] ** 2) * y[1] - y[0])])

    controller = dfx.PIDController(rtol=rtol, atol=rtol, pcoeff=0.4, icoeff=0.3)
    solver = solvers.make_solver("radau5")
    sol = dfx.diffeqsolve(dfx.ODETerm(vdp), solver, 0.0, 20.0, None, jnp.array([2.0, 0.0]),
                          stepsize_controller=controller, max_steps=20_000)  # fmt: skip
    return sol.ys[-1], sol.result == dfx.RESULTS.successful


def test_adaptive_error_follows_the_tolerance_on_stiff_van_der_pol():
    ref = solve_ivp(lambda t, y: [y[1], 10 * ((1 - y[0] ** 2) * y[1] - y[0])], (0, 20),
                    [2.0, 0.0], method="Radau", rtol=1e-12, atol=1e-12).y[:, -1]  # fmt: skip
    for rtol in (1e-5, 1e-8):
        y, ok = _adaptive(jnp.asarray(rtol))
        assert bool(ok)
        err = float(np.max(np.abs(np.asarray(y) - ref)) / np.max(np.abs(ref)))
        assert err < 10 * rtol, (rtol, err)
