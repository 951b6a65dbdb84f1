"""Sweeps and outputs of models holding an equinox network, an array field on a grid or a
custom module (issue 28, point 1). `ds.sweep(UDE(), ds.GridSweep({"alpha": [...]}))` raised
`TypeError: Output from batched function <PjitFunction of tanh> ...`; outputs left the
network out; a sweep's identity hashed the `repr` of a module's structure (memory
addresses of its static callables: another identity in every process) and ignored its
non-array leaves (a network's activation, a grid's boundary values)."""

import re
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import difsim as ds
from difsim._sweep import SweepOutputError
from difsim._sweep._layout import value_text

from .helpers import UDE, ude_network as _mlp

ALPHA = [1.0, 1.3]


class Closure(eqx.Module):
    w: jax.Array
    act: object = eqx.field(static=True, default=jnp.sin)

    def __call__(self, x):
        return self.act(self.w @ x)


class Reaction(ds.Model):
    D: float = 0.1
    k: jax.Array = ds.param(None, units="1/s", description="decay rate")
    grid: ds.Grid = ds.Grid.dirichlet(8, 1.0)
    term: Closure = eqx.field(default_factory=lambda: Closure(0.01 * jnp.ones((8, 8))))
    state = ds.State(u=ds.Var(None))

    def initial_state(self):
        return self.state.replace(u=jnp.sin(jnp.pi * self.grid.mesh()[0]))

    def rhs(self, t, s):
        return {"u": self.D * ds.fd.laplacian(s.u, self.grid) - self.k * s.u + self.term(s.u)}


def _reaction():
    return Reaction(k=jnp.linspace(0.5, 1.5, 8))


WEIGHTS = ["net.layers[0].weight", "net.layers[0].bias", "net.layers[1].weight",
           "net.layers[1].bias", "net.layers[2].weight", "net.layers[2].bias"]  # fmt: skip


def _check_network(data: xr.Dataset, model: UDE):
    for name in WEIGHTS:
        layer, field = name.removeprefix("net.layers[").split("].")
        expected = np.asarray(getattr(model.net.layers[int(layer)], field))
        assert data[name].dims == tuple(f"{name}_dim{i}" for i in range(expected.ndim))
        np.testing.assert_array_equal(data[name].values, expected)
        assert data[name].attrs["difsim_role"] == "parameter"
    assert data.attrs["delta"] == 1.8 and data.attrs["delta_units"] == "1/s"


@pytest.mark.parametrize("engine", ["ensemble", "diffrax"])
def test_the_issue_sweep_runs_and_matches_simulate(engine):
    m = UDE()
    out = ds.sweep(m, ds.GridSweep({"alpha": ALPHA}), t0=0.0, t1=1.0, engine=engine,
                   rtol=1e-10, atol=1e-10, save="final")  # fmt: skip
    for i, a in enumerate(ALPHA):
        ref = ds.simulate(m.replace(alpha=a), t0=0.0, t1=1.0, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(out["u"].values[i], ref.ys["u"][-1], rtol=1e-8)
    _check_network(out, m)
    assert out.attrs["initial_u"] == 0.44249296


def test_a_sweep_file_keeps_the_network_and_an_array_field(tmp_path):
    m = _reaction()
    path = tmp_path / "r.nc"
    out = ds.sweep(m, ds.GridSweep({"D": [0.05, 0.1]}), t0=0.0, t1=0.5, save="final",
                   output=path)  # fmt: skip
    with xr.open_dataset(path, engine="h5netcdf") as f:
        assert f["k"].dims == ("x",)  # a field on the grid takes its dims and coordinate
        np.testing.assert_array_equal(f["k"].values, np.asarray(m.k))
        np.testing.assert_array_equal(f["x"].values, np.asarray(m.grid.coords["x"]))
        assert f["k"].attrs["units"] == "1/s" and f["k"].attrs["long_name"] == "decay rate"
        assert f["term.w"].dims == ("term.w_dim0", "term.w_dim1")
        np.testing.assert_array_equal(f["term.w"].values, np.asarray(m.term.w))
        np.testing.assert_array_equal(f["u"].values, out["u"].values)


def test_simulate_and_ensemble_outputs_round_trip_through_netcdf(tmp_path):
    m = UDE()
    one = ds.simulate(m, t0=0.0, t1=1.0).to_xarray()
    _check_network(one, m)
    lanes = ds.simulate_ensemble(m, {"alpha": jnp.array(ALPHA)}, t0=0.0, t1=1.0).to_xarray()
    _check_network(lanes, m)  # the same for every lane: stored once, without the lanes
    assert lanes["alpha"].dims == ("batch",)
    for name, data in (("one", one), ("lanes", lanes)):
        data.to_netcdf(tmp_path / f"{name}.nc", engine="h5netcdf")
        with xr.open_dataset(tmp_path / f"{name}.nc", engine="h5netcdf") as f:
            xr.testing.assert_identical(f.load(), data)
    # A field that differs between the lanes keeps the lanes axis.
    r = _reaction()
    ks = jnp.stack([r.k, 2 * r.k])
    data = ds.simulate_ensemble(r, {"k": ks}, t0=0.0, t1=0.1).to_xarray()
    assert data["k"].dims == ("batch", "x")
    np.testing.assert_array_equal(data["k"].values, np.asarray(ks))
    assert data.attrs["D"] == pytest.approx(0.1)


SCALARS = "only scalar parameters and initial values can be swept"


@pytest.mark.parametrize(
    ("key", "values", "what"),
    [
        ("net", lambda m: [m.net, _mlp(jax.nn.relu)], r"got a list of MLP$"),
        ("k", lambda m: [m.k, 2 * m.k], r"got shape \(2, 8\)$"),
        ("net", lambda m: [0.1, 0.2], r"UDE's 'net' is a sub-module \(MLP\) \(held fixed"),
        ("k", lambda m: [0.1, 0.2], r"Reaction's 'k' is an array of shape \(8,\) \(held"),
    ],
)
def test_a_network_or_array_is_not_a_sweep_key(key, values, what):
    """Module or array values are refused by the spec; numbers for such a key by the
    sweep, which knows the model."""
    model = UDE() if key == "net" else _reaction()
    with pytest.raises(ValueError) as info:
        ds.sweep(model, ds.GridSweep({key: values(model)}), t0=0.0, t1=1.0)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert message.startswith(f"GridSweep key {key!r}: ") and SCALARS in message
    assert re.search(what, message)


def test_a_changed_weight_or_activation_is_another_sweep(tmp_path):
    m = UDE()
    path = tmp_path / "u.nc"
    kw = dict(t0=0.0, t1=0.5, save="final", output=path)
    first = ds.sweep(m, ds.GridSweep({"alpha": ALPHA}), **kw)
    again = ds.sweep(m, ds.GridSweep({"alpha": ALPHA}), **kw)  # reused, not recomputed
    assert again.attrs["sweep_hash"] == first.attrs["sweep_hash"]
    nudged = eqx.tree_at(lambda m: m.net.layers[1].bias, m, m.net.layers[1].bias.at[0].add(1e-9))
    relu = eqx.tree_at(lambda m: m.net, m, _mlp(jax.nn.relu))
    for other in (nudged, relu):
        with pytest.raises(SweepOutputError, match="parameters"):
            ds.sweep(other, ds.GridSweep({"alpha": ALPHA}), **kw)


PROBE = """
import jax, jax.numpy as jnp, equinox as eqx
jax.config.update("jax_enable_x64", True)
from difsim._sweep._layout import value_text
class Closure(eqx.Module):
    w: jax.Array
    act: object = eqx.field(static=True, default=jnp.sin)
Closure.__module__ = MODULE  # the class of this test file, defined again
net = eqx.nn.MLP(2, 2, 5, 2, activation=jnp.tanh, key=jax.random.key(0))
print(value_text(net), value_text(Closure(jnp.ones(2))))
"""


def test_the_identity_of_a_module_is_the_same_in_every_process():
    probe = PROBE.replace("MODULE", repr(Closure.__module__))
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    net = eqx.nn.MLP(2, 2, 5, 2, activation=jnp.tanh, key=jax.random.key(0))
    # The static callable's address differs in the other process; its identity does not.
    here = f"{value_text(net)} {value_text(Closure(jnp.ones(2)))}"
    assert run.stdout.split() == here.split()
    assert value_text(Closure(jnp.ones(2), jnp.cos)) != value_text(Closure(jnp.ones(2)))
    # A grid's boundary values are leaves too (they were left out of the identity).
    moved = ds.Grid(shape=(8,), extent=(1.0,), bc=((ds.Dirichlet(1.0), ds.Dirichlet(0.0)),))
    assert value_text(moved) != value_text(ds.Grid.dirichlet(8, 1.0))


def test_the_zarr_store_holds_the_array_parameters_while_the_sweep_runs(tmp_path):
    from difsim._sweep import _zarr_layout
    from difsim._sweep._location import StoreLocation
    from difsim._sweep._options import SweepOptions
    from difsim._sweep._setup import prepare

    m = _reaction()
    setup = prepare(m, ds.GridSweep({"D": [0.05, 0.1]}), SweepOptions(t0=0.0, t1=0.5))
    where = StoreLocation.of(tmp_path / "r.nc", None)
    _zarr_layout.create(where, setup.layout, 2, _zarr_layout.store_attrs(setup.layout, {}))
    with xr.open_zarr(where.local) as store:  # no chunk done yet: the parameters are there
        assert store["k"].dims == ("x",) and store["term.w"].shape == (8, 8)
        np.testing.assert_array_equal(store["k"].values, np.asarray(m.k))
        assert store["term.w"].attrs["difsim_role"] == "parameter"
