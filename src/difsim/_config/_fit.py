"""The `[fit]` section of experiment configs: fitting a model's parameters to data.

```toml
[fit]
data = "../data/lynx_hare.nc"   # netCDF or CSV, relative to the config file's folder
noise = "lognormal"
[fit.free]                      # what to fit, and its range
alpha = "positive"
"state.prey" = "positive"
[fit.observe]                   # data variable = state variable
hare = "prey"
```

Everything that can be checked without solving is checked here: the keys, the names in
`[fit.free]` and `[fit.observe]` against the model, and the data file (read once: it is
small) against `[fit.observe]`, `[fit.weights]` and `[fit.sigma]`.
"""

from pathlib import Path
from typing import Any

from difsim._config._experiment import FitSpec, SolverSpec, field_defaults
from difsim._config._fit_network import check_networks
from difsim._config._schema import (
    NON_NEGATIVE_INT,
    NUMBER,
    POSITIVE,
    POSITIVE_INT,
    REQUIRED,
    SEED,
    STRING,
    TABLE,
    ConfigError,
    Key,
    Kind,
    Section,
    did_you_mean,
    given,
    is_number,
    names_list,
)
from difsim._core import state_key, state_var
from difsim._fit import (
    ADJOINTS,
    NOISE_MODELS,
    OPTAX_OPTIMIZERS,
    OPTIMIZERS,
    MultipleShooting,
    as_transform,
    check_data_values,
    path_steps,
    read_data,
)

CURRICULUM = Kind(
    "a number of stages (integer >= 1) or a list of increasing horizons",
    lambda v: (
        (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
        or (isinstance(v, list) and bool(v) and all(is_number(x) for x in v))
    ),
)
VALIDATION = Kind(
    "a fraction in (0, 1) or a list of experiment labels",
    lambda v: (
        (is_number(v) and 0 < v < 1)
        or (isinstance(v, list) and bool(v) and all(isinstance(x, str | int) for x in v))
    ),
)

# The sub-tables of [fit]: name → what its entries are (for error messages).
SUBTABLES = {
    "free": 'a parameter or "state.<var>" = "positive", "softplus", "identity" or [lo, hi]',
    "observe": "a data variable = the state variable it observes",
    "weights": "a data variable = its residual weight (a number or one per data point)",
    "sigma": "a data variable = its noise scale (a number or one per data point)",
    "network": "a parameter = a table: width, depth, activation, seed, in_size, out_size, "
    "reference",
}


def parse_fit(values: dict[str, Any], parsed: dict[str, Any]) -> FitSpec:
    """The `[fit]` handler: check the settings against the model and the data, fill in the
    defaults, return a [`FitSpec`][] (nothing is solved or compiled)."""
    cls = parsed["model"].cls
    params = list(cls.parameter_names())
    states = list(getattr(field_defaults(cls).get("state"), "names", ()))
    _check_solver(parsed["solver"])
    control = values["control"]
    _check_settings(values, cls.__name__, params)
    free = _flatten_state(values["free"], "free")
    check_networks(values["network"], cls, params)
    if not free and not values["network"]:
        raise ConfigError(
            'nothing to fit: name at least one parameter or "state.<var>" with its range, '
            'e.g. alpha = "positive"',
            "fit.free",
        )
    for name, spec in free.items():
        _check_free(name, spec, cls.__name__, params, states, control)
    observe = _flatten_state(values["observe"], "observe")
    _check_observe(observe, cls.__name__, states)
    _check_tables(values)
    _check_data(values, observe, states, control, parsed["model"])
    settings = {k: values[k] for k in FitSpec.SETTINGS if k != "data"}
    if values["multistart"] is not None:
        settings["seed"] = 0 if values["seed"] is None else values["seed"]
        settings["multistart_scale"] = (
            MULTISTART_SCALE if values["multistart_scale"] is None else values["multistart_scale"]
        )
    return FitSpec(
        data=values["data"],
        free=free,
        observe=observe,
        weights=dict(values["weights"]),
        sigma=dict(values["sigma"]),
        network={k: dict(v) for k, v in values["network"].items()},
        **settings,
        shooting=_shooting(values["multiple_shooting"], values["shooting_penalty"]),
    )


def _check_solver(solver: SolverSpec) -> None:
    if solver.controller != "pid" or solver.dt0 is not None:
        raise ConfigError(
            "a fit solves with the adaptive pid controller; remove controller and dt0 "
            f"(or choose an adaptive solver instead of {solver.name!r})",
            "solver.controller" if solver.controller != "pid" else "solver.dt0",
        )


def _check_settings(values: dict[str, Any], cls: str, params: list[str]) -> None:
    """The scalar settings of `[fit]` that depend on each other or on the model."""
    control = values["control"]
    if control is not None and control not in params:
        raise ConfigError(
            f"{cls} has no parameter {control!r} to use as the control of a "
            f"steady-state fit; its parameters are {names_list(params)}"
            f"{did_you_mean(control, params)}",
            "fit.control",
        )
    _only_with(values, "t0", control is None, "a time-series fit (not with control)")
    _only_with(values, "multiple_shooting", control is None, "a time-series fit (not with control)")
    if values["multiple_shooting"] is not None and values["multiple_shooting"] < 2:
        raise ConfigError(
            f"expected a number of segments >= 2, got {given(values['multiple_shooting'])}",
            "fit.multiple_shooting",
        )
    _only_with(
        values, "shooting_penalty", values["multiple_shooting"] is not None, "multiple_shooting"
    )
    _only_with(values, "multistart_scale", values["multistart"] is not None, "multistart")
    seeded = values["multistart"] is not None or values["batch_size"] is not None
    seeded = seeded or isinstance(values["validation"], float)
    _only_with(values, "seed", seeded, "multistart, batch_size or a fractional validation")
    _only_with(values, "patience", values["validation"] is not None, "validation")
    optax_names = ", ".join(OPTAX_OPTIMIZERS)
    _only_with(values, "clip", values["optimizer"] in OPTAX_OPTIMIZERS, f"optax ({optax_names})")
    optax = values["optimizer"] in OPTAX_OPTIMIZERS
    _only_with(values, "curriculum", optax and control is None,
               f"an optax optimizer ({optax_names}) on a time-series fit")  # fmt: skip
    stages = values["curriculum"]
    if isinstance(stages, list) and any(b <= a for a, b in zip(stages, stages[1:])):
        raise ConfigError(f"the horizons must increase, got {given(stages)}", "fit.curriculum")


def _check_observe(observe: dict[str, Any], cls: str, states: list[str]) -> None:
    for name, target in observe.items():
        if not isinstance(target, str) or target not in states:
            shown = given(target) if not isinstance(target, str) else repr(target)
            raise ConfigError(
                f"{shown} is not a state variable of {cls}; its variables are "
                f"{names_list(states)}{did_you_mean(str(target), states)}",
                f"fit.observe.{name}",
            )


def _check_tables(values: dict[str, Any]) -> None:
    """`[fit.weights]` and `[fit.sigma]`: positive numbers, or lists of numbers."""
    for table in ("weights", "sigma"):
        for name, value in values[table].items():
            if not (is_number(value) and value > 0) and not (
                isinstance(value, list) and value and all(is_number(v) for v in value)
            ):
                raise ConfigError(
                    f"expected a positive number or a list of numbers (one per data point), "
                    f"got {given(value)}",
                    f"fit.{table}.{name}",
                )


def _shooting(segments: int | None, penalty: float | None) -> MultipleShooting | None:
    """The [`MultipleShooting`][] strategy of `multiple_shooting` (checked above)."""
    if segments is None:
        return None
    try:
        return MultipleShooting(segments, **({} if penalty is None else {"penalty": penalty}))
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e), "fit.multiple_shooting") from None


def _only_with(values: dict[str, Any], key: str, allowed: bool, what: str) -> None:
    if values[key] is not None and not allowed:
        raise ConfigError(f"applies to {what} only; remove it", f"fit.{key}")


def _flatten_state(table: dict[str, Any], name: str) -> dict[str, Any]:
    """`state.x = ...` (a dotted key) arrives as a `state` table: flatten it to "state.x"."""
    out = dict(table)
    state = out.pop("state", None) if name == "free" else None
    if state is not None:
        if not isinstance(state, dict):
            raise ConfigError(
                f'expected a table of state variables (state.x = "positive"), got {given(state)}',
                f"fit.{name}.state",
            )
        out.update({state_key(k): v for k, v in state.items()})
    return out


def _check_free(name: str, spec: Any, cls: str, params, states, control) -> None:
    key = f"fit.free.{name}"
    if (var := state_var(name)) is not None:
        if var not in states:
            raise ConfigError(
                f"{cls} has no state variable {var!r}; its variables are "
                f"{names_list(states)}{did_you_mean(var, states)}",
                key,
            )
        if control is not None:
            raise ConfigError(
                "a steady-state fit (control) cannot fit an initial value: it is only the "
                "root finder's guess",
                key,
            )
    elif _head(name, key) not in params:
        raise ConfigError(
            f"{cls} has no parameter {name!r}; its parameters are {names_list(params)}, and "
            f'initial values are written "state.<var>" with variables {names_list(states)}'
            f"{did_you_mean(name, params)}",
            key,
        )
    if name == control:
        raise ConfigError(
            f"{name!r} is the control of the data (fit.control): it cannot be free", key
        )
    ok_pair = isinstance(spec, list) and len(spec) == 2 and all(is_number(v) for v in spec)
    if not (spec in ("positive", "softplus", "identity") or ok_pair):
        raise ConfigError(
            f'unknown range {given(spec)}; write "positive", "softplus", "identity" or '
            "[lower, upper]",
            key,
        )
    try:
        as_transform(spec, name)
    except (TypeError, ValueError) as e:
        raise ConfigError(str(e), key) from None


def _head(name: str, key: str) -> str:
    """The parameter a free path starts at (`net` of `"net.layers[0].weight"`); the rest
    of the path is checked against the model when the fit starts."""
    try:
        return str(path_steps(name)[0])
    except ValueError as e:
        raise ConfigError(str(e), key) from None


def _check_data(values: dict[str, Any], observe, states, control, model) -> None:
    """Read the data file (small: observations) and check the names that refer to it."""
    path = Path(values["data"])
    if not path.exists():
        raise ConfigError(
            f"data file {str(path)!r} does not exist (a relative path is relative to the "
            "config file's folder, or to the current directory when set with --set)",
            "fit.data",
        )
    time = values["time"]
    try:
        dataset, coord = read_data(path, time if time is not None or control is None else control)
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError(str(e), "fit.time" if time is not None else "fit.data") from None
    over = [str(n) for n, v in dataset.data_vars.items() if coord in v.dims]
    for name in observe:
        if name not in over:
            raise ConfigError(
                f"the data ({path}) have no variable {name!r} over {coord!r}; they hold "
                f"{names_list(over)}{did_you_mean(name, over)}",
                f"fit.observe.{name}",
            )
    observed = list(observe) or [n for n in over if n in states]
    for table in ("weights", "sigma"):
        for name in values[table]:
            if name not in observed:
                raise ConfigError(
                    f"{name!r} is not an observed data variable; observed are "
                    f"{names_list(observed)}{did_you_mean(name, observed)}",
                    f"fit.{table}.{name}",
                )
    try:  # the values the fit will read: a run would refuse them only after loading
        check_data_values(dataset, coord, model.build(host=True), dict(observe) or None,
                          noise=values["noise"], weights=values["weights"],
                          sigma=values["sigma"], increasing=control is None,
                          experiment=values["experiment"])  # fmt: skip
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{e} (in {path})", "fit.data") from None


# [solver] defaults that differ for a fit: gradients and Gauss-Newton steps want float64, and
# a trial point that needs many steps has almost always blown up (rejected sooner).
FIT_SOLVER_DEFAULTS = {"dtype": "float64", "max_steps": 4096}
# Standard deviation of the multistart perturbations when [fit] multistart_scale is unset.
MULTISTART_SCALE = 0.3


def _fit_names(what: str) -> list[str]:
    return list({"noise": NOISE_MODELS, "optimizer": OPTIMIZERS, "adjoint": ADJOINTS}[what])


# The [fit] section of the schema (difsim._config._load.SECTIONS).
FIT_SECTION = Section(
    "fitting parameters to data (times come from the data: no [time])",
    {
        "data": Key(
            STRING,
            "netCDF or CSV file of observations (relative to the config file's folder)",
            REQUIRED,
        ),
        "time": Key(
            STRING,
            "the data coordinate (CSV column) holding the times (default: the only "
            "dimension, else time or t, else the first column)",
            None,
        ),
        "t0": Key(NUMBER, "time of the initial state (default: the first data time)", None),
        "control": Key(
            STRING,
            "fit steady states: the parameter whose values the data coordinate holds",
            None,
        ),
        "noise": Key(
            STRING, "noise model of the residuals", "gaussian", lambda: _fit_names("noise")
        ),
        "optimizer": Key(STRING, "the optimizer", "trust_region", lambda: _fit_names("optimizer")),
        "steps": Key(
            NON_NEGATIVE_INT, "most optimizer steps (default 256, or 1000 for optax)", None
        ),
        "learning_rate": Key(POSITIVE, "learning rate of optax optimizers", 1e-2),
        "clip": Key(POSITIVE, "largest gradient norm of an optax step (clipped above)", None),
        "tol": Key(POSITIVE, "rtol = atol of the convergence test (optimistix)", 1e-8),
        "adjoint": Key(
            STRING,
            "how the fit differentiates the solve (default: forward for least squares)",
            None,
            lambda: _fit_names("adjoint"),
        ),
        "multiple_shooting": Key(POSITIVE_INT, "number of segments (>= 2)", None),
        "shooting_penalty": Key(POSITIVE, "weight of the continuity residuals (default 10)", None),
        "multistart": Key(POSITIVE_INT, "number of starts run in parallel", None),
        "seed": Key(SEED, "seed of the multistart perturbations (default 0)", None),
        "multistart_scale": Key(
            POSITIVE, "standard deviation of the perturbations (default 0.3)", None
        ),
        "checkpoint": Key(STRING, "file to save (and resume) the optimisation state", None),
        "experiment": Key(STRING, "the data dimension of experiments (default: experiment)", None),
        "batch_size": Key(POSITIVE_INT, "training experiments per optimizer step", None),
        "validation": Key(
            VALIDATION, "held-out experiments: a fraction in (0, 1), or their labels", None
        ),
        "patience": Key(POSITIVE_INT, "evaluations without a lower validation loss", None),
        "curriculum": Key(
            CURRICULUM, "growing horizons: a number of stages, or the horizons", None
        ),
        "max_failures": Key(POSITIVE_INT, "consecutive rejected steps before the fit stops", 20),
        "free": Key(TABLE, "[fit.free]: what to fit and its range", {}),
        "network": Key(
            TABLE, "[fit.network.<field>]: a network (width, depth, activation, seed) to fit", {}
        ),
        "observe": Key(
            TABLE, "[fit.observe]: data variable = state variable (default: same names)", {}
        ),
        "weights": Key(TABLE, "[fit.weights]: data variable = residual weight", {}),
        "sigma": Key(TABLE, "[fit.sigma]: data variable = noise scale (weight 1/sigma)", {}),
    },
    parse_fit,
    none_if_absent=True,
)
