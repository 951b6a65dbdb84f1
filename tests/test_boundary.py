"""`Grid` construction and coordinates; boundary conditions and the ghost cells of `grid.pad`."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import BarycentricInterpolator

import difsim as ds
from difsim._pde._boundary import Extrapolate, pad_axis

# ---------------------------------------------------------------------------- Grid basics


def test_construction_forms_agree():
    d, n = ds.Dirichlet(1.0), ds.Neumann(0.0)
    by_axis = ds.Grid((8, 6), (2.0, 3.0), (d, (n, d)))
    by_mapping = ds.Grid((8, 6), (2.0, 3.0), {"x": d, "y-": n, "y+": d})
    assert by_axis.bc == by_mapping.bc == ((d, d), (n, d))
    assert ds.Grid(8).bc == ((ds.Periodic(), ds.Periodic()),)  # default periodic
    assert ds.Grid((4, 4), bc="neumann").bc == ((ds.Neumann(), ds.Neumann()),) * 2
    assert ds.Grid.dirichlet(4, value=2.0).bc == ((ds.Dirichlet(2.0), ds.Dirichlet(2.0)),)
    assert ds.Grid.neumann((4, 4)).periodic_axes == (False, False)
    assert ds.Grid.periodic((4, 4, 4)).is_periodic
    mixed = ds.Grid((4, 4), bc=(ds.Periodic(), ds.Dirichlet(0.0)))
    assert mixed.periodic_axes == (True, False) and not mixed.is_periodic
    assert mixed.with_bc(ds.Periodic()).is_periodic
    finer = by_axis.with_shape((16, 12))
    assert finer.shape == (16, 12) and finer.bc == by_axis.bc and finer.extent == (2.0, 3.0)
    assert "Dirichlet(1)" in by_axis.describe() and "8×6" in by_axis.describe()


def test_coordinates_periodic_and_cell_centred():
    grid = ds.Grid((4, 5), (2.0, 1.0), (ds.Periodic(), ds.Dirichlet(0.0)), origin=(-1.0, 0.5))
    assert grid.dx == (0.5, 0.2)
    assert grid.cell_volume == pytest.approx(0.1)
    np.testing.assert_allclose(grid.axis("x"), [-1.0, -0.5, 0.0, 0.5])  # i·dx
    np.testing.assert_allclose(grid.axis(1), [0.6, 0.8, 1.0, 1.2, 1.4])  # (i + 1/2)·dx
    assert set(grid.coords) == {"x", "y"}
    x, y = grid.mesh()
    assert x.shape == y.shape == (4, 5)
    np.testing.assert_array_equal(grid.x, x)
    np.testing.assert_array_equal(grid.y[0], grid.axis("y"))
    # Midpoint rule: exact for linear functions on cell-centred axes.
    assert float(grid.integrate(y)) == pytest.approx(2.0 * (0.5 + 1.5) / 2 * 1.0)
    custom = ds.Grid((3, 3), dims=("r", "s"))
    assert custom.dims == ("r", "s") and custom.r.shape == (3, 3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(shape=(0,)), "shape"),
        (dict(shape=(2, 2, 2, 2)), "1, 2 or 3 axes"),
        (dict(shape=(4,), extent=-1.0), "extent"),
        (dict(shape=(4, 4), extent=(1.0,)), "extent has 1 entries"),
        (dict(shape=(4, 4), dims=("x", "x")), "dims"),
        (dict(shape=(4, 4), bc={"x": ds.Periodic(), "q": ds.Periodic()}), "'q'"),
        (dict(shape=(4, 4), bc={"x": ds.Periodic(), "y-": ds.Periodic()}), "y\\+"),
        (dict(shape=(4,), bc=((ds.Periodic(), ds.Dirichlet(0.0)),)), "periodic on one side"),
        (dict(shape=(4, 4), bc=(ds.Periodic(),) * 3), "bc must be"),
    ],
)
def test_bad_grid_names_the_culprit(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ds.Grid(**kwargs)


def test_bad_condition_and_field():
    with pytest.raises(TypeError, match="boundary condition for x-"):
        ds.Grid((4, 4), bc={"x-": "robin", "x+": "periodic", "y": "periodic"})
    grid = ds.Grid.periodic((4, 4))
    with pytest.raises(ValueError, match=r"phi has shape \(4, 3\)"):
        grid.check(jnp.zeros((4, 3)), "phi")
    grid.check(jnp.zeros((7, 4, 4)), "phi")  # leading batch axes are fine
    with pytest.raises(ValueError, match="no axis 'z'"):
        grid.axis("z")
    with pytest.raises(ValueError, match="out of range"):
        grid.axis(2)
    with pytest.raises(AttributeError, match="axes are x, y"):
        grid.w  # noqa: B018
    with pytest.raises(ValueError, match="fewer points than the stencil"):
        ds.Grid.periodic(2).pad(jnp.zeros(2), "x", 3)
    with pytest.raises(ValueError, match="too short"):
        ds.Grid.dirichlet(3).pad(jnp.zeros(3), "x", 2)


# ---------------------------------------------------------------------------- ghost cells


def test_periodic_pad_wraps():
    grid = ds.Grid.periodic((5, 3))
    u = jnp.arange(15.0).reshape(5, 3)
    padded = grid.pad(u, "x", 2)
    np.testing.assert_array_equal(padded[:2], u[3:])
    np.testing.assert_array_equal(padded[-2:], u[:2])
    np.testing.assert_array_equal(grid.pad(u, "y", 1)[:, 0], u[:, -1])


@pytest.mark.parametrize(
    "kind, width, degree",
    [
        ("dirichlet", 1, 1),
        ("dirichlet", 2, 4),
        ("dirichlet", 3, 4),
        ("neumann", 1, 2),  # linear ghost, but symmetric about the face: quadratics too
        ("neumann", 2, 4),
        ("neumann", 3, 4),
    ],
)
def test_ghosts_exact_for_polynomials(kind, width, degree):
    # A polynomial of the ghost polynomial's degree is reproduced exactly, on both sides,
    # from the exact face value / outward derivative; one degree more is not.
    n, length = 8, 1.3
    for deg, exact in ((degree, True), (degree + 1, False)):
        coefficients = np.arange(1.0, deg + 2) / 3

        def p(x, c=coefficients):
            return np.polynomial.polynomial.polyval(x, c)

        def dp(x, c=coefficients):
            return np.polynomial.polynomial.polyval(x, np.polynomial.polynomial.polyder(c))

        if kind == "dirichlet":
            bc = (ds.Dirichlet(p(0.0)), ds.Dirichlet(p(length)))
        else:
            bc = (ds.Neumann(-dp(0.0)), ds.Neumann(dp(length)))
        grid = ds.Grid(n, length, (bc,))
        dx = grid.dx[0]
        x = grid.axis("x")
        padded = np.asarray(grid.pad(jnp.asarray(p(x)), "x", width))
        ghosts_x = np.concatenate(
            [x[0] - dx * np.arange(width, 0, -1), x[-1] + dx * np.arange(1, width + 1)]
        )
        ghosts = np.concatenate([padded[:width], padded[-width:]])
        error = np.abs(ghosts - p(ghosts_x)).max()
        assert (error < 1e-11) == exact, (deg, error)


def test_ghost_weights_consistency():
    # Each condition carries its own ghost-cell rule.
    for condition in (ds.Dirichlet(), ds.Neumann(), Extrapolate()):
        for width in (1, 2, 3):
            w = condition.ghost_weights(width)
            assert w.shape == (width, 1 + (1 if width == 1 else 4))
            # Constants are reproduced: a constant field with zero derivative / same value.
            datum = 0.0 if not isinstance(condition, ds.Dirichlet) else 1.0
            np.testing.assert_allclose(w @ np.r_[datum, np.ones(w.shape[1] - 1)], 1.0)
    assert np.all(Extrapolate().ghost_weights(2)[:, 0] == 0)

    # A condition without a ghost-cell rule cannot be made (once: names the missing method).
    class Robin(ds.BoundaryCondition):
        def describe(self):
            return "robin"

    with pytest.raises(TypeError, match="ghosts"):
        Robin()


def test_ghost_weights_match_lagrange_extrapolation():
    # Independent reference: with no face condition the ghosts are the Lagrange
    # extrapolation through the interior points at 0, 1, ..., m - 1 (units of the spacing).
    for width, m in ((1, 1), (2, 4), (3, 4)):
        w = Extrapolate().ghost_weights(width)
        for j in range(m):
            basis = BarycentricInterpolator(np.arange(m, dtype=float), np.eye(m)[j])
            np.testing.assert_allclose(w[:, 1 + j], basis(-1.0 - np.arange(width)), atol=1e-12)


def test_extrapolate_continues_a_cubic():
    x = (np.arange(6) + 0.5) / 6
    u = jnp.asarray(1 + x - 2 * x**2 + 3 * x**3)
    padded = np.asarray(pad_axis(u, 0, 3, Extrapolate(), Extrapolate(), 1 / 6))
    xs = (np.arange(-3, 9) + 0.5) / 6
    np.testing.assert_allclose(padded, 1 + xs - 2 * xs**2 + 3 * xs**3, atol=1e-10)


def test_neumann_sign_is_outward():
    # u = x on [0, 1]: du/dn = -1 on the low face, +1 on the high face.
    grid = ds.Grid(4, 1.0, ((ds.Neumann(-1.0), ds.Neumann(1.0)),))
    padded = np.asarray(grid.pad(jnp.asarray(grid.axis("x")), "x", 1))
    np.testing.assert_allclose(padded[[0, -1]], [-0.125, 1.125])


def test_array_and_time_dependent_values_and_batch():
    # Face values are arrays over the other axes, and callables of time.
    grid = ds.Grid(
        (4, 3),
        1.0,
        {
            "x-": ds.Dirichlet(lambda t: t * jnp.arange(3.0)),
            "x+": ds.Dirichlet(jnp.array([1.0, 2.0, 3.0])),
            "y": ds.Periodic(),
        },
    )
    u = jnp.zeros((2, 4, 3))  # a leading batch axis
    padded = grid.pad(u, "x", 1, t=2.0)
    np.testing.assert_allclose(padded[:, 0], 2 * np.broadcast_to(2.0 * np.arange(3), (2, 3)))
    np.testing.assert_allclose(padded[:, -1], 2 * np.broadcast_to([1.0, 2.0, 3.0], (2, 3)))
    with pytest.raises(ValueError, match="time-dependent value"):
        grid.pad(u, "x", 1)
    bad = grid.with_bc({"x": ds.Dirichlet(jnp.ones(5)), "y": ds.Periodic()})
    with pytest.raises(ValueError, match=r"shape \(5,\).*face of shape \(2, 3\)"):
        bad.pad(u, "x", 1)
    # `bc=` pads with another grid's conditions.
    zero = grid.with_bc(ds.Dirichlet(0.0))
    np.testing.assert_array_equal(grid.pad(u + 1, "x", 1, bc=zero)[:, 0], -1.0)
    assert ds.Dirichlet(lambda t: t).describe() == "Dirichlet(value(t))"
    assert ds.Neumann(jnp.ones(3)).describe() == "Neumann(array(3,))"
