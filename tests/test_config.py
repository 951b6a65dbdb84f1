"""Experiment configs: schema checks, error messages, overrides, round trips (no solving)."""

import dataclasses
import math
import tomllib
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from difsim import solvers
from difsim._config._load import (
    SECTIONS,
    ConfigError,
    Experiment,
    apply_overrides,
    load_config,
    parse_override,
)
from difsim._core._solver_defaults import GLOBAL_DEFAULTS
from difsim.models import MODELS

from .helpers import with_key

ROOT = Path(__file__).resolve().parents[1]
BASE = {
    "model": {"name": "lorenz", "parameters": {"rho": 28.0}, "state": {"x": 1.0}},
    "time": {"t0": 0.0, "t1": 1.0, "save": 11},
    "solver": {"name": "tsit5", "rtol": 1e-8, "atol": 1e-8, "dtype": "float64"},
    "output": {"path": "runs/lorenz.nc"},
}


def _with(path: str, value):
    """BASE with the dotted key `path` set to `value` (or removed, for `...`)."""
    return with_key(BASE, path, value)


def _error(raw, **kw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_config(raw, **kw)
    return info.value


def test_valid_config_parses_with_defaults():
    exp = load_config(BASE)
    assert exp.model.cls is MODELS["lorenz"]
    assert exp.model.parameters == {"rho": 28.0}
    assert (exp.time.t0, exp.time.t1, exp.time.save) == (0.0, 1.0, 11)
    assert exp.solver.rtol == 1e-8 and exp.solver.dtype == "float64"
    # Defaults are filled in and resolved, so the stored config says exactly what ran.
    assert exp.solver.controller == "pid"
    assert exp.solver.max_steps == GLOBAL_DEFAULTS["max_steps"] == 16384
    assert exp.solver.adjoint == "checkpoint"
    assert exp.output.plot is True
    assert exp.output.paths() == (Path("runs/lorenz.nc"), Path("runs/lorenz.png"))
    assert exp.output.paths("a/b.nc") == (Path("a/b.nc"), Path("a/b.png"))


def test_stiff_model_defaults_to_kvaerno5():
    exp = load_config({"model": {"name": "robertson"}, "time": {"t1": 1.0}})
    assert exp.solver.name == "kvaerno5"
    assert exp.time.save == 101 and exp.output.path is None


# (dotted key to change, new value, culprit key, fragments every message must contain)
ERROR_CASES = [
    (
        "solver.rtoll",
        1e-6,
        "solver.rtoll",
        ["[solver] rtoll", "unknown key", *map(repr, SECTIONS["solver"].keys), "'rtol'?"],
    ),
    (
        "model.name",
        "lorenzz",
        "model.name",
        ["[model] name", "'lorenzz'", *map(repr, MODELS), "package.module:Class"],
    ),
    (
        "model.parameters.rhoo",
        1.0,
        "model.parameters.rhoo",
        ["[model.parameters] rhoo", "'sigma'", "'rho'", "'beta'"],
    ),
    ("model.state.w", 1.0, "model.state.w", ["[model.state] w", "'x'", "'y'", "'z'"]),
    (
        "solver.name",
        "tsit6",
        "solver.name",
        ["[solver] name", '"tsit6"', *map(repr, solvers.SOLVERS)],
    ),
    (
        "solver.controller",
        "adaptive",
        "solver.controller",
        ["[solver] controller", '"adaptive"', *map(repr, solvers.CONTROLLERS)],
    ),
    (
        "solver.adjoint",
        "magic",
        "solver.adjoint",
        ["[solver] adjoint", '"magic"', *map(repr, solvers.ADJOINTS)],
    ),
    (
        "solver.dtype",
        "float16",
        "solver.dtype",
        ["[solver] dtype", '"float16"', "'float32'", "'float64'"],
    ),
    (
        "solver.rtol",
        "1e-6",
        "solver.rtol",
        ["[solver] rtol", "expected a positive number", '"1e-6" (a string)'],
    ),
    ("solver.atol", -1.0, "solver.atol", ["[solver] atol", "positive number", "-1.0"]),
    (
        "solver.max_steps",
        100.5,
        "solver.max_steps",
        ["[solver] max_steps", "positive integer", "100.5"],
    ),
    ("time.t1", 0.0, "time.t1", ["[time] t1", "greater than t0 = 0.0", "got 0.0"]),
    ("time.t1", ..., "time.t1", ["[time] t1", "missing required key"]),
    ("time.t0", True, "time.t0", ["[time] t0", "expected a number", "true (a boolean)"]),
    (
        "time.save",
        [0.0, 0.5, 0.4],
        "time.save",
        ["[time] save", "strictly increasing", "save[2] = 0.4", "save[1] = 0.5"],
    ),
    (
        "time.save",
        [0.0, 2.0],
        "time.save",
        ["[time] save", "2.0 (save[1])", "outside", "[0.0, 1.0]"],
    ),
    ("time.save", [0.0, "1"], "time.save", ["[time] save", "save[1]", '"1" (a string)']),
    ("time.save", [], "time.save", ["[time] save", "empty"]),
    ("time.save", "all", "time.save", ["[time] save", '"final"', '"all" (a string)']),
    ("time.save", 0, "time.save", ["[time] save", "integer >= 1", "got 0"]),
    (
        "model.parameters.rho",
        "28",
        "model.parameters.rho",
        ["[model.parameters] rho", "expected a number", '"28" (a string)'],
    ),
    (
        "model.parameters.rho",
        [1.0, 2.0],
        "model.parameters.rho",
        ["[model.parameters] rho", "expected a number", "shape (2,)"],
    ),
    ("model.state.x", math.nan, "model.state.x", ["[model.state] x", "finite"]),
    ("output.plot", "fig.jpg", "output.plot", ["[output] plot", ".png", '"fig.jpg"']),
    ("output.path", 3, "output.path", ["[output] path", "a non-empty string", "3 (an integer)"]),
    ("solver.name", "kencarp4", "solver.name", ["[solver] name", "IMEX", "rhs_stiff"]),
    ("solver.name", "euler", "solver.dt0", ["[solver] dt0", "fixed step", "'euler'"]),
    ("solver.controller", "constant", "solver.dt0", ["[solver] dt0", "dt0 = "]),
    ("solver", "tsit5", "solver", ["[solver]", "expected a table", '"tsit5" (a string)']),
    (
        "solvr",
        {"rtol": 1.0},
        "solvr",
        ["[solvr]", "unknown section", "[model]", "[solver]", "'solver'?"],
    ),
    ("sweep", {"rhoo": [1.0]}, "sweep.rhoo", ["[sweep] rhoo", "no such parameter", "'rho'?"]),
    ("sweep", {"x": [1.0]}, "sweep.x", ["[sweep] x", "swept as 'state.x'"]),
    ("sweep", {"rho": [1.0], "sampels": 9}, "sweep.sampels", ["(or the setting 'samples'?)"]),
    (
        "sweep",
        {"sigma": [1.0], "state": {"w": [1.0]}},
        "sweep.state.w",
        ["[sweep.state] w", "no such state variable", "'state.z'"],
    ),
    ("sweep", {"rho": [1.0], "state": 3}, "sweep.state", ["table of state variables"]),
    ("sweep", {"kind": "grid"}, "sweep", ["[sweep]", "nothing to sweep", "linspace"]),
    ("sweep", {"rho": {"linspace": [0.0, 1.0]}}, "sweep.rho", ["linspace takes [start, stop, n]"]),
    ("sweep", {"rho": {"uniform": [0, 1]}}, "sweep.rho", ['kind = "random" or "lhs"']),
    ("sweep", {"kind": "lhs", "rho": [1.0]}, "sweep.rho", ["distribution", "{ normal = "]),
    ("sweep", {"kind": "lhs", "rho": {"normal": [0, 1]}}, "sweep.samples", ["samples = 1000"]),
    ("sweep", {"samples": 10, "rho": [1.0]}, "sweep.samples", ['"lhs" only; this sweep is "grid"']),
    ("sweep", {"seed": 1, "rho": [1.0]}, "sweep.seed", ['"random" or "lhs" only']),
    ("sweep", {"kind": "sobol", "rho": [1.0]}, "sweep.kind", ["unknown value", "'lhs'"]),
    (
        "sweep",
        {"rho": [1.0], "keep": ["x.maxx"]},
        "sweep.keep",
        ["[sweep] keep", "'x.maxx'", "'x.max'?", "'z'"],
    ),
    ("sweep", {"rho": [1.0], "keep": 3}, "sweep.keep", ['"trajectory"', "3 (an integer)"]),
    ("sweep", {"rho": [1.0], "memory_budget": "1 lot"}, "sweep.memory_budget", ["'512MiB'"]),
    ("sweep", {"rho": [1.0], "chunk_size": 0}, "sweep.chunk_size", ["positive integer"]),
    (
        "sweep",
        {"kind": "zip", "rho": [1.0, 2.0], "beta": [1.0]},
        "sweep",
        ["zip", "rho: 2, beta: 1"],
    ),
    ("sweep", {"rho": [1.0], "dim": "run"}, "sweep.dim", ["remove dim"]),
    ("sweep", {"kind": "zip", "rho": [1.0], "dim": "rho"}, "sweep.dim", ["also a swept key"]),
    ("output.overwrite", "yes", "output.overwrite", ["[output] overwrite", "true or false"]),
    ("model.name", "math:sqrt", "model.name", ["[model] name", "not a difsim.Model subclass"]),
    (
        "model.name",
        "no_such_module_xyz:M",
        "model.name",
        ["[model] name", "cannot import module 'no_such_module_xyz'"],
    ),
    ("model.name", "difsim.models:Nope", "model.name", ["[model] name", "no attribute 'Nope'"]),
    ("model.name", "difsim.models:", "model.name", ["package.module:Class"]),
]


@pytest.mark.parametrize(
    "path, value, key, fragments", ERROR_CASES, ids=[f"{c[0]}={c[1]!r}"[:40] for c in ERROR_CASES]
)
def test_error_names_key_and_allowed_values(path, value, key, fragments):
    error = _error(_with(path, value))
    assert isinstance(error, ValueError)
    assert error.key == key
    for fragment in fragments:
        assert fragment in str(error), (fragment, str(error))


def test_sweep_section_parses_every_form():
    raw = _with(
        "sweep",
        {
            "rho": {"linspace": [0.0, 21.0, 4]},
            "sigma": {"logspace": [1.0, 100.0, 3]},
            "state": {"x": [1.0, 2.0]},  # as written by `state.x = [1.0, 2.0]`
            "keep": ["x.max", "z.final"],
            "memory_budget": "256MiB",
        },
    )
    exp = load_config(raw)
    assert exp.sweep.kind == "grid" and exp.sweep.keep == ("x.max", "z.final")
    assert list(exp.sweep.entries) == ["rho", "sigma", "state.x"]
    spec = exp.sweep.build()
    assert spec.dims == ("rho", "sigma", "state.x") and spec.shape == (4, 3, 2)
    np.testing.assert_allclose(spec.values["sigma"], [1.0, 10.0, 100.0], rtol=1e-12)
    assert load_config(exp.to_dict()) == exp
    assert load_config(tomllib.loads(exp.to_toml())) == exp
    # A quoted "state.x" key is the same as the dotted one.
    quoted = load_config(_with("sweep", {"rho": [1.0], "state.x": [1.0, 2.0]}))
    assert list(quoted.sweep.entries) == ["rho", "state.x"]
    lhs = load_config(
        _with("sweep", {"kind": "lhs", "samples": 50, "rho": {"uniform": [0, 21]}})
    ).sweep
    assert (lhs.seed, lhs.dim, lhs.keep) == (0, "sample", "final")  # defaults stored
    draws = lhs.build().draws()["rho"]
    assert sorted(np.floor(draws / 21 * 50).astype(int)) == list(range(50))
    # Without [sweep], no sweep; `keep = "trajectory"` needs saved times.
    assert load_config(BASE).sweep is None
    bad = _with("sweep", {"rho": [1.0], "keep": "trajectory"})
    bad["time"]["save"] = "final"
    error = _error(bad)
    assert error.key == "sweep.keep" and "save = n" in str(error)


def test_missing_sections_and_stray_keys():
    assert _error({"time": {"t1": 1.0}}).key == "model"
    assert "missing required section" in str(_error({"model": {"name": "lorenz"}}))
    raw = {**BASE, "name": "lorenz"}
    assert "top-level key 'name' belongs in a section" in str(_error(raw))


def test_euler_with_pid_is_rejected_and_constant_step_accepted():
    raw = _with("solver.name", "euler")
    raw["solver"]["controller"] = "pid"
    raw["solver"]["dt0"] = 0.01
    error = _error(raw)
    assert error.key == "solver.controller" and "'euler'" in str(error)
    del raw["solver"]["controller"]
    assert load_config(raw).solver.controller == "constant"


def test_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "nope.toml"
    assert str(missing) in str(_error(missing)) and "not found" in str(_error(missing))
    bad = tmp_path / "bad.toml"
    bad.write_text("[model]\nname = lorenz\n")
    error = _error(bad)
    assert str(bad) in str(error) and "invalid TOML" in str(error) and "line 2" in str(error)
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nrtol = "1e-6"\n')
    assert str(_error(wrong)).startswith(f"{wrong}: [solver] rtol: expected a positive number")


@pytest.mark.parametrize(
    "text, key, value",
    [
        ("solver.rtol=1e-8", "solver.rtol", 1e-8),
        ("model.parameters.rho=20", "model.parameters.rho", 20),
        ("output.plot=false", "output.plot", False),
        ("time.save=[0.0, 0.5]", "time.save", [0.0, 0.5]),
        ('model.name="lorenz"', "model.name", "lorenz"),
        ("model.name=lorenz", "model.name", "lorenz"),  # not TOML: a bare string
        ("time.save=final", "time.save", "final"),
        ("output.path=runs/a b.nc", "output.path", "runs/a b.nc"),
        ("solver.rtol = 1e-9 ", "solver.rtol", 1e-9),
        ("output.path=1\nx = 2", "output.path", "1\nx = 2"),  # one value, never two keys
    ],
)
def test_parse_override(text, key, value):
    assert parse_override(text) == (key, value)


@pytest.mark.parametrize("text", ["solver.rtol", "=1", "solver..rtol=1", ".rtol=1"])
def test_parse_override_rejects_malformed(text):
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override(text)


def test_overrides_apply_and_are_checked_like_the_file():
    exp = load_config(
        BASE,
        overrides={
            "solver.rtol": 1e-10,
            "model.parameters.rho": 20,
            "model.parameters.beta": 2.0,
            "time.save": "final",
        },
    )
    assert exp.solver.rtol == 1e-10 and exp.time.save == "final"
    assert exp.model.parameters == {"rho": 20, "beta": 2.0}
    assert BASE["solver"]["rtol"] == 1e-8  # the source is not mutated
    error = _error(BASE, overrides={"solver.rtoll": 1.0})
    assert error.key == "solver.rtoll" and "'rtol'?" in str(error)
    assert "set by override solver.rtoll" in str(error)
    error = _error(BASE, overrides={"model.parameters.rho": "high"})
    assert "[model.parameters] rho" in str(error) and '"high" (a string)' in str(error)
    error = _error(BASE, overrides={"solver.rtol.x": 1.0})
    assert "solver.rtol is 1e-08 (a number), not a table" in str(error)
    # Overrides may create a section the file leaves out.
    raw = {k: v for k, v in BASE.items() if k != "solver"}
    assert load_config(raw, overrides={"solver.name": "dopri5"}).solver.name == "dopri5"


def test_apply_overrides_creates_tables():
    assert apply_overrides({}, {"a.b.c": 1}) == {"a": {"b": {"c": 1}}}


def test_round_trip_dict_and_toml(tmp_path):
    exp = load_config(_with("time.save", [0.0, 0.25, 1.0]))
    again = load_config(exp.to_dict())
    assert again == exp
    text = exp.to_toml()
    assert tomllib.loads(text) == exp.to_dict()
    path = tmp_path / "again.toml"
    path.write_text(text)
    from_file = load_config(path)
    # A file's relative paths are relative to its folder (a dict's, to the current one).
    assert from_file.output.path == str(tmp_path / exp.output.path)
    same = dataclasses.replace(from_file, output=exp.output)
    assert same == exp and from_file.source == str(path)
    assert load_config(exp, overrides={"solver.atol": 1e-3}).solver.atol == 1e-3
    # numpy values and tuples from Python are accepted and normalised.
    raw = _with("time.save", np.array([0.0, 0.5]))
    raw["solver"]["rtol"] = np.float64(1e-7)
    assert load_config(raw).time.save == (0.0, 0.5)


def test_model_build_applies_parameters_and_state():
    exp = load_config(BASE, overrides={"model.parameters.rho": 20, "model.state.y": 2.0})
    model = exp.model.build()
    assert float(model.rho) == 20.0 and float(model.sigma) == 10.0
    state = model.initial_state()
    assert (state.x, state.y, state.z) == (1.0, 2.0, 0.0)


USER_MODULE = '''
import jax.numpy as jnp
import difsim as ds

class Chain(ds.Model):
    """A chain of four decaying cells (a user model outside difsim)."""
    w: jnp.ndarray
    k: float = 1.0
    state = ds.State(u=ds.Var(jnp.zeros(4)), c=0.0)

    def rhs(self, t, s):
        return dict(u=-self.k * s.u, c=0.0 * s.c)

class Picky(ds.Model):
    rho: float = 1.0
    state = ds.State(x=0.0)

    def __check_init__(self):
        if self.rho < 0:
            raise ValueError("rho must be non-negative")

    def rhs(self, t, s):
        return dict(x=-self.rho * s.x)
'''


@pytest.fixture
def user_models(tmp_path, monkeypatch):
    (tmp_path / "difsim_test_user_models.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "difsim_test_user_models"


def test_user_model_reference_and_array_state(user_models):
    raw = {
        "model": {
            "name": f"{user_models}:Chain",
            "parameters": {"w": [1.0, 2.0]},
            "state": {"u": 1.5},
        },
        "time": {"t1": 1.0},
    }
    exp = load_config(raw)
    assert exp.model.cls.__name__ == "Chain"
    model = exp.model.build()
    np.testing.assert_array_equal(model.initial_state().u, jnp.full(4, 1.5))
    np.testing.assert_array_equal(model.w, [1.0, 2.0])
    raw["model"]["state"]["u"] = [1.0, 2.0, 3.0, 4.0]
    np.testing.assert_array_equal(
        load_config(raw).model.build().initial_state().u, [1.0, 2.0, 3.0, 4.0]
    )
    raw["model"]["state"]["u"] = [1.0, 2.0]
    error = _error(raw)
    assert error.key == "model.state.u" and "(4,)" in str(error) and "(2,)" in str(error)
    raw["model"]["state"]["u"] = [[1.0, 2.0], [3.0]]
    assert "[model.state] u: expected a number or a list of shape (4,)" in str(_error(raw))
    del raw["model"]["parameters"]
    raw["model"]["state"] = {}
    error = _error(raw)
    assert error.key == "model.parameters.w" and "Chain has no default for 'w'" in str(error)


def test_model_constructor_errors_become_config_errors(user_models):
    exp = load_config(
        {"model": {"name": f"{user_models}:Picky", "parameters": {"rho": -1}}, "time": {"t1": 1.0}}
    )
    with pytest.raises(ConfigError, match=r"^\[model\]: Picky rejected .*non-negative"):
        exp.model.build()


@pytest.mark.parametrize(
    "path", sorted((ROOT / "experiments").glob("*.toml")), ids=lambda p: p.name
)
def test_shipped_experiments_validate(path, monkeypatch):
    monkeypatch.chdir(ROOT)  # data paths ([fit] data) are relative to the current directory
    exp = load_config(path)
    assert isinstance(exp, Experiment) and exp.output.path is not None
    assert load_config(exp.to_dict()) == exp


def test_shipped_experiments_exist():
    names = {p.stem for p in (ROOT / "experiments").glob("*.toml")}
    assert {"lorenz", "robertson", "kepler"} <= names and len(names) >= 4


def test_docs_describe_every_key():
    text = (ROOT / "docs" / "configs.md").read_text()
    for section, spec in SECTIONS.items():
        assert f"[{section}]" in text, section
        for key in spec.keys:
            assert f"`{key}`" in text, f"docs/configs.md does not describe [{section}] {key}"
