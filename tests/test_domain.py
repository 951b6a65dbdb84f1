"""Domain sharding: a 2-D field split over 8 (fake CPU) devices gives the unsharded result."""

import jax
import numpy as np
import pytest

import difsim as ds

from .pde_helpers import ReactionDiffusion


@pytest.fixture(scope="module")
def unsharded():
    return ds.simulate(ReactionDiffusion(), t0=0.0, t1=0.5, save=3, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("mesh_shape", [None, (4, 2)])
def test_sharded_equals_unsharded(unsharded, mesh_shape):
    model = ReactionDiffusion()
    sharding = ds.domain_sharding(model.grid, mesh_shape=mesh_shape)
    assert len(jax.devices()) == 8 and sharding.mesh.size == 8
    sol = ds.simulate(model, t0=0.0, t1=0.5, save=3, rtol=1e-8, atol=1e-8, sharding=sharding)
    for name in ("u", "v"):
        np.testing.assert_allclose(sol.ys[name], unsharded.ys[name], rtol=0, atol=1e-12)
        # The fields really are split: each device holds 1/8 of the saved field.
        shards = sol.ys[name].addressable_shards
        assert len(shards) == 8
        assert shards[0].data.size * 8 == sol.ys[name].size
    assert int(sol.num_steps) == int(unsharded.num_steps)


def test_default_mesh_uses_leading_axes():
    grid = ds.Grid.periodic((32, 16), 1.0)
    assert dict(ds.domain_sharding(grid).mesh.shape) == {"x": 8, "y": 1}
    assert dict(ds.domain_sharding(ds.Grid.periodic((4, 16))).mesh.shape) == {"x": 4, "y": 2}


def test_bad_sharding_inputs_name_the_culprit():
    grid = ds.Grid.periodic((30, 16), 1.0)
    with pytest.raises(ValueError, match="axis 'x' \\(30 points\\) does not split into 4"):
        ds.domain_sharding(grid, mesh_shape=(4, 2))
    with pytest.raises(ValueError, match="does not use the 8 devices"):
        ds.domain_sharding(grid, mesh_shape=(2, 2))
    with pytest.raises(ValueError, match="one entry per grid axis"):
        ds.domain_sharding(grid, mesh_shape=(8,))
    with pytest.raises(TypeError, match="sharding must be a jax.sharding.NamedSharding"):
        ds.simulate(ReactionDiffusion(), t0=0.0, t1=0.1, sharding="x")
