"""User journey 1: a model defined in user code, solved, labelled, plotted, transformed.

Models here are written the way a user would write them (see docs/USER-STORIES), and each
result is checked against an independent reference: scipy, a closed form, finite differences.
"""

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

import difsim as ds
from difsim.models import Lorenz as ZooLorenz

from .helpers import central_difference, scipy_reference


class Lorenz(ds.Model):
    """Lorenz (1963) convection model. Time in model units."""

    sigma: float = 10.0
    rho: float = 28.0
    beta: float = 8.0 / 3.0
    state = ds.State(x=1.0, y=0.0, z=0.0)
    phase: ClassVar = ("x", "z")

    def rhs(self, t, s):
        return dict(
            x=self.sigma * (s.y - s.x),
            y=s.x * (self.rho - s.z) - s.y,
            z=s.x * s.y - self.beta * s.z,
        )


def _lorenz_numpy(rho):
    def rhs(t, u):
        x, y, z = u
        return [10.0 * (y - x), x * (rho - z) - y, x * y - 8.0 / 3.0 * z]

    return rhs


TS = np.linspace(0.0, 1.0, 11)
TIGHT = dict(rtol=1e-10, atol=1e-10)


def test_quickstart_matches_scipy_and_is_labelled(tmp_path):
    sol = ds.simulate(Lorenz(), t=TS, **TIGHT)
    reference = scipy_reference(_lorenz_numpy(28.0), (0.0, 1.0), [1.0, 0.0, 0.0], TS)
    got = np.stack([sol.x, sol.y, sol.z], axis=-1)
    np.testing.assert_allclose(got, reference, rtol=0, atol=1e-7)
    data = sol.to_xarray()
    assert data.x.dims == ("time",) and data.attrs["rho"] == 28.0
    np.testing.assert_array_equal(data.time, TS)
    path = tmp_path / "lorenz.png"
    sol.plot(path, phase=Lorenz.phase)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_user_model_agrees_with_the_zoo_model():
    mine = ds.simulate(Lorenz(rho=21.0), t=TS, **TIGHT)
    zoo = ds.simulate(ZooLorenz(rho=21.0), t=TS, **TIGHT)
    for name in ("x", "y", "z"):
        np.testing.assert_allclose(mine.ys[name], zoo.ys[name], rtol=1e-9, atol=1e-9)


def test_vmap_over_rho_matches_scipy_per_trajectory():
    rhos = np.array([0.5, 15.0, 28.0])  # a fixed point, damped spirals, the chaotic attractor
    sols = jax.vmap(lambda rho: ds.simulate(ZooLorenz(rho=rho), t=TS, **TIGHT))(jnp.asarray(rhos))
    assert sols.x.shape == (3, len(TS))
    data = sols.to_xarray(batch_dims=["rho"], batch_coords={"rho": rhos})
    assert data.x.dims == ("rho", "time")
    for i, rho in enumerate(rhos):
        reference = scipy_reference(_lorenz_numpy(rho), (0.0, 1.0), [1.0, 0.0, 0.0], TS)
        np.testing.assert_allclose(data.z.sel(rho=rho), reference[:, 2], atol=1e-7)


def test_grad_with_respect_to_the_whole_model():
    # The model is a pytree: jax.grad of a loss of the model gives a model of derivatives.
    def loss(model):
        sol = ds.simulate(model, t0=0.0, t1=0.5, save="final", rtol=1e-12, atol=1e-12)
        return sol.final["z"]

    # Jitted whole (every parameter traced): one program gives the gradient and the losses
    # the finite differences take.
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grads = value_and_grad(Lorenz())[1]
    assert isinstance(grads, Lorenz)

    def loss_of(name):
        return lambda value: float(value_and_grad(Lorenz().replace(**{name: value}))[0])

    for name, value in (("rho", 28.0), ("sigma", 10.0), ("state.x", 1.0)):
        fd = central_difference(loss_of(name), value, h=1e-6)
        got = grads.state.x if name == "state.x" else getattr(grads, name)
        np.testing.assert_allclose(got, fd, rtol=1e-6)


class Heat(ds.Model):
    """Periodic 1-D heat equation u_t = D u_xx, second-order finite differences."""

    D: float = ds.param(0.1, units="m^2/s", description="diffusivity")
    state = ds.State(u=ds.Var(np.sin(2 * np.pi * np.arange(16) / 16), units="K", dims=("x",)))
    time_units: ClassVar[str] = "s"

    def coords(self):
        return {"x": np.arange(16) / 16}

    def rhs(self, t, s):
        h = 1.0 / 16
        laplacian = (jnp.roll(s.u, 1) - 2 * s.u + jnp.roll(s.u, -1)) / h**2
        return dict(u=self.D * laplacian)


def test_field_model_matches_the_discrete_eigenmode():
    # sin(2 pi x_j) is an eigenvector of the periodic second difference, with eigenvalue
    # -(4 / h^2) sin^2(pi h): the semi-discrete solution decays exactly at that rate.
    ts = np.linspace(0.0, 2.0, 5)
    sol = ds.simulate(Heat(), t=ts, **TIGHT)
    h = 1.0 / 16
    rate = 0.1 * 4 / h**2 * np.sin(np.pi * h) ** 2
    x = np.arange(16) * h
    expected = np.exp(-rate * ts)[:, None] * np.sin(2 * np.pi * x)[None, :]
    np.testing.assert_allclose(sol.u, expected, atol=1e-9)
    data = sol.to_xarray()
    assert data.u.dims == ("time", "x") and data.u.attrs["units"] == "K"
    np.testing.assert_array_equal(data.x, x)
    assert data.attrs["D_units"] == "m^2/s" and data.time.attrs["units"] == "s"
