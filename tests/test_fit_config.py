"""The [fit] config section: schema checks and error messages (no fitting)."""

import tomllib
from pathlib import Path

import pytest

from difsim._config._load import load_config

from .config_helpers import config_error
from .helpers import with_key

ROOT = Path(__file__).resolve().parents[1]

FIT = {
    "model": {"name": "sir", "parameters": {"beta": 1.0, "gamma": 0.5}},
    "fit": {
        "data": str(ROOT / "data" / "influenza.nc"),
        "t0": 0.0,
        "free": {"beta": "positive", "gamma": [0.01, 5.0]},
        "observe": {"confined_to_bed": "I"},
    },
    "output": {"path": "runs/flu.nc"},
}


def _fit_with(path: str, value):
    """FIT with the dotted key `path` set to `value` (or removed, for `...`)."""
    return with_key(FIT, path, value)


FIT_ERROR_CASES = [
    ("fit.data", ..., "fit.data", ["[fit] data", "missing required key"]),
    ("fit.data", "no/such/file.nc", "fit.data", ["[fit] data", "'no/such/file.nc' does not"]),
    (
        "fit.optimizer",
        "adamm",
        "fit.optimizer",
        ["[fit] optimizer", "'levenberg_marquardt'", "'lbfgs'", "'adam'?"],
    ),
    ("fit.noise", "poisson", "fit.noise", ["[fit] noise", "'gaussian', 'lognormal'"]),
    ("fit.adjoint", "direct", "fit.adjoint", ["[fit] adjoint", "'checkpoint', 'forward'"]),
    (
        "fit.free.alpha",
        "positive",
        "fit.free.alpha",
        ["[fit.free] alpha", "SIR has no parameter 'alpha'", "'beta', 'gamma'", "'S', 'I', 'R'"],
    ),
    ("fit.free.state.X", "positive", "fit.free.state.X", ["no state variable 'X'", "'S'"]),
    ("fit.free.beta", "log", "fit.free.beta", ["[fit.free] beta", '"positive"', "[lower, upper]"]),
    ("fit.free.beta", [2.0, 1.0], "fit.free.beta", ["[fit.free] beta", "lower"]),
    ("fit.free", {}, "fit.free", ["nothing to fit"]),
    ("time", {"t1": 10.0}, "time", ["[time]", "from the data", "remove [time]"]),
    ("sweep", {"beta": [1.0, 2.0]}, "sweep", ["[sweep] and [fit] cannot be combined"]),
    (
        "fit.observe.confined_to_bed",
        "Q",
        "fit.observe.confined_to_bed",
        ["[fit.observe] confined_to_bed", "'Q' is not a state variable of SIR", "'S', 'I', 'R'"],
    ),
    (
        "fit.observe.in_bed",
        "I",
        "fit.observe.in_bed",
        ["[fit.observe] in_bed", "no variable 'in_bed'", "'confined_to_bed'"],
    ),
    ("fit.sigma.cases", 2.0, "fit.sigma.cases", ["not an observed", "'confined_to_bed'"]),
    ("fit.weights.confined_to_bed", "x", "fit.weights.confined_to_bed", ["a positive number"]),
    ("fit.seed", 3, "fit.seed", ["[fit] seed", "multistart, batch_size or a fractional"]),
    ("fit.patience", 3, "fit.patience", ["[fit] patience", "validation only"]),
    ("fit.validation", 1.5, "fit.validation", ["a fraction in (0, 1) or a list"]),
    ("fit.clip", 1.0, "fit.clip", ["[fit] clip", "optax (adam,"]),
    ("fit.free.bet[0]", "positive", "fit.free.bet[0]", ["SIR has no parameter 'bet[0]'"]),
    ("fit.multiple_shooting", 1, "fit.multiple_shooting", [">= 2", "1 (an integer)"]),
    ("fit.control", "rho", "fit.control", ["SIR has no parameter 'rho'"]),
    ("fit.steps", -1, "fit.steps", ["an integer >= 0"]),
    ("fit.time", "hour", "fit.time", ["no dimension 'hour'", "day"]),
    ("solver.dt0", 0.1, "solver.dt0", ["adaptive pid controller"]),
]


@pytest.mark.parametrize(
    "path, value, key, fragments",
    FIT_ERROR_CASES,
    ids=[f"{c[0]}={c[1]!r}"[:40] for c in FIT_ERROR_CASES],
)
def test_fit_errors_name_key_and_allowed_values(path, value, key, fragments):
    error = config_error(_fit_with(path, value))
    assert error.key == key
    for fragment in fragments:
        assert fragment in str(error), (fragment, str(error))


def test_fit_config_parses_round_trips_and_defaults_to_float64():
    exp = load_config(FIT)
    assert exp.time is None and exp.sweep is None
    # A fit's [solver] defaults: float64 and fewer steps; given values still win.
    assert (exp.solver.dtype, exp.solver.max_steps) == ("float64", 4096)
    assert load_config(FIT, overrides={"solver.dtype": "float32"}).solver.dtype == "float32"
    assert exp.fit.free == {"beta": "positive", "gamma": [0.01, 5.0]}
    assert (exp.fit.noise, exp.fit.optimizer, exp.fit.t0) == ("gaussian", "trust_region", 0.0)
    assert load_config(exp.to_dict()) == exp
    assert load_config(tomllib.loads(exp.to_toml())) == exp
    kwargs = exp.fit.kwargs()
    assert kwargs["free"] == {"beta": "positive", "gamma": (0.01, 5.0)}
    assert kwargs["observe"] == {"confined_to_bed": "I"} and kwargs["weights"] is None
    # A dotted `state.S = ...` in [fit.free] means the quoted "state.S".
    dotted = load_config(_fit_with("fit.free.state", {"S": "positive"}))
    assert "state.S" in dotted.fit.free
    # Multistart: n, a key from the seed, the scale.
    many = load_config(FIT, overrides={"fit.multistart": 4, "fit.seed": 2}).fit.kwargs()
    assert many["multistart"][0] == 4 and many["multistart"][2] == 0.3


def test_data_values_are_checked_when_the_config_is(tmp_path):
    # `difsim check` used to read only the data's names; the run refused bad values later.
    import xarray as xr

    data = xr.open_dataset(ROOT / "data" / "influenza.nc").load()
    order = [1, 0, *range(2, data.sizes["day"])]
    bed = data.confined_to_bed.values.astype(float)
    bed[3] = float("inf")
    cases = {
        "unsorted.nc": (data.isel(day=order), "strictly increasing"),
        "infinite.nc": (data.assign(confined_to_bed=("day", bed)), "infinite value"),
    }
    for name, (broken, fragment) in cases.items():
        broken.to_netcdf(tmp_path / name)
        error = config_error(_fit_with("fit.data", str(tmp_path / name)))
        assert error.key == "fit.data" and fragment in str(error), str(error)
