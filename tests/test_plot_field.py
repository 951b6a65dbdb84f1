"""Pictures of fields: snapshot panels of 2-D fields and GIF animations."""

import numpy as np
import pytest
from PIL import Image

import difsim as ds

from .pde_helpers import Heat1D, ReactionDiffusion


@pytest.fixture(scope="module")
def dataset2d():
    return ds.simulate(ReactionDiffusion(), t0=0.0, t1=0.5, save=6).to_xarray()


def test_outputs_carry_grid_coordinates(dataset2d):
    grid = ReactionDiffusion().grid
    assert dataset2d["u"].dims == ("time", "x", "y")
    np.testing.assert_array_equal(dataset2d["x"], grid.axis("x"))
    np.testing.assert_array_equal(dataset2d["y"], grid.axis("y"))
    assert dataset2d.attrs["grid"] == grid.describe()


def test_snapshots_png(dataset2d, tmp_path):
    path = tmp_path / "snap.png"
    ds.plot(dataset2d, path)  # ≥2-D fields: ds.plot draws snapshot panels
    image = Image.open(path)
    assert image.size[0] > 800 and image.size[1] > 400
    fig = ds.plot_snapshots(dataset2d, times=[0.0, 0.5], variables=["v"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == ["v, t = 0", "v, t = 0.5"]
    # Both panels of one variable share a colour scale spanning the data.
    limits = {ax.images[0].get_clim() for ax in fig.axes if ax.images}
    assert len(limits) == 1
    (low, high) = limits.pop()
    assert np.isclose(high, float(dataset2d["v"].isel(time=[0, -1]).max()))
    with pytest.raises(ValueError, match="no variable 'w'"):
        ds.plot_snapshots(dataset2d, variables=["w"])


def test_animation_gif(dataset2d, tmp_path):
    path = ds.animate(dataset2d, tmp_path / "u.gif", variable="u", fps=5)
    with Image.open(path) as gif:
        assert gif.n_frames == dataset2d.sizes["time"]
    line = ds.simulate(Heat1D(), t0=0.0, t1=0.01, save=4).to_xarray()
    with Image.open(ds.animate(line, tmp_path / "line.gif")) as gif:
        assert gif.n_frames == 4
    with pytest.raises(ValueError, match="must end in .gif or .mp4"):
        ds.animate(dataset2d, tmp_path / "u.avi")
    with pytest.raises(ValueError, match="cannot animate 'status'"):
        ds.animate(dataset2d, tmp_path / "s.gif", variable="status")
