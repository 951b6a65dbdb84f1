"""What a repeated sweep reuses (`difsim._sweep._memo`, `_setup.prepare`): never a result
that another input would change."""

import gc

import equinox as eqx
import jax.numpy as jnp
import numpy as np

import difsim as ds
from difsim._sweep import _memo, _setup
from difsim._sweep._options import SweepOptions

OPTIONS = SweepOptions(t0=0.0, t1=1.0, rtol=1e-8, atol=1e-8, progress=False)


class _Holder(eqx.Module):
    value: object


def test_modules_of_jax_arrays_are_keyed_once_by_identity():
    module = _Holder(jnp.arange(3.0))
    key = _memo.freeze(module)
    assert _memo.freeze(module) is key  # remembered, not hashed again
    # An equal module elsewhere has an equal key (by content), and a different one does not.
    assert _memo.freeze(_Holder(jnp.arange(3.0))) == key
    assert hash(_memo.freeze(_Holder(jnp.arange(3.0)))) == hash(key)
    assert _memo.freeze(_Holder(jnp.arange(3.0) + 1)) != key
    ident = id(module)
    del module
    gc.collect()
    assert ident not in _memo._MODULE_KEYS  # forgotten with the module


def test_numpy_leaves_written_in_place_give_a_new_key():
    values = np.arange(3.0)
    module = _Holder(values)
    before = _memo.freeze(module)
    values[0] = 7.0  # the module's leaf changes under it: an identity memo would be stale
    assert _memo.freeze(module) != before
    assert id(module) not in _memo._MODULE_KEYS


def test_new_points_share_the_model_part_and_get_their_own_layout():
    _setup._PARTS.clear()
    model = ds.models.Lorenz()
    first = _setup.prepare(model, ds.ZipSweep({"rho": [1.0, 2.0]}), OPTIONS)
    # Same keys, other values, dimension name and length: one part, three setups.
    other = _setup.prepare(model, ds.ZipSweep({"rho": [1.0, 2.0, 3.0]}, dim="run"), OPTIONS)
    signed = _setup.prepare(model, ds.ZipSweep({"rho": [-0.0, 2.0]}), OPTIONS)
    again = _setup.prepare(model, ds.ZipSweep({"rho": [1.0, 2.0]}), OPTIONS)
    assert len(_setup._PARTS) == 1 and again is first
    assert other.layout.dims == ("run",) and other.layout.shape == (3,)
    np.testing.assert_array_equal(other.layout.coords["rho"][1], [1.0, 2.0, 3.0])
    assert other.layout.coords["rho"][0] == ("run",)
    assert other.layout.attrs["sweep_size"] == 3 and first.layout.attrs["sweep_size"] == 2
    # -0.0 and 0.0 compare equal as numbers but are other points (bit for bit).
    assert signed is not first and signed.sweep_hash != first.sweep_hash
    hashes = {s.sweep_hash for s in (first, other, signed)}
    assert len(hashes) == 3
    # Each setup's hash is the one a fresh preparation gives.
    _setup._PARTS.clear()
    fresh = _setup.prepare(model, ds.ZipSweep({"rho": [1.0, 2.0, 3.0]}, dim="run"), OPTIONS)
    assert fresh.sweep_hash == other.sweep_hash and fresh.layout.attrs == other.layout.attrs


def test_caller_attributes_are_per_sweep_not_per_part():
    _setup._PARTS.clear()
    model, spec = ds.models.Lorenz(), ds.ZipSweep({"rho": [1.0, 2.0]})
    plain = _setup.prepare(model, spec, OPTIONS)
    tagged = _setup.prepare(model, spec, SweepOptions(**{**_kw(OPTIONS), "attrs": {"run": "a"}}))
    assert len(_setup._PARTS) == 1 and tagged is not plain
    assert tagged.layout.attrs["run"] == "a" and "run" not in plain.layout.attrs
    assert tagged.sweep_hash == plain.sweep_hash  # attributes are not results


def _kw(options: SweepOptions) -> dict:
    fields = ("t0", "t1", "rtol", "atol", "progress")
    return {name: getattr(options, name) for name in fields}


def test_values_written_after_a_sweep_are_other_points():
    """A spec keeps the caller's float64 array as it is (no copy): a setup remembers a
    copy of the points, so writing into the array gives another setup, and the first
    one's coordinates stay as they were."""
    _setup._PARTS.clear()
    model, values = ds.models.Lorenz(), np.linspace(0.0, 1.0, 5)
    first = _setup.prepare(model, ds.GridSweep({"rho": values}), OPTIONS)
    values[2] = 0.7
    second = _setup.prepare(model, ds.GridSweep({"rho": values}), OPTIONS)
    assert second is not first and second.sweep_hash != first.sweep_hash
    np.testing.assert_array_equal(second.layout.coords["rho"][1], values)
    np.testing.assert_array_equal(first.layout.coords["rho"][1], np.linspace(0.0, 1.0, 5))
    again = _setup.prepare(model, ds.GridSweep({"rho": np.linspace(0.0, 1.0, 5)}), OPTIONS)
    assert again is first
    # A value between the first, middle and last (which are compared first) still counts.
    inner = np.linspace(0.0, 1.0, 5)
    inner[1] = np.nextafter(inner[1], 1.0)
    third = _setup.prepare(model, ds.GridSweep({"rho": inner}), OPTIONS)
    assert third is not first and third.sweep_hash != first.sweep_hash


def test_coordinates_of_new_points_keep_the_models_units_and_names():
    """The keys' coordinate attributes come from the model once per part; a sweep over
    new points still labels its coordinates from the model's parameter and state info."""
    _setup._PARTS.clear()
    model = ds.models.Lorenz()
    rho, x = model.parameter_info("rho"), dict(model.initial_state().info)["x"]
    for values in ([1.0, 2.0], [1.5, 2.5, 3.5]):
        spec = ds.GridSweep({"rho": values, "state.x": [0.5, 1.0]})
        layout = _setup.prepare(model, spec, OPTIONS).layout
        assert layout.coords["rho"][2] == {"units": rho["units"], "long_name": rho["description"]}
        assert layout.coords["state.x"][2] == {
            "units": x.units,
            "long_name": f"initial {x.description}",
        }
        np.testing.assert_array_equal(layout.coords["rho"][1], values)
    assert len(_setup._PARTS) == 1
