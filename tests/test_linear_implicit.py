"""Linear-implicit IMEX steppers (CrankNicolson, BackwardEuler) and newton_krylov.

The test problem is the 1-D heat equation on a cell-centred grid with a time-dependent
Dirichlet value on the left, a reaction term and a forcing as the non-stiff part. Being
linear, its semi-discretisation has an exact solution: the matrix exponential of the system
augmented with the boundary and forcing oscillators (scipy.linalg.expm).
"""

import diffrax as dfx
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

    # Jitted whole (a derivative taken outside jit compiles the solve's forward and backward
    # halves as separate programs); the finite differences read the loss off it too.
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grad = value_and_grad(jnp.asarray(0.1))[1]
    reference = central_difference(lambda d: float(value_and_grad(jnp.asarray(d))[0]), 0.1, h=1e-5)
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


# ------------------------------------------------------------------------------ scalar ODE
class Relaxation(ds.Model):
    """u' = -λ (u - sin t) [stiff: affine, with a forcing] + cos t - μ (u - sin t)
    [non-stiff], so u(t) = sin t + (u(0) - 0) exp(-(λ + μ) t)."""

    lam: float = 20.0
    mu: float = 2.0
    state = ds.State(u=1.0)

    def rhs_stiff(self, t, s):
        return dict(u=-self.lam * (s.u - jnp.sin(t)))

    def rhs_nonstiff(self, t, s):
        return dict(u=jnp.cos(t) - self.mu * (s.u - jnp.sin(t)))


@pytest.mark.parametrize(("solver", "order"), [("imex_euler", 1), ("crank_nicolson", 2)])
def test_orders_on_a_scalar_ode(solver, order):
    # h (λ + μ) from 1.1 down to 0.14; errors at t = 0.5 and 1 against the exact solution.
    steps = np.array([0.05, 0.025, 0.0125, 0.00625])
    ts = np.array([0.0, 0.5, 1.0])
    exact = np.sin(ts) + np.exp(-22.0 * ts)

    @jax.jit
    @jax.vmap
    def solve(dt):  # one compile: the step is traced
        return ds.simulate(
            Relaxation(), t0=0.0, t1=1.0, save=3, solver=solver, dt0=dt, controller="constant"
        )

    sol = solve(jnp.asarray(steps))
    assert np.all(np.asarray(sol.status) == ds.Status.SUCCESS)
    errors = np.max(np.abs(np.asarray(sol.u) - exact), axis=1)
    observed = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(observed - order) < 0.1, (observed, errors)
    assert errors[-1] < (1e-5 if order == 2 else 2e-4)


# ------------------------------------------------------------------------------ misuse
class Squared(ds.Model):
    """du/dt = -k u² put in the stiff part, which must be affine: a misuse."""

    k: float = 1.0
    power: float = 2.0
    state = ds.State(u=1.0)

    def rhs_nonstiff(self, t, s):
        return dict(u=0.0 * s.u)

    def rhs_stiff(self, t, s):
        return dict(u=-self.k * t ** (self.power - 2) * s.u**2)


_NOT_AFFINE = "Squared.rhs_stiff is not affine in the state, which {} needs: at t = {}"


@pytest.mark.parametrize(
    ("solver", "cls"), [("imex_euler", "BackwardEuler"), ("crank_nicolson", "CrankNicolson")]
)
def test_nonaffine_stiff_part_is_refused_before_the_solve(solver, cls):
    # Was: imex_euler kept u = 1, crank_nicolson gave u(0.5) = 0.792 (exact 2/3), SUCCESS.
    run = dict(t0=0.0, t1=1.0, save=3, solver=solver, controller="constant", dt0=0.1)
    expected = _NOT_AFFINE.format(cls, 0) + r" and the initial state, its value for 'u' differs"
    with pytest.raises(ValueError, match=expected + r" from its linearisation at zero by 1 "):
        ds.simulate(Squared(), **run, throw=False)
    with pytest.raises(ValueError, match=expected):
        ds.sweep(Squared(), ds.GridSweep({"k": [1.0, 2.0]}), **run, progress=False)
    # Not affine only at t > 0 (-t u²): found at the first step's end, t0 + dt0.
    with pytest.raises(ValueError, match=_NOT_AFFINE.format(cls, 0.1)):
        ds.simulate(Squared(power=3.0), **run)


@pytest.mark.parametrize(
    ("solver", "dt0", "on_error"),
    [("imex_euler", 0.1, "raise"), ("crank_nicolson", 0.3, "nan")],
    ids=["scan-raise", "diffrax_loop-nan"],
)
def test_nonaffine_stiff_part_fails_a_traced_solve(solver, dt0, on_error, monkeypatch):
    # Under jit the model is traced: no check before the solve, so the solver's own check
    # must end it with a failed status (not an error_if, which the compiled program dropped
    # as dead code, and which the compile cache's EQX_ON_ERROR=nan would make NaN).
    from equinox import _errors

    monkeypatch.setattr(_errors, "EQX_ON_ERROR", on_error)
    jax.clear_caches()  # trace in this mode

    @jax.jit
    def solve(k):
        return ds.simulate(
            Squared(k), t0=0.0, t1=0.6, save=3, solver=solver, controller="constant", dt0=dt0,
            throw=False,
        )  # fmt: skip

    sol = solve(1.0)
    assert ds.Status(int(sol.status)) == ds.Status.NONLINEAR_SOLVER
    assert "move its nonlinear terms to rhs_nonstiff" in sol.message()
    # Nothing is saved: diffrax saves even t0 only with the first accepted step.
    assert np.all(np.isnan(sol.u))
    # k = 0: the stiff part is 0, affine; u = 1 exactly, in the same compiled solve.
    sol = solve(0.0)
    assert ds.Status(int(sol.status)) == ds.Status.SUCCESS
    np.testing.assert_array_equal(sol.u, [1.0, 1.0, 1.0])


def test_solver_checks_its_stiff_term_in_any_diffrax_solve():
    y0 = jnp.linspace(0.5, 1.0, 6)

    def solve(solver, stiff):
        terms = dfx.MultiTerm(dfx.ODETerm(lambda t, u, d: -u), dfx.ODETerm(stiff))
        return dfx.diffeqsolve(terms, solver, 0.0, 0.2, 0.1, y0, throw=False)

    squared = solve(BackwardEuler(), lambda t, u, d: -(u**2))
    assert squared.result == dfx.RESULTS.nonlinear_divergence
    assert squared.stats["num_steps"] == 1 and np.all(np.isnan(squared.ys))
    periodic = lambda t, u, d: jnp.roll(u, 1) - 2 * u + jnp.roll(u, -1)  # noqa: E731
    assert solve(CrankNicolson("tridiagonal"), periodic).result == dfx.RESULTS.breakdown
    with pytest.raises(ValueError, match="periodic is not a tridiagonal operator on the flat"):
        CrankNicolson("tridiagonal").check_stiff_term(periodic, 0.0, 0.1, y0, None, name="periodic")


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_affine_check_allows_rounding_and_finds_small_nonlinearities(dtype):
    # A Laplacian on 4096 cells (4/dx² = 6.7e7) of a constant state with Neumann ghosts
    # cancels to 0 from terms of 6.7e7 times the state: rounding, not a nonlinearity, and
    # the Dirichlet ghosts of _stiff add boundary values of 2e3 (float32 and float64).
    n = 4096

    def laplacian(t, u, eps):
        padded = jnp.concatenate([u[:1], u, u[-1:]])
        return n**2 * (padded[2:] - 2 * u + padded[:-2]) + eps * u**2

    check = BackwardEuler().check_stiff_term
    for y0 in (np.full(n, 1e3), np.cos(np.pi * (np.arange(n) + 0.5) / n)):
        check(laplacian, 0.0, 0.1, jnp.asarray(y0, dtype), jnp.asarray(0.0, dtype), name="L")
    check(_stiff, 0.0, 0.1, jnp.asarray(U0, dtype), jnp.asarray(0.1, dtype), name="L")
    # A reaction term put in the stiff part, 1e-6 (float64) of the state's size: found.
    if dtype == jnp.float64:
        with pytest.raises(ValueError, match=r"L is not affine .* by 1e-06 \(rounding allows"):
            check(laplacian, 0.0, 0.1, jnp.ones(n), jnp.asarray(1e-6), name="L")


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
    # solver switches to Newton–Krylov and still agrees with the exact semi-discrete solution.
    # t1 = 1 is still ~70 explicit Euler step limits dx²/4D. Heat's initial state, the product
    # of sin(pi x / L) at the cell centres, is an eigenvector of the 5-point Laplacian with
    # Dirichlet ghosts (ghost = -edge): it decays as exp(2 D t (2 cos(pi dx / L) - 2) / dx²).
    from difsim.models import Heat

    n, length = 40, 0.1
    model = Heat(grid=ds.Grid.dirichlet((n, n), length))
    sol = ds.simulate(model, t0=0.0, t1=1.0, save="final", solver="kvaerno5", rtol=1e-7, atol=1e-9)
    x = (np.arange(n) + 0.5) / n
    u0 = np.outer(np.sin(np.pi * x), np.sin(np.pi * x))
    dx = length / n
    exact = u0 * np.exp(2 * model.D * 1.0 * (2 * np.cos(np.pi * dx / length) - 2) / dx**2)
    np.testing.assert_allclose(sol.ys["u"][-1], exact, rtol=0, atol=1e-9)
