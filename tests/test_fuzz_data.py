"""Fuzzing the data files a fit reads (issue 14): generated CSV and netCDF files with bad
columns, NaNs, units, shapes and bytes, named by a `[fit]` config and checked with `difsim
check`. Every case either succeeds or exits 2 with one line naming the culprit, and no file
is changed."""

import shutil
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr
from hypothesis import event, given, strategies as st

from difsim._fit._data import coordinate_values, fit_data, observation_map, read_data
from difsim.models import LotkaVolterra

from .fuzz_helpers import TEXT, assert_clean_error, dumps, fuzz_settings, run_cli, snapshot

NAMES = st.sampled_from(
    ["year", "time", "t", "hare", "lynx", "prey", "predator", "x", "", "Unnamed: 0"]
)
CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**20), 10**20),
    st.sampled_from(["", "nan", "NA", "inf", "-", "1,5", '"2"', "1e400", "x"]),
    TEXT.filter(lambda s: "\n" not in s and "\r" not in s),
)


@st.composite
def csv_files(draw) -> bytes:
    """A header row and data rows, possibly ragged, possibly not CSV at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=64))
    columns = draw(st.lists(NAMES | TEXT, min_size=0, max_size=4))
    rows = draw(
        st.lists(
            st.lists(CELLS, min_size=max(0, len(columns) - 1), max_size=len(columns) + 1),
            max_size=6,
        )
    )
    lines = [",".join(columns)] + [",".join(str(c) for c in row) for row in rows]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass")


@st.composite
def netcdf_datasets(draw) -> xr.Dataset:
    """Observations over a dimension that may be misnamed, empty, unsorted or duplicated,
    with variables that may have extra axes, NaNs, text, or odd units."""
    dim = draw(NAMES.filter(bool))
    n = draw(st.integers(0, 5))
    times = draw(st.lists(st.floats(-1e3, 1e3) | st.just(float("nan")), min_size=n, max_size=n))
    data_vars = {}
    for name in draw(st.lists(NAMES.filter(lambda s: s and s != dim), max_size=3, unique=True)):
        shape_kind = draw(st.sampled_from(["series", "2d", "scalar", "text"]))
        if shape_kind == "series":
            values = draw(
                st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n, max_size=n)
            )
            var = xr.Variable((dim,), np.asarray(values, float))
        elif shape_kind == "2d":
            var = xr.Variable((dim, "k"), np.ones((n, 2)))
        elif shape_kind == "scalar":
            var = xr.Variable((), 1.0)
        else:
            var = xr.Variable((dim,), np.asarray(["a"] * n, dtype=object))
        var.attrs["units"] = draw(TEXT.filter(lambda s: "\x00" not in s))  # HDF5 forbids NUL
        data_vars[name] = var
    coords = {dim: np.asarray(times, float)} if draw(st.booleans()) else {}
    return xr.Dataset(data_vars, coords)


CONFIG = {
    "model": {"name": "lotka_volterra"},
    "fit": {"free": {"alpha": "positive"}},
    "output": {"path": "runs/fit.nc"},
}
GOOD_OBSERVE = {"hare": "prey", "lynx": "predator"}


LYNX_HARE = xr.load_dataset(Path(__file__).resolve().parents[1] / "data" / "lynx_hare.nc")
PERTURBATIONS = [
    "none", "nan", "inf", "negative", "zero", "huge", "unsorted", "duplicate_time",
    "drop_lynx", "rename_hare", "extra_column", "units", "two_d", "empty", "int", "text",
    "time_nan", "single_row",
]  # fmt: skip


@st.composite
def near_valid(draw) -> xr.Dataset:
    """The shipped lynx-hare data with one or two things wrong (or nothing)."""
    data = LYNX_HARE.copy(deep=True)
    for kind in draw(st.lists(st.sampled_from(PERTURBATIONS), min_size=1, max_size=2)):
        i = draw(st.integers(0, data.sizes.get("year", 1) - 1)) if data.sizes.get("year") else 0
        var = draw(st.sampled_from(["hare", "lynx"]))
        if var not in data or data.sizes.get("year", 0) == 0:
            continue
        values, dims = data[var].values.astype(float), data[var].dims
        if kind in ("nan", "inf", "negative", "zero", "huge"):
            values[i] = {"nan": np.nan, "inf": np.inf, "negative": -5.0, "zero": 0.0,
                         "huge": 1e308}[kind]  # fmt: skip
            data[var] = (dims, values, data[var].attrs)
        elif kind == "unsorted":
            data = data.isel(year=np.roll(np.arange(data.sizes["year"]), 1))
        elif kind == "duplicate_time":
            data = data.isel(year=[0, *range(data.sizes["year"])])
        elif kind == "drop_lynx":
            data = data.drop_vars("lynx", errors="ignore")
        elif kind == "rename_hare":
            data = data.rename({var: draw(NAMES.filter(lambda s: s and s not in data))})
        elif kind == "extra_column":
            data["extra"] = (dims, values)
        elif kind == "units":
            data[var].attrs["units"] = draw(TEXT.filter(lambda s: "\x00" not in s))
        elif kind == "two_d":
            data[var] = ((*dims, f"k{len(dims)}"), np.stack([values, values], axis=-1))
        elif kind == "empty":
            data = data.isel(year=slice(0, 0))
        elif kind == "int":
            data[var] = (dims, np.nan_to_num(np.round(values)).astype(np.int64))
        elif kind == "text":
            data[var] = ("year", np.asarray([str(v) for v in values], dtype=object))
        elif kind == "time_nan":
            year = data["year"].values.astype(float)
            year[i] = np.nan
            data = data.assign_coords(year=year)
        elif kind == "single_row":
            data = data.isel(year=[i])
    return data


def _to_csv(data: xr.Dataset) -> bytes:
    return data.to_dataframe().reset_index().to_csv(index=False).encode()


@st.composite
def data_files(draw) -> tuple[str, str, bytes | xr.Dataset]:
    """`(kind, suffix, content)`: mostly CSV as .csv and netCDF as .nc, some bytes."""
    kind = draw(st.sampled_from(["near", "near", "near", "csv", "netcdf", "bytes"]))
    if kind == "near":
        data = draw(near_valid())
        if draw(st.booleans()):
            return "near-csv", ".csv", _to_csv(data) if data.sizes.get("year", 1) else b"year\n"
        return "near-netcdf", ".nc", data
    if kind == "csv":
        return kind, draw(st.sampled_from([".csv"] * 4 + [".nc", ".txt"])), draw(csv_files())
    if kind == "netcdf":
        return kind, ".nc", draw(netcdf_datasets())
    return (
        kind,
        draw(st.sampled_from([".csv", ".nc", ".nc4", ".txt", ""])),
        draw(st.binary(max_size=64)),
    )


def _assemble(path: Path, fit: dict) -> None:
    """What `ds.fit` does with the data before any solve (what `difsim run` would meet
    after a successful check)."""
    model = LotkaVolterra()
    dataset, coord = read_data(path, fit.get("time"))
    values = coordinate_values(dataset, coord)
    pairs = observation_map(dataset, coord, model, fit.get("observe"))
    fit_data(dataset, coord, values, pairs, noise="gaussian", weights=fit.get("weights"),
             sigma=None, dtype=np.float64)  # fmt: skip


@fuzz_settings(300)
@given(
    data=data_files(),
    time=st.none() | st.just("year") | NAMES,
    observe=st.just(GOOD_OBSERVE)
    | st.dictionaries(NAMES | TEXT, st.sampled_from(["prey", "predator", "hare"]), max_size=2),
    weights=st.dictionaries(
        NAMES, st.floats(allow_nan=True) | st.lists(st.floats(0, 2), max_size=3), max_size=1
    ),
)
def test_fit_data_files_check_cleanly(data, time, observe, weights, tmp_path):
    kind, suffix, content = data
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / f"observations{suffix}"
    if isinstance(content, xr.Dataset):
        content.to_netcdf(path, engine="h5netcdf")
    else:
        path.write_bytes(content)
    config = {**CONFIG, "fit": {**CONFIG["fit"], "data": path.name}}
    for key, value in (("time", time), ("observe", observe), ("weights", weights)):
        if value:
            config["fit"][key] = value
    config_path = folder / "fit.toml"
    config_path.write_text(dumps(config))
    before = snapshot(folder)
    code, out, err = run_cli("check", str(config_path))
    assert snapshot(folder) == before
    if code != 0:
        event(f"{kind}{suffix}: check refuses")
        assert_clean_error(code, err, config_path)
        assert "[fit" in err, err  # the data's problems are the [fit] section's
    else:
        # Passed the check: the fit's own data checks (what `difsim run` meets before any
        # solve) accept the data too: the check reads the values as the fit does.
        _assemble(path, config["fit"])
        event(f"{kind}{suffix}: accepted")
    shutil.rmtree(folder)
