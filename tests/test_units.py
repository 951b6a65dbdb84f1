"""Every unit string the zoo declares parses as a unit in pint (cf-xarray's UDUNITS-style
registry) and, where the UDUNITS-2 library is installed, in UDUNITS itself."""

import ctypes
import ctypes.util
import dataclasses
import functools

import pytest
from cf_xarray.units import units as cf_units

import difsim as ds
from difsim._core import model_observables
from difsim._io import var_attrs
from difsim.models import MODELS


@functools.cache
def _udunits():
    """`parse(text) -> bool` through libudunits2, or `None` where it is not installed."""
    name = ctypes.util.find_library("udunits2")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.ut_read_xml.restype = ctypes.c_void_p
    lib.ut_read_xml.argtypes = [ctypes.c_char_p]
    lib.ut_set_error_message_handler(lib.ut_ignore)
    system = lib.ut_read_xml(None)
    if not system:
        return None
    lib.ut_parse.restype = ctypes.c_void_p
    lib.ut_parse.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    return lambda text: bool(lib.ut_parse(system, text.encode(), 0))


def unit_problem(text) -> str | None:
    """Why `text` is not a valid unit string (`None` if it is)."""
    if not isinstance(text, str) or not text.strip():
        return f"no units ({text!r})"
    try:
        cf_units.parse_units(text)
    except Exception as error:  # pint raises several kinds
        return f"{text!r}: pint: {type(error).__name__}: {error}"
    udunits = _udunits()
    if udunits is not None and not udunits(text):
        return f"{text!r}: UDUNITS-2 does not parse it"
    return None


def _declared_units(name: str, cls) -> dict[str, object]:
    """`{where: units}` of everything model class `cls` declares."""
    model = cls()
    out: dict[str, object] = {f"{name}.time_units": cls.time_units}
    for var, info in model.initial_state().info:
        out[f"{name}.state.{var}"] = info.units
    for pname in cls.parameter_names():
        if not isinstance(getattr(model, pname), ds.Grid):
            out[f"{name}.{pname}"] = cls.parameter_info(pname)["units"]
    for grid in model.grids():
        out[f"{name}.grid"] = grid.units
    for inv, info in cls.invariants.items():
        out[f"{name}.invariant.{inv}"] = info.units
    for obs, info in model_observables(cls).items():
        out[f"{name}.observable.{obs}"] = info.units
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_zoo_unit_is_declared_and_valid(name):
    problems = {
        where: why
        for where, units in _declared_units(name, MODELS[name]).items()
        if (why := unit_problem(units)) is not None
    }
    assert not problems, problems


@pytest.mark.parametrize(
    "text", ["thousand_pelts", "person", "length^2/time", "1/time", "", None, "days since"]
)
def test_the_check_rejects_what_the_zoo_used_to_say(text):
    assert unit_problem(text) is not None


def test_the_check_accepts_udunits_spellings():
    for text in ("1", "m", "m/s", "m^2/s", "m2 s-1", "1/(year kcount)", "rad", "count", "K/s"):
        assert unit_problem(text) is None, text
    # Dimensions, not just syntax: a rate of people per day is a frequency.
    frequency = cf_units.parse_units("1/s").dimensionality
    assert cf_units.parse_units("count/day").dimensionality == frequency


def test_an_angle_must_be_in_angle_units():
    info = dataclasses.replace(ds.VarInfo(units="m"), angle=True)
    with pytest.raises(ValueError, match="an angle's units"):
        var_attrs(info)
