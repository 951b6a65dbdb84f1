"""Experiment configs: TOML files (or dicts) checked against an explicit schema.

The schema is the table [`SECTIONS`][]: section name → allowed keys (kind, default,
description) plus a handler that turns the checked values into a small frozen spec. Adding
a section (`[sweep]`, `[fit]`) is one entry there, its handler, and a field of
[`Experiment`][]. Everything is checked before anything is built or compiled; every problem
raises a [`ConfigError`][] naming the key (`[solver] rtol`), what was expected and what was
given.
"""

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from difsim import solvers
from difsim._config._experiment import (
    Experiment as Experiment,
    FitSpec as FitSpec,
    ModelSpec as ModelSpec,
    OutputSpec as OutputSpec,
    SolverSpec as SolverSpec,
    SweepSpec as SweepSpec,
    TimeSpec as TimeSpec,
)
from difsim._config._fit import FIT_SECTION, FIT_SOLVER_DEFAULTS
from difsim._config._model import parse_model
from difsim._config._paths import resolve_paths
from difsim._config._resources import check_experiment_resources
from difsim._config._schema import (
    BOOL,
    BYTES,
    KEEP,
    MAX_STEPS,
    NUMBER,
    PLOT,
    POSITIVE,
    POSITIVE_INT,
    REQUIRED,
    SAVE,
    SEED,
    STRING,
    TABLE,
    ConfigError as ConfigError,
    Key as Key,
    Section as Section,
    apply_overrides as apply_overrides,
    check_section,
    did_you_mean,
    parse_override as parse_override,
    plain,
)
from difsim._config._solver import check_atol_against_state, parse_solver
from difsim._config._sweep import parse_sweep
from difsim._config._time import parse_time
from difsim._io import difsim_version


# ---------------------------------------------------------------- section handlers
def _parse_output(values: dict[str, Any], parsed: dict[str, Any]) -> OutputSpec:
    path = values["path"]
    if path is not None and Path(path).suffix.lower() not in (".nc", ".nc4"):
        # netCDF under another name (x.csv) would mislead whoever opens it.
        raise ConfigError(f"must end in .nc (a netCDF file), got {path!r}", "output.path")
    return OutputSpec(path, values["plot"], values["overwrite"], values["store"])


# The whole schema. Order matters: handlers see the specs of the sections before them.
SECTIONS: dict[str, Section] = {
    "model": Section(
        "the model to simulate",
        {
            "name": Key(
                STRING,
                'a name from difsim.models.MODELS, "file.py:Class" (a Python file, relative '
                'to the config file\'s folder) or "package.module:Class" (an installed '
                "module) naming a difsim.Model subclass; the file or module is run",
                REQUIRED,
            ),
            "parameters": Key(
                TABLE,
                "parameter values (numbers; lists for array parameters); "
                "others keep the model's defaults",
                {},
            ),
            "state": Key(
                TABLE,
                "initial values of state variables (numbers; lists for array "
                "variables); others keep the model's defaults",
                {},
            ),
            "grid": Key(
                TABLE,
                "a PDE model's grid: shape, extent, origin, bc (docs/configs.md)",
                {},
            ),
        },
        parse_model,
        required=True,
    ),
    "time": Section(
        "the time span and save times, in the model's time units",
        {
            "t0": Key(NUMBER, "start time", 0.0),
            "t1": Key(NUMBER, "end time (> t0)", REQUIRED),
            "save": Key(
                SAVE,
                'what to save: "final" (only t1), a number of evenly spaced points '
                "from t0 to t1, or a strictly increasing list of times in [t0, t1]",
                101,
            ),
        },
        parse_time,
        required=True,
    ),
    "solver": Section(
        "how to integrate",
        {
            "name": Key(
                STRING,
                "a solver from difsim.solvers.SOLVERS (default: tsit5, or "
                "kvaerno5 for stiff models), or for a stochastic model from SDE_SOLVERS",
                None,
                lambda: list(dict.fromkeys([*solvers.SOLVERS, *solvers.SDE_SOLVERS])),
            ),
            "rtol": Key(POSITIVE, "relative tolerance (default 1e-6, or the model's)", None),
            "atol": Key(POSITIVE, "absolute tolerance (default 1e-6, or the model's)", None),
            "dt0": Key(
                POSITIVE,
                "initial step (adaptive) or the step (fixed-step); default: "
                "chosen automatically by adaptive solvers",
                None,
            ),
            "controller": Key(
                STRING,
                "step-size controller from difsim.solvers.CONTROLLERS "
                "(default: pid for adaptive solvers, else constant)",
                None,
                lambda: list(solvers.CONTROLLERS),
            ),
            "max_steps": Key(
                MAX_STEPS, "most steps before the solve gives up (default 16384)", None
            ),
            "root_tol": Key(
                POSITIVE,
                "implicit solvers' nonlinear-solve tolerance, a fraction of the step's "
                "error allowance (default 0.01)",
                None,
            ),
            "adjoint": Key(
                STRING,
                "how gradients pass through the solve (used by fitting), "
                "from difsim.solvers.ADJOINT_NAMES",
                "checkpoint",
                lambda: list(solvers.adjoint_names("simulate")),
            ),
            "seed": Key(
                SEED,
                "seed of a stochastic model's Brownian path in a single run (default 0; the "
                "paths of a sweep take [sweep] seed)",
                None,
            ),
            "brownian": Key(
                STRING,
                "a stochastic model's Brownian path: tree (default; one path for any steps) "
                "or steps (one draw per fixed step, cheaper)",
                None,
                lambda: ["tree", "steps"],
            ),
            "dtype": Key(
                STRING,
                "floating-point precision of the run",
                "float32",
                lambda: ["float32", "float64"],
            ),
        },
        parse_solver,
    ),
    "output": Section(
        "where results go",
        {
            "path": Key(STRING, "netCDF output file (relative to the config file's folder)", None),
            "plot": Key(
                PLOT,
                "write a PNG quick-look: true (next to path, suffix .png), false, or a PNG path",
                True,
            ),
            "overwrite": Key(
                BOOL,
                "replace an earlier difsim output of the same kind (of a sweep: a different "
                "sweep's output or unfinished chunks) instead of refusing; files difsim did "
                "not write are never replaced",
                False,
            ),
            "store": Key(
                STRING,
                "where a sweep keeps its chunks while it runs (a zarr store): a path, or an "
                'fsspec URL such as "s3://bucket/x.zarr"; default: path + ".zarr"',
                None,
            ),
        },
        _parse_output,
    ),
    "sweep": Section(
        "a parameter sweep: many trajectories, one Dataset",
        {
            "kind": Key(
                STRING,
                "grid (Cartesian product), zip (paired lists), random or lhs (Latin hypercube)",
                "grid",
                lambda: ["grid", "zip", "random", "lhs"],
            ),
            "samples": Key(
                POSITIVE_INT,
                "number of points of a random or lhs sweep; for a stochastic model, Monte "
                "Carlo paths per point",
                None,
            ),
            "seed": Key(
                SEED, "seed of the JAX PRNG key (random, lhs, Monte Carlo paths; default 0)", None
            ),
            "keep": Key(
                KEEP,
                'what to keep per trajectory: "final", "trajectory", or a list of '
                'observables like ["x_max", "R_final"]; of Monte Carlo paths, statistics '
                'over them like ["x_mean", "x_var", "x_q05", "x_q95"]',
                "final",
            ),
            "chunk_size": Key(
                POSITIVE_INT, "trajectories per compiled call (default: from memory_budget)", None
            ),
            "max_events": Key(
                POSITIVE_INT, "of a model with events, most per trajectory (default: its own)", None
            ),
            "memory_budget": Key(
                BYTES, 'memory one chunk may use, e.g. "512MiB" (default 1 GiB)', None
            ),
            "dim": Key(
                STRING, 'name of the one dimension of zip/random/lhs sweeps ("sample")', None
            ),
            "engine": Key(
                STRING,
                "what integrates the trajectories: auto (the ensemble engine when the solver "
                "allows it), ensemble or diffrax",
                "auto",
                lambda: ["auto", "ensemble", "diffrax"],
            ),
        },
        parse_sweep,
        entries='the swept keys: a parameter name or "state.<var>" = values or a distribution',
        none_if_absent=True,
    ),
    "fit": FIT_SECTION,
}


# ---------------------------------------------------------------- loading
def load_config(
    source: "str | os.PathLike | Mapping[str, Any] | Experiment",
    *,
    overrides: Mapping[str, Any] | None = None,
) -> Experiment:
    """Read and check an experiment config.

    **Arguments:**

    - `source`: a TOML file path, the same content as a dict (`{"model": {"name": ...}}`),
      or an [`Experiment`][] (already checked: returned as it is, or re-checked with
      `overrides`).
    - `overrides`: `{"solver.rtol": 1e-8, "model.parameters.rho": 20.0}`, applied on top
      (what `difsim run --set` passes).

    **Returns:** an [`Experiment`][]. Nothing is built or compiled.

    **Raises:** [`ConfigError`][] naming the offending key, for anything invalid.

    **Example:**

    ```python
    import difsim as ds

    config = {"model": {"name": "lorenz", "parameters": {"rho": 20.0}},
              "time": {"t0": 0.0, "t1": 1.0, "save": 11}}
    experiment = ds.load_config(config, overrides={"model.parameters.rho": 28.0})
    assert experiment.model.parameters["rho"] == 28.0
    ```
    """
    origin = None
    if isinstance(source, Experiment) and not overrides:
        return source
    if isinstance(source, Experiment):
        raw, origin = source.to_dict(), source.source
    elif isinstance(source, Mapping):
        raw = plain(source)
    elif isinstance(source, str | os.PathLike):
        origin = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError("config file not found", source=origin) from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read the config file: {e}", source=origin) from None
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"invalid TOML: {e}", source=origin) from None
    else:
        raise TypeError(
            f"load_config expects a path, a dict or an Experiment, got {type(source).__name__}"
        )
    overrides = {} if overrides is None else dict(overrides)
    try:
        raw = apply_overrides(raw, overrides)
        if origin is not None:
            raw = resolve_paths(raw, Path(os.path.abspath(origin)).parent, overrides)
        parsed = _check(raw)
    except ConfigError as e:
        culprit = [k for k in overrides if e.key and (e.key == k or e.key.startswith(k + "."))]
        problem = e.problem + (f" (set by override {culprit[0]})" if culprit else "")
        raise ConfigError(problem, e.key, origin) from None
    return Experiment(**parsed, source=origin)


# The keys that hold paths (and `[model] name` when it names a file).
def _check(raw: dict[str, Any]) -> dict[str, Any]:
    supported = [f"[{s}]" for s, sec in SECTIONS.items() if not sec.unsupported]
    for name, value in raw.items():
        if name in SECTIONS:
            continue
        if isinstance(value, dict):
            raise ConfigError(
                f"unknown section; sections are {', '.join(supported)}"
                f"{did_you_mean(name, list(SECTIONS))}",
                name,
            )
        raise ConfigError(
            f"top-level key {name!r} belongs in a section; sections are {', '.join(supported)}"
        )
    if "fit" in raw:
        if "sweep" in raw:
            raise ConfigError(
                "[sweep] and [fit] cannot be combined: a config either sweeps or fits", "sweep"
            )
        if "time" in raw:
            raise ConfigError(
                "a fit takes its times from the data ([fit] data, time, t0): remove [time]",
                "time",
            )
        solver = raw.get("solver", {})
        if isinstance(solver, dict):
            raw = {**raw, "solver": {**FIT_SOLVER_DEFAULTS, **solver}}
    parsed: dict[str, Any] = {}
    for name, section in SECTIONS.items():
        if name == "time" and "fit" in raw:
            parsed[name] = None
            continue
        if section.unsupported:
            if name in raw:
                raise ConfigError(
                    f"this section ({section.description}) is not supported yet in this "
                    f"version of difsim ({difsim_version()}); remove it to run the rest",
                    name,
                )
            continue
        if name not in raw and section.required:
            raise ConfigError(f"missing required section ({section.description})", name)
        if name not in raw and section.none_if_absent:
            parsed[name] = None
            continue
        values = check_section(name, section, raw.get(name, {}))
        parsed[name] = section.handler(values, parsed)
    check_experiment_resources(parsed)  # counts x sizes: nothing is built
    solver = raw.get("solver")
    given = isinstance(solver, dict) and solver.get("atol") is not None
    check_atol_against_state(parsed["solver"], parsed["model"], atol_given=given)
    return parsed
