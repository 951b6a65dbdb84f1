"""Pictures of fields on 2-D/3-D grids: snapshot panels at chosen times, and animations."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from difsim._io import atomic_write
from difsim._plot._figure import label


def _spatial(da: xr.DataArray) -> list[str]:
    return [d for d in da.dims if d != "time"]


def _as_plane(da: xr.DataArray) -> xr.DataArray:
    """A 2-D slice of a ≥2-D field (the middle of any third axis), axes (y, x) for imshow."""
    dims = _spatial(da)
    for dim in dims[2:]:
        da = da.isel({dim: da.sizes[dim] // 2})
    return da.transpose(*([d for d in da.dims if d == "time"] + [dims[1], dims[0]]))


def _time_indices(n: int, times: Any, time: np.ndarray) -> list[int]:
    if times is None:
        count = min(n, 4)
        return sorted({int(round(i)) for i in np.linspace(0, n - 1, count)})
    if isinstance(times, int):
        return sorted({int(round(i)) for i in np.linspace(0, n - 1, max(1, min(n, times)))})
    # Explicit times: the nearest saved time to each.
    return [int(np.argmin(np.abs(time - float(t)))) for t in times]


def field_variables(dataset: xr.Dataset) -> list[str]:
    """Names of the variables that are fields on a ≥2-D grid (over `time`)."""
    return [
        name
        for name, da in dataset.data_vars.items()
        if "time" in da.dims and len(_spatial(da)) >= 2
    ]


def plot_snapshots(
    dataset: xr.Dataset,
    path: str | Path | None = None,
    *,
    times: int | Sequence[float] | None = None,
    variables: Sequence[str] | None = None,
):
    """Panels of each ≥2-D field at a few saved times (one row per variable).

    **Arguments:**

    - `dataset`: an unbatched simulation Dataset (from `Solution.to_xarray()`).
    - `path`: save the figure there (PNG, 120 dpi) and return `None`.
    - `times`: how many evenly spaced snapshots (default 4), or the times to show (the
      nearest saved times are drawn).
    - `variables`: which fields (default: every ≥2-D field). A 3-D field shows its middle
      slice along the third axis.

    Every panel of one variable shares a colour scale, so panels compare directly.

    **Example:**

    ```python
    import numpy as np
    import difsim as ds

    model = ds.models.Heat(grid=ds.Grid((16, 16), extent=1.0))
    field = ds.simulate(model, t0=0.0, t1=0.01, save=5).to_xarray()
    fig = ds.plot_snapshots(field, times=3)  # 3 panels of u, one colour scale, a colour bar
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert len(images) == 3
    np.testing.assert_allclose(images[0].get_array(), field["u"].isel(time=0).T, rtol=1e-6)
    ```
    """
    from matplotlib.figure import Figure

    names = list(variables) if variables is not None else field_variables(dataset)
    if not names:
        raise ValueError("the dataset has no field on a 2-D (or 3-D) grid to draw")
    for name in names:
        if name not in dataset.data_vars:
            raise ValueError(f"no variable {name!r}; fields are {field_variables(dataset)}")
    time = np.asarray(dataset["time"])
    index = _time_indices(time.size, times, time)
    ncol = len(index)
    fig = Figure(figsize=(2.6 * ncol + 1.0, 2.5 * len(names) + 0.6), layout="constrained")
    axes = fig.subplots(len(names), ncol, squeeze=False)
    time_units = dataset["time"].attrs.get("units", "")
    time_units = "" if time_units == "1" else time_units  # dimensionless: no "t = 5 1"
    for row, name in zip(axes, names):
        da = _as_plane(dataset[name])
        y, x = da.dims[-2], da.dims[-1]
        frames = np.asarray(da.isel(time=index))
        finite = frames[np.isfinite(frames)]
        vmin, vmax = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
        extent = _extent(da[x].values, da[y].values)
        for ax, frame, i in zip(row, frames, index):
            image = ax.imshow(
                frame, origin="lower", extent=extent, vmin=vmin, vmax=vmax, cmap="viridis",
                aspect="equal", interpolation="nearest",
            )  # fmt: skip
            ax.set_title(f"{name}, t = {time[i]:.4g} {time_units}".rstrip(), fontsize=8)
            ax.set_xlabel(label(dataset[x]), fontsize=8)
            ax.set_ylabel(label(dataset[y]), fontsize=8)
            ax.tick_params(labelsize=7)
        fig.colorbar(image, ax=list(row), shrink=0.8, label=label(dataset[name]))
    fig.suptitle(dataset.attrs.get("model", ""))
    if path is not None:
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120))
        return None
    return fig


def _extent(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    # Pixel edges, not centres: half a spacing beyond the first and last coordinates.
    dx = (x[-1] - x[0]) / max(len(x) - 1, 1)
    dy = (y[-1] - y[0]) / max(len(y) - 1, 1)
    return (x[0] - dx / 2, x[-1] + dx / 2, y[0] - dy / 2, y[-1] + dy / 2)


def animate(
    dataset: xr.Dataset,
    path: str | Path,
    *,
    variable: str | None = None,
    fps: int = 10,
    max_frames: int = 200,
) -> Path:
    """Write an animation of one field over the saved times: GIF (Pillow) or MP4 (ffmpeg).

    A 2-D/3-D field is drawn as an image (3-D: middle slice); a 1-D field as a line.

    **Arguments:**

    - `dataset`: an unbatched simulation Dataset.
    - `path`: output file; the suffix picks the format (`.gif` or `.mp4`).
    - `variable`: which field (default: the first one with spatial axes).
    - `fps`: frames per second; `max_frames`: at most this many (evenly thinned) frames.

    **Returns:** the path written.

    **Example:**

    ```python
    import tempfile
    from pathlib import Path

    from PIL import Image

    import difsim as ds

    model = ds.models.Heat(grid=ds.Grid(32, extent=1.0))
    field = ds.simulate(model, t0=0.0, t1=0.01, save=6).to_xarray()
    with tempfile.TemporaryDirectory() as folder:
        path = ds.animate(field, Path(folder) / "heat.gif", fps=5)  # one frame per saved time
        with Image.open(path) as gif:
            assert gif.n_frames == field.sizes["time"] == 6
    ```
    """
    from matplotlib import animation
    from matplotlib.figure import Figure

    path = Path(path)
    if path.suffix not in (".gif", ".mp4"):
        raise ValueError(f"animation path must end in .gif or .mp4, got {str(path)!r}")
    candidates = [n for n, da in dataset.data_vars.items() if "time" in da.dims and _spatial(da)]
    if variable is None:
        if not candidates:
            raise ValueError("the dataset has no field over space and time to animate")
        variable = candidates[0]
    if variable not in candidates:
        raise ValueError(f"cannot animate {variable!r}; fields are {candidates}")
    da = dataset[variable]
    time = np.asarray(dataset["time"])
    frames = np.unique(np.linspace(0, time.size - 1, min(time.size, max_frames)).astype(int))
    fig = Figure(figsize=(5, 4))
    ax = fig.subplots()
    values = np.asarray(da)
    finite = values[np.isfinite(values)]
    vmin, vmax = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    if len(_spatial(da)) >= 2:
        da = _as_plane(da)
        y, x = da.dims[-2], da.dims[-1]
        data = np.asarray(da)
        artist = ax.imshow(
            data[0], origin="lower", extent=_extent(da[x].values, da[y].values),
            vmin=vmin, vmax=vmax, cmap="viridis", aspect="equal", interpolation="nearest",
        )  # fmt: skip
        fig.colorbar(artist, ax=ax, label=label(dataset[variable]))
        ax.set_xlabel(label(dataset[x]))
        ax.set_ylabel(label(dataset[y]))

        def draw(i):
            artist.set_data(data[i])
            ax.set_title(f"t = {time[i]:.4g}")
            return (artist,)
    else:
        (dim,) = _spatial(da)
        data = np.asarray(da.transpose("time", dim))
        (artist,) = ax.plot(da[dim].values, data[0])
        ax.set_ylim(vmin - 0.05 * (vmax - vmin), vmax + 0.05 * (vmax - vmin))
        ax.set_xlabel(label(dataset[dim]))
        ax.set_ylabel(label(dataset[variable]))

        def draw(i):
            artist.set_ydata(data[i])
            ax.set_title(f"t = {time[i]:.4g}")
            return (artist,)

    movie = animation.FuncAnimation(fig, draw, frames=frames, blit=False)
    if path.suffix == ".gif":
        writer = animation.PillowWriter(fps=fps)
    else:
        if not animation.FFMpegWriter.isAvailable():
            raise RuntimeError("writing .mp4 needs ffmpeg on the PATH; use a .gif path instead")
        writer = animation.FFMpegWriter(fps=fps)
    atomic_write(path, lambda tmp: movie.save(tmp, writer=writer, dpi=80))
    return path
