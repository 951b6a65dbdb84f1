"""Pattern-forming PDE models: Kuramoto–Sivashinsky (conservation, linear growth rates,
ETDRK4's temporal order against an independent solve, boundedness), Gray–Scott (right-hand
side against NumPy, Pearson's pattern growing from the square) and FitzHugh–Nagumo (no-flux
conservation, the exact speed of a bistable front and its second-order convergence)."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim.models import MODELS, FitzHughNagumo, GrayScott, KuramotoSivashinsky


@eqx.filter_jit
def _rhs(model, state, part="rhs"):
    """`model.<part>(0, state)`, jitted: one compile instead of one per operation."""
    return getattr(model, part)(0.0, state)


def test_registered():
    assert MODELS["kuramoto_sivashinsky"] is KuramotoSivashinsky
    assert MODELS["gray_scott"] is GrayScott
    assert MODELS["fitzhugh_nagumo"] is FitzHughNagumo


@pytest.mark.parametrize(
    "cls, grid",
    [
        (KuramotoSivashinsky, ds.Grid.periodic((8, 8))),
        (KuramotoSivashinsky, ds.Grid.dirichlet(8)),
        (GrayScott, ds.Grid.periodic(8)),
        (FitzHughNagumo, ds.Grid.neumann((8, 8, 8))),
    ],
)
def test_wrong_grid_is_refused(cls, grid):
    with pytest.raises(ValueError, match=cls.__name__):
        cls(grid=grid)


# ------------------------------------------------------------------ Kuramoto–Sivashinsky
KS_GRID = ds.Grid.periodic(128, 32 * math.pi)  # Kassam & Trefethen's grid


def _ks(u0):
    return KuramotoSivashinsky(grid=KS_GRID).replace(**{"state.u": u0})


def _ks_solve(u0, dt, t1):
    """`u` at 5 even times in `[0, t1]` by the model's default solver (ETDRK4, step `dt`)."""
    # Floats would be static arguments of the jitted function: pass arrays, compile once.
    return _ks_jit(_ks(u0), jnp.asarray(dt, jnp.float64), jnp.asarray(t1, jnp.float64))


@eqx.filter_jit
def _ks_jit(model, dt, t1):
    return ds.simulate(model, t=jnp.linspace(0.0, t1, 5), dt0=dt, max_steps=1024).ys["u"]


def _kassam_trefethen():
    x = KS_GRID.x
    return jnp.cos(x / 16) * (1 + jnp.sin(x / 16))


def test_ks_default_initial_state_is_kassam_trefethen():
    u0 = KuramotoSivashinsky(grid=KS_GRID).initial_state()["u"]
    np.testing.assert_allclose(u0, _kassam_trefethen(), rtol=0, atol=1e-15)


def test_ks_terms_match_hand_computation():
    # -u u_x of u = sin(kx) is -(k/2) sin(2kx); the linear part multiplies mode k by k² - k⁴.
    k = 8 * 2 * math.pi / KS_GRID.extent[0]  # mode 8: k = 1/2
    u = jnp.sin(k * KS_GRID.x)
    model = _ks(u)
    state = model.initial_state()
    np.testing.assert_allclose(
        model.rhs_nonstiff(0.0, state)["u"], -k / 2 * jnp.sin(2 * k * KS_GRID.x), atol=1e-13
    )
    np.testing.assert_allclose(model.rhs_stiff(0.0, state)["u"], (k**2 - k**4) * u, atol=1e-12)


def test_ks_small_mode_grows_at_linear_rate():
    k = 0.5
    u0 = 1e-7 * jnp.sin(k * KS_GRID.x)
    u = np.asarray(_ks_solve(u0, 0.25, 4.0))
    exact = np.exp((k**2 - k**4) * np.linspace(0.0, 4.0, 5))[:, None] * np.asarray(u0)
    np.testing.assert_allclose(u, exact, rtol=0, atol=1e-7 * 1e-5)  # nonlinear: O(1e-14)


def test_ks_etdrk4_is_fourth_order_and_conserves_the_mean():
    u0 = _kassam_trefethen() + 0.3  # a non-zero mean, which the dynamics must keep
    t1 = 4.0
    ref = ds.simulate(_ks(u0), t=jnp.array([0.0, t1]), solver="tsit5", rtol=1e-12, atol=1e-12)
    ref = np.asarray(ref.ys["u"][-1])
    dts = 2.0 ** -np.arange(1, 5)  # 1/2 ... 1/16: exact in binary, steps land on save times
    errors = []
    for dt in dts:
        u = np.asarray(_ks_solve(u0, dt, t1))
        np.testing.assert_allclose(u.mean(axis=-1), 0.3, rtol=0, atol=1e-13)
        errors.append(np.max(np.abs(u[-1] - ref)))
    errors = np.array(errors)
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - 4) < 0.2, (slope, errors)
    assert errors[-1] < 1e-6


def test_ks_stays_bounded_and_becomes_chaotic():
    # Kassam & Trefethen's run to t = 150: KS solutions enter a bounded absorbing set, and
    # the field saturates at |u| ≈ 2.5-3 (their figure), well below 4.
    u = np.asarray(_ks_solve(_kassam_trefethen(), 0.25, 150.0))
    assert np.all(np.isfinite(u))
    assert np.max(np.abs(u)) < 4
    assert np.max(np.abs(u[-1])) > 2  # grown from max|u0| ≈ 1.3 to the saturated state
    # Many cells: the final state has energy over many modes, not just the initial one.
    spectrum = np.abs(np.fft.rfft(u[-1])) ** 2
    assert np.sum(spectrum > 1e-3 * spectrum.max()) > 10


# ----------------------------------------------------------------------------- Gray–Scott
def _numpy_gray_scott(u, v, model, dx):
    def lap(f):
        return sum((np.roll(f, 1, a) - 2 * f + np.roll(f, -1, a)) / h**2 for a, h in enumerate(dx))

    F, k, Du, Dv = (float(getattr(model, p)) for p in ("F", "k", "Du", "Dv"))
    return (
        Du * lap(u) - u * v**2 + F * (1 - u),
        Dv * lap(v) + u * v**2 - (F + k) * v,
    )


def test_gray_scott_rhs_matches_numpy(getkey):
    grid = ds.Grid.periodic((16, 12), (0.4, 0.3))  # unequal axes catch an axis mix-up
    model = GrayScott(grid=grid, F=0.03, k=0.055)
    u, v = (np.asarray(jnp.abs(jax.random.normal(getkey(), grid.shape))) for _ in "uv")
    state = model.state.with_values({"u": jnp.asarray(u), "v": jnp.asarray(v)})
    got = _rhs(model, state)
    want = _numpy_gray_scott(u, v, model, grid.dx)
    np.testing.assert_allclose(got["u"], want[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got["v"], want[1], rtol=1e-12, atol=1e-14)
    trivial = model.state.with_values({"u": jnp.ones(grid.shape), "v": jnp.zeros(grid.shape)})
    for value in _rhs(model, trivial).values():
        assert float(jnp.max(jnp.abs(value))) == 0.0


def test_gray_scott_pattern_grows_from_pearsons_square(tmp_path):
    # Pearson's spacing (2.5/256) on a 64² patch of his domain, type θ (the defaults).
    side = 64 * 2.5 / 256
    model = GrayScott(grid=ds.Grid.periodic((64, 64), (side, side)))
    initial = model.initial_state()
    x, y = (np.asarray(c) - side / 2 for c in model.grid.mesh())
    distance = np.maximum(np.abs(x), np.abs(y))  # from the centre, in the max norm
    half = float(model.square) / 2
    outside = distance > half
    v0 = np.asarray(initial["v"])
    assert np.all(v0[outside] == 0) and np.all(np.abs(v0[~outside] / 0.25 - 1) <= 0.01)
    u0 = np.asarray(initial["u"])
    assert np.all(np.abs(u0[outside] - 1) <= 0.01) and np.all(np.abs(u0[~outside] - 0.5) <= 0.005)

    sol = ds.simulate(model, t=jnp.array([0.0, 400.0, 800.0, 1200.0]))  # ETDRK4, dt = 1
    v = np.asarray(sol.ys["v"])
    assert np.all(np.isfinite(v)) and np.all(v > -1e-3) and np.all(v < 1)
    excited = v > 0.1
    fraction = excited.mean(axis=(1, 2))
    assert np.all(np.diff(fraction) > 0)  # the pattern keeps spreading
    assert fraction[-1] > 4 * fraction[0]
    assert excited[-1][outside].mean() > 0.3  # well beyond the square ...
    assert np.any(excited[-1] & (distance > 2 * half))  # ... at twice its size
    assert v[-1].std() > 1.4 * v0.std()
    # A pattern, not a uniform state: both phases cover a good part of the domain.
    assert 0.3 < fraction[-1] < 0.9
    path = tmp_path / "gray_scott.png"
    ds.plot_snapshots(sol.to_xarray(), path, variables=["v"])
    assert path.stat().st_size > 10_000


# ------------------------------------------------------------------------ FitzHugh–Nagumo
def test_fitzhugh_nagumo_rest_state_and_no_flux_diffusion(getkey):
    grid = ds.Grid.neumann((12, 9), (3.0, 2.0))
    model = FitzHughNagumo(grid=grid, D=0.7)
    u_rest, v_rest = (float(c) for c in model.rest_state())
    # FitzHugh's equilibrium for a = 0.7, b = 0.8: u³/3 + u/4 + 7/8 = 0.
    assert u_rest == pytest.approx(np.roots([1 / 3, 0, 0.25, 0.875]).real.min(), abs=1e-12)
    rest = model.state.with_values(
        {"u": jnp.full(grid.shape, u_rest), "v": jnp.full(grid.shape, v_rest)}
    )
    for value in _rhs(model, rest).values():
        assert float(jnp.max(jnp.abs(value))) < 1e-14
    # Zero-flux boundaries: diffusion only moves u around, ∫ D∇²u = 0 for any field.
    u = jax.random.normal(getkey(), grid.shape)
    state = model.state.with_values({"u": u, "v": jnp.zeros(grid.shape)})
    diffusion = _rhs(model, state, "rhs_stiff")["u"]
    assert float(jnp.max(jnp.abs(diffusion))) > 1  # not trivially zero
    assert abs(float(grid.integrate(diffusion))) < 1e-12


def test_fitzhugh_nagumo_front_speed_converges_to_exact():
    # With eps = 0 the recovery is frozen at v_r and u obeys a bistable equation whose
    # fronts move at exactly c = -3 u_2 sqrt(D/6). The speed of a planar front in x comes
    # from the displaced area ∫(u - u_1)/(u_3 - u_1) dx. Only D/dx² enters the discrete
    # equations, so raising D 4-fold on a fixed grid is exactly halving dx relative to the
    # front (whose width scales as sqrt(D)): a refinement study with a single compile.
    base = FitzHughNagumo(eps=0.0)
    v_rest = float(base.rest_state()[1])
    u1, u2, u3 = np.sort(np.roots([1, 0, -3, 3 * v_rest]).real)  # u³ - 3u + 3v = 0
    grid = ds.Grid.neumann((96, 2), (96.0, 2.0))  # dx = 1
    diffusivities = np.array([1.0, 4.0, 16.0])  # dx / front width ∝ 1, 1/2, 1/4
    errors = []
    for D in diffusivities:
        c = float(base.replace(D=D).front_speed())
        assert c == pytest.approx(-3 * u2 * math.sqrt(D / 6), rel=1e-12)
        scale = math.sqrt(D)  # lengths and speeds scale as sqrt(D), times do not
        width = scale / ((u3 - u1) * math.sqrt(1 / 24))  # of the exact tanh profile
        u0 = (u3 + u1) / 2 - (u3 - u1) / 2 * jnp.tanh((grid.x - 6.0 * scale) / width)
        model = FitzHughNagumo(eps=0.0, D=D, grid=grid).replace(
            state={"u": u0, "v": jnp.full(grid.shape, v_rest)}
        )
        sol = ds.simulate(model, t=jnp.array([0.0, 2.0, 10.0]), rtol=1e-9, atol=1e-9)
        position = np.asarray(grid.integrate((sol.ys["u"] - u1) / (u3 - u1))) / 2.0
        errors.append(abs((position[2] - position[1]) / 8.0 / c - 1))
    errors = np.array(errors)
    assert errors[-1] < 0.003, errors
    slope = np.polyfit(np.log(1 / np.sqrt(diffusivities)), np.log(errors), 1)[0]
    assert abs(slope - 2) < 0.2, (slope, errors)
