"""Experiment configs: every bad value is refused with an error naming its key, what was
expected and what was given (no solving)."""

import math

import pytest

from difsim import solvers
from difsim._config._load import SECTIONS
from difsim.models import MODELS

from .config_helpers import base_with, config_error

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
        ["[sweep] keep", "'x.maxx'", "'x_max'?", "'z'"],
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
    error = config_error(base_with(path, value))
    assert isinstance(error, ValueError)
    assert error.key == key
    for fragment in fragments:
        assert fragment in str(error), (fragment, str(error))
