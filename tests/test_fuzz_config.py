"""Fuzzing configs (issue 14): generated configs, broken TOML and `--set` overrides through
`difsim check`, and a few real `difsim run`s. Every case either succeeds or exits 2 with one
line naming the culprit, and no existing file is changed by a failed run (the rules are in
tests/fuzz_helpers.py)."""

import copy
import shutil
import tempfile
import tomllib
from pathlib import Path

import xarray as xr
from hypothesis import event, example, given, strategies as st

from difsim._config import load_config, parse_override
from difsim._config._load import SECTIONS as SCHEMA

from .fuzz_helpers import (
    MODEL_NAMES,
    NUMBERS,
    TEXT,
    VALUES,
    WORDS,
    assert_clean_error,
    assert_one_failure_line,
    dumps,
    fuzz_settings,
    outcome,
    run_cli,
    snapshot,
    toml_value,
)

DATA = Path(__file__).resolve().parents[1] / "data"
LORENZ = {
    "model": {"name": "lorenz", "parameters": {"rho": 28.0}, "state": {"x": 1.0}},
    "time": {"t0": 0.0, "t1": 0.5, "save": 5},
    "solver": {"name": "tsit5", "rtol": 1e-6, "atol": 1e-6, "dtype": "float64"},
    "output": {"path": "runs/out.nc", "plot": False},
}
HEAT = {
    "model": {
        "name": "heat",
        "parameters": {"D": 0.01},
        "grid": {"shape": [16], "bc": "dirichlet"},
    },
    "time": {"t1": 1.0, "save": 3},
    "solver": {"name": "crank_nicolson", "dt0": 0.05},
    "output": {"path": "runs/heat.nc"},
}
GRID_SWEEP = {**LORENZ, "sweep": {"rho": {"linspace": [0.0, 1.0, 3]}, "keep": "final"}}
LHS_SWEEP = {
    **LORENZ,
    "sweep": {
        "kind": "lhs",
        "samples": 4,
        "seed": 0,
        "rho": {"uniform": [0, 1]},
        "keep": ["x_max"],
    },
}
FIT = {
    "model": {"name": "lotka_volterra", "parameters": {"alpha": 1.0}},
    "solver": {"rtol": 1e-6},
    "fit": {
        "data": "data.csv",
        "time": "year",
        "free": {"alpha": "positive", "state.prey": [1.0, 100.0]},
        "observe": {"hare": "prey", "lynx": "predator"},
    },
    "output": {"path": "runs/fit.nc"},
}
BASES = {"lorenz": LORENZ, "heat": HEAT, "grid": GRID_SWEEP, "lhs": LHS_SWEEP, "fit": FIT}

# Keys to mutate: every key of the schema, the tables' entries, and made-up ones.
SCHEMA_KEYS = [f"{s}.{k}" for s, section in SCHEMA.items() for k in section.keys]
ENTRY_KEYS = [
    "model.parameters.rho", "model.parameters.D", "model.parameters.nope", "model.state.x",
    "model.state.u", "model.grid.shape", "model.grid.extent", "model.grid.bc",
    "model.grid.origin", "sweep.rho", "sweep.sigma", "sweep.state", "sweep.state.x",
    "sweep.beta", "fit.free.alpha", "fit.free.state.prey", "fit.free.nope", "fit.observe.hare",
    "fit.observe.lynx", "fit.weights.hare", "fit.sigma.lynx", "fit.free", "model", "time",
    "solver", "output", "sweep", "fit", "extra", "model.extra",
]  # fmt: skip
KEYS = st.sampled_from(SCHEMA_KEYS + ENTRY_KEYS) | st.builds(
    lambda a, b: f"{a}.{b}".strip("."), st.sampled_from(list(SCHEMA) + ["x"]), TEXT
)


def _set(config: dict, key: str, value) -> None:
    *tables, last = key.split(".")
    node = config
    for table in tables:
        child = node.get(table)
        if not isinstance(child, dict):
            child = node[table] = {}
        node = child
    if value is _DELETE:
        node.pop(last, None)
    else:
        node[last] = value


_DELETE = object()


@st.composite
def mutated_configs(draw):
    name = draw(st.sampled_from(sorted(BASES)))
    config = copy.deepcopy(BASES[name])
    mutations = draw(st.lists(st.tuples(KEYS, st.integers(0, 9)), min_size=1, max_size=3))
    for key, op in mutations:
        if key == "model.name":
            value = draw(MODEL_NAMES)
        elif op == 0:
            value = _DELETE
        elif op < 4:  # a plausible value: a number or a known word
            value = draw(NUMBERS | WORDS)
        else:
            value = draw(VALUES)
        _set(config, key, value)
    return name, config


def _project(root: Path) -> Path:
    """A fresh folder with the files a run must never change: data, a foreign netCDF file
    where a careless run might write, a text file."""
    folder = Path(tempfile.mkdtemp(dir=root))
    shutil.copy(DATA / "lynx_hare.csv", folder / "data.csv")
    shutil.copy(DATA / "lynx_hare.nc", folder / "data.nc")
    (folder / "runs").mkdir()
    xr.Dataset({"v": ("t", [1.0, 2.0])}).to_netcdf(folder / "runs" / "foreign.nc")
    (folder / "notes.txt").write_text("keep me\n")
    return folder


def _check(
    config_text: str, root: Path, *overrides: str, sections=()
) -> tuple[int, str, str, Path]:
    """`difsim check` on the config in a fresh project folder: the rules, and nothing
    written. `sections`: made-up top-level names an error may name as its culprit."""
    folder = _project(root)
    path = folder / "experiment.toml"
    path.write_text(config_text, encoding="utf-8")
    before = snapshot(folder)
    code, out, err = run_cli("check", str(path), *(f"--set={o}" for o in overrides))
    event(outcome(code, err))
    assert snapshot(folder) == before  # checking never writes
    if code == 0:
        assert err == "", err
        printed = tomllib.loads(out)  # the complete config, which loads back the same
        assert load_config(printed) == load_config(path, overrides=dict(_parsed(overrides)))
    else:
        assert_clean_error(code, err, path, sections)
    shutil.rmtree(folder)
    return code, out, err, path


def _parsed(overrides):
    return (parse_override(o) for o in overrides)


@fuzz_settings(500)
@given(case=mutated_configs())
def test_generated_configs_check_cleanly(case, tmp_path):
    _, config = case
    _check(dumps(config), tmp_path, sections=list(config))


EDITS = st.tuples(
    st.sampled_from(["delete", "insert", "duplicate", "swap", "truncate"]),
    st.floats(0, 1),
    st.floats(0, 1),
    st.text(st.sampled_from(list("[]{}=\"'.,#\n\\ 0123456789abcxyz+-_:")), max_size=6),
)


@fuzz_settings(300)
@given(base=st.sampled_from(sorted(BASES)), edits=st.lists(EDITS, min_size=1, max_size=3))
def test_broken_toml_checks_cleanly(base, edits, tmp_path):
    text = dumps(BASES[base])
    for kind, a, b, chars in edits:
        i, j = sorted((int(a * len(text)), int(b * len(text))))
        lines = text.splitlines(keepends=True) or [""]
        k, m = int(a * (len(lines) - 1)), int(b * (len(lines) - 1))
        if kind == "delete":
            text = text[:i] + text[j : j + 1 + (j - i) % 7]
        elif kind == "insert":
            text = text[:i] + chars + text[i:]
        elif kind == "duplicate":
            text = "".join(lines[: k + 1] + lines[k:])
        elif kind == "swap":
            lines[k], lines[m] = lines[m], lines[k]
            text = "".join(lines)
        else:
            text = text[:i]
    _check(text, tmp_path)


OVERRIDE_VALUES = st.one_of(VALUES.map(toml_value), TEXT, WORDS)


@fuzz_settings(300)
@given(
    base=st.sampled_from(sorted(BASES)),
    overrides=st.lists(st.tuples(KEYS | TEXT, OVERRIDE_VALUES), min_size=1, max_size=3),
)
def test_set_overrides_check_cleanly(base, overrides, tmp_path):
    texts = [f"{k}={v}" for k, v in overrides if "model.name" not in k]
    if not texts:
        return
    typed = [t.partition("=")[0].strip().partition(".")[0] for t in texts]
    _check(dumps(BASES[base]), tmp_path, *texts, sections=typed)


# Real runs: few and small (each compiles), mutating the keys that reach the solver.
RUN_KEYS = st.sampled_from(
    ["model.parameters.rho", "model.state.x", "time.t1", "time.save", "solver.rtol",
     "solver.atol", "solver.name", "solver.max_steps", "solver.dtype", "solver.dt0",
     "sweep.keep", "sweep.rho"]
)  # fmt: skip
RUN_VALUES = st.one_of(
    st.sampled_from([0.0, -1.0, 1e-12, 1e-3, 0.9, 2.0, 1e6, 1e300, float("nan"), 3, 10**12]),
    st.sampled_from(["final", "euler", "kvaerno5", "float32", "x_max", "nope"]),
    st.sampled_from([[0.0, 0.25], [0.5, 0.1], [], {"linspace": [0, 1, 2]}]),
)


@fuzz_settings(5, long=40)
@example(base="lorenz", mutation=("solver.max_steps", 3))  # the solve fails: exit 1
@example(base="grid", mutation=("sweep.keep", "x_max"))  # a sweep that runs: exit 0
@example(base="lorenz", mutation=("solver.max_steps", 10**12))  # was an OverflowError
@given(
    base=st.sampled_from(["lorenz", "grid"]),
    mutation=st.tuples(RUN_KEYS, RUN_VALUES),
)
def test_generated_runs_succeed_or_fail_cleanly(base, mutation, tmp_path):
    config = copy.deepcopy(BASES[base])
    _set(config, *mutation)
    folder = _project(tmp_path)
    path = folder / "experiment.toml"
    path.write_text(dumps(config))
    before = snapshot(folder)
    code, out, err = run_cli("run", str(path), "--no-plot")
    event(outcome(code, err))
    after = snapshot(folder)
    assert {k: after.get(k) for k in before} == before  # nothing that existed changed
    if code == 2:
        assert_clean_error(code, err, path)
        assert after == before  # and nothing new either
        return
    assert code in (0, 1), (code, err)
    written = xr.open_dataset(folder / "runs" / "out.nc")
    assert written.attrs["difsim_output"] in ("simulation", "sweep")
    if code == 1:  # the solve failed: one line says how, the output says where
        assert_one_failure_line(err)
        assert (written.status != 0).any()
    else:
        assert (written.status == 0).any()
    written.close()
