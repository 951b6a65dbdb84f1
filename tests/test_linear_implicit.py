"""Linear-implicit IMEX steppers (CrankNicolson, BackwardEuler) and newton_krylov.

The test problem is the 1-D heat equation on a cell-centred grid with a time-dependent
Dirichlet value on the left, a reaction term and a forcing as the non-stiff part. Being
linear, its semi-discretisation has an exact solution: the matrix exponential of the system
augmented with the boundary and forcing oscillators (scipy.linalg.expm).
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
import scipy.linalg

import difsim as ds
from difsim.solvers import BackwardEuler, CrankNicolson, ScaledKrylov, newton_krylov

from .helpers import central_difference

N = 32
DX = 1.0 / N
X = (np.arange(N) + 0.5) * DX
LEFT_MEAN, LEFT_AMPLITUDE, RIGHT = 1.0, 0.5, 2.0  # u(0, t) = 1 + 0.5 sin 2t, u(1, t) = 2
SOURCE = np.sin(np.pi * X)
U0 = LEFT_MEAN + (RIGHT - LEFT_MEAN) * X + 0.5 * np.sin(np.pi * X)
T1 = 0.5


def _left(t):
    return LEFT_MEAN + LEFT_AMPLITUDE * jnp.sin(2 * t)


def _stiff(t, u, diffusivity):
    """D u_xx, 3-point, ghost values by linear extrapolation through the boundary value."""
    padded = jnp.concatenate([2 * _left(t) - u[:1], u, 2 * RIGHT - u[-1:]])
    return diffusivity * (padded[2:] - 2 * u + padded[:-2]) / DX**2


def _nonstiff(t, u, diffusivity):
    return -u + jnp.cos(3 * t) * SOURCE


TERMS = dfx.MultiTerm(dfx.ODETerm(_nonstiff), dfx.ODETerm(_stiff))


def _laplacian_matrix(n, dx=DX):
    """The 3-point Laplacian with Dirichlet ghosts (ghost = 2 g - edge: -3 in the corners)."""
    k = np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    k[0, 0] = k[-1, -1] = -3.0
    return k / dx**2


def _exact(diffusivity, t1):
    """u(t1) of the semi-discrete system, by the exponential of the augmented matrix acting on
    (u, sin 2t, cos 2t, sin 3t, cos 3t, 1)."""
    s2, c2, s3, c3, one = range(N, N + 5)
    m = np.zeros((N + 5, N + 5))
    m[:N, :N] = diffusivity * _laplacian_matrix(N) - np.eye(N)
    ghost = 2 * diffusivity / DX**2
    m[0, one] += ghost * LEFT_MEAN
    m[0, s2] += ghost * LEFT_AMPLITUDE
    m[N - 1, one] += ghost * RIGHT
    m[:N, c3] += SOURCE
    m[s2, c2], m[c2, s2], m[s3, c3], m[c3, s3] = 2, -2, 3, -3
    z0 = np.concatenate([U0, [0.0, 1.0, 0.0, 1.0, 1.0]])
    return (scipy.linalg.expm(m * t1) @ z0)[:N]


_COMPILED = {}


def _final_state(solver, diffusivity, dt):
    """u(T1) by `solver` at fixed step `dt` (one compiled solve per solver, reused)."""
    if solver not in _COMPILED:

        @jax.jit
        def solve(diffusivity, dt):
            sol = dfx.diffeqsolve(
                TERMS,
                solver,
                0.0,
                T1,
                dt,
                jnp.asarray(U0),
                args=diffusivity,
                saveat=dfx.SaveAt(t1=True),
                stepsize_controller=dfx.ConstantStepSize(),
                max_steps=128,
            )
            return sol.ys[0]

        _COMPILED[solver] = solve
    as64 = lambda x: jnp.asarray(x, jnp.float64)  # noqa: E731
    return _COMPILED[solver](as64(diffusivity), as64(dt))


# ------------------------------------------------------------------------------ accuracy
@pytest.mark.parametrize(
    "solver, order",
    [(CrankNicolson(), 2), (BackwardEuler(linear_solver="tridiagonal"), 1)],
    ids=["crank_nicolson-gmres", "backward_euler-tridiagonal"],
)
def test_orders_with_a_time_dependent_dirichlet_value(solver, order):
    # D = 0.1 on 32 cells: stiff eigenvalues to -410, so h * |lambda| from 20 down to 2.5.
    exact = _exact(0.1, T1)
    steps = np.array([0.05, 0.025, 0.0125, 0.00625])
    errors = [np.max(np.abs(_final_state(solver, 0.1, h) - exact)) for h in steps]
    observed = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(observed - order) < 0.2, (observed, errors)
    assert errors[-1] < (2e-5 if order == 2 else 3e-3)


def _one_step_reference(diffusivity, h):
    """One CN–Heun step in numpy, with a dense direct solve."""
    a = diffusivity * _laplacian_matrix(N)

    def boundary(t):
        b = np.zeros(N)
        b[0] = 2 * diffusivity / DX**2 * (LEFT_MEAN + LEFT_AMPLITUDE * np.sin(2 * t))
        b[-1] = 2 * diffusivity / DX**2 * RIGHT
        return b

    def forcing(t, u):
        return -u + np.cos(3 * t) * SOURCE

    rhs = U0 + h / 2 * (a @ U0 + boundary(0.0)) + h * forcing(0.0, U0) + h / 2 * boundary(h)
    stage = np.linalg.solve(np.eye(N) - h / 2 * a, rhs)
    return stage + h / 2 * (forcing(h, stage) - forcing(0.0, U0))


@pytest.mark.parametrize("linear_solver", ["bicgstab", "cg", "tridiagonal", lx.LU()])
def test_every_linear_solver_gives_the_same_step(linear_solver):
    solver = CrankNicolson(linear_solver=linear_solver)
    h = 0.05

    @jax.jit
    def step(diffusivity):
        y0 = jnp.asarray(U0)
        state = solver.init(TERMS, 0.0, h, y0, diffusivity)
        y1, _, _, _, result = solver.step(TERMS, 0.0, h, y0, diffusivity, state, False)
        return y1, result

    y1, result = step(jnp.asarray(0.1))
    assert result == dfx.RESULTS.successful
    np.testing.assert_allclose(y1, _one_step_reference(0.1, h), rtol=0, atol=2e-9)


def test_gradient_wrt_diffusivity_matches_finite_differences():
    solver, h = CrankNicolson(), 0.025  # matrix-free GMRES: reverse mode through lineax

    def loss(diffusivity):
        return jnp.sum(_final_state(solver, diffusivity, h) ** 2)

    grad = jax.grad(loss)(jnp.asarray(0.1))
    reference = central_difference(lambda d: float(loss(d)), 0.1, h=1e-5)
    np.testing.assert_allclose(grad, reference, rtol=1e-6)


@pytest.mark.parametrize("scale", [1e-14, 1.0, 1e9])
def test_scaled_krylov_tolerance_follows_the_right_hand_side(scale):
    # A fixed atol is too loose or too tight at some scale; rtol * max|b| with lineax's
    # breakdown floor eps must converge at every scale (restart=4 forces several cycles).
    rng = np.random.default_rng(0)
    matrix = np.eye(30) * 3 + rng.standard_normal((30, 30)) * 0.5
    b = scale * rng.standard_normal(30)
    solver = ScaledKrylov(lx.GMRES(rtol=1e-8, atol=0.0, restart=4))
    sol = lx.linear_solve(lx.MatrixLinearOperator(jnp.asarray(matrix)), jnp.asarray(b), solver)
    residual = np.max(np.abs(matrix @ np.asarray(sol.value) - b))
    assert residual <= max(1e-7 * np.max(np.abs(b)), 1e-15)


# ------------------------------------------------------------------------------ misuse
def test_nonaffine_stiff_term_and_non_tridiagonal_operator_are_rejected():
    y0 = jnp.asarray(U0)
    squared = dfx.MultiTerm(dfx.ODETerm(_nonstiff), dfx.ODETerm(lambda t, u, d: -(u**2)))
    init = eqx.filter_jit(lambda solver, terms: solver.init(terms, 0.0, 0.1, y0, 0.1))
    with pytest.raises(Exception, match="BackwardEuler: the stiff term is not affine"):
        jax.block_until_ready(init(BackwardEuler(), squared))
    periodic = dfx.MultiTerm(
        dfx.ODETerm(_nonstiff),
        dfx.ODETerm(lambda t, u, d: jnp.roll(u, 1) - 2 * u + jnp.roll(u, -1)),
    )
    with pytest.raises(Exception, match="or it is not tridiagonal"):
        jax.block_until_ready(init(CrankNicolson("tridiagonal"), periodic))


def test_bad_linear_solver_names_the_argument():
    with pytest.raises(ValueError, match="CrankNicolson linear_solver must be one of 'gmres'"):
        CrankNicolson(linear_solver="lu")
    with pytest.raises(TypeError, match="BackwardEuler linear_solver must be a name or a"):
        BackwardEuler(linear_solver=3)


# ------------------------------------------------------------------------------ newton_krylov
def test_newton_krylov_solves_2d_heat_without_a_dense_jacobian():
    n = 12
    dx = 1.0 / n
    x = (np.arange(n) + 0.5) * dx
    u0 = np.outer(np.sin(np.pi * x), np.sin(2 * np.pi * x)) + 0.3 * np.outer(x * (1 - x), x)

    def heat(t, u, diffusivity):  # zero Dirichlet on all four sides: ghost = -edge
        rows = jnp.concatenate([-u[:1], u, -u[-1:]], axis=0)
        cols = jnp.concatenate([-u[:, :1], u, -u[:, -1:]], axis=1)
        lap = rows[2:] + rows[:-2] + cols[:, 2:] + cols[:, :-2] - 4 * u
        return diffusivity * lap / dx**2

    solver = newton_krylov("kvaerno3")

    @jax.jit
    def solve(diffusivity):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(heat),
            solver,
            0.0,
            0.1,
            1e-3,
            jnp.asarray(u0),
            args=diffusivity,
            saveat=dfx.SaveAt(t1=True),
            stepsize_controller=dfx.PIDController(rtol=1e-8, atol=1e-8),
            max_steps=1000,
        )
        return sol.ys[0]

    lowered = solve.lower(jnp.asarray(0.1))
    text = lowered.as_text()
    # The state's shape appears (so the search works); an n^2 x n^2 Jacobian never does.
    assert "tensor<12x12xf64>" in text
    assert "144x144" not in text and "12x12x12x12" not in text
    got = lowered.compile()(jnp.asarray(0.1))
    k = _laplacian_matrix(n, dx)
    k2 = np.kron(k, np.eye(n)) + np.kron(np.eye(n), k)
    exact = (scipy.linalg.expm(0.1 * 0.1 * k2) @ u0.ravel()).reshape(n, n)
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-7)


def test_newton_krylov_needs_an_implicit_solver():
    with pytest.raises(TypeError, match="newton_krylov needs an implicit diffrax solver"):
        newton_krylov("tsit5")
    solver = newton_krylov(dfx.Kvaerno5(), rtol=1e-4)
    assert isinstance(solver, dfx.Kvaerno5)
    assert solver.root_finder.linear_solver == ScaledKrylov(lx.GMRES(rtol=1e-4, atol=0.0))


def test_simulate_goes_matrix_free_for_named_implicit_solvers_on_grids():
    # 1600 unknowns: a dense Jacobian would take ~20 MB and an LU per Newton solve; the named
    # solver switches to Newton–Krylov and still agrees with Crank–Nicolson at a tiny step.
    from difsim.models import Heat

    model = Heat(grid=ds.Grid.dirichlet((40, 40), 0.1))
    sol = ds.simulate(model, t0=0.0, t1=5.0, save="final", solver="kvaerno5", rtol=1e-7, atol=1e-9)
    ref = ds.simulate(model, t0=0.0, t1=5.0, save="final", solver="crank_nicolson", dt0=0.005)
    np.testing.assert_allclose(sol.ys["u"], ref.ys["u"], rtol=0, atol=1e-6)
