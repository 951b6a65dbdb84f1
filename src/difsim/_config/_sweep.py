"""The `[sweep]` section of experiment configs: entries in config form → sweep specs.

Entries are `key = values` with `key` a parameter name or `"state.<var>"` (also written as
a dotted `state.x = ...` or a `[sweep.state]` table); the accepted forms depend on `kind`:
`{ values = [...] }` (or a bare list), `{ linspace = [a, b, n] }`, `{ logspace = [a, b, n] }`
for grid and zip sweeps, `{ uniform = [a, b] }`, `{ loguniform = [a, b] }`,
`{ normal = [mean, std] }` for random and lhs sweeps.
"""

from typing import Any

import numpy as np

from difsim._config._experiment import SweepSpec, TimeSpec, field_defaults
from difsim._config._resources import check_linspace_count
from difsim._config._schema import ConfigError, did_you_mean, given, is_int, is_number
from difsim._core import Model, declared_events, state_key
from difsim._sweep import (
    AbstractSweep,
    GridSweep,
    LogUniform,
    Normal,
    RandomSweep,
    Uniform,
    ZipSweep,
    check_keys,
    check_paths,
    is_statistics,
    parse_bytes,
    plan_keep,
    plan_statistics,
    respell_keep,
)

GRID_FORMS = {
    "values": "a list of numbers",
    "linspace": "[start, stop, n]: n evenly spaced values from start to stop",
    "logspace": "[start, stop, n]: n values from start to stop (both > 0), evenly spaced "
    "in log (the endpoints themselves, as numpy.geomspace, not exponents)",
}
RANDOM_FORMS = {
    "uniform": "[low, high]",
    "loguniform": "[low, high], 0 < low",
    "normal": "[mean, std]",
}
DISTRIBUTIONS = {"uniform": Uniform, "loguniform": LogUniform, "normal": Normal}


def entry_values(key: str, value: Any, kind: str) -> Any:
    """A config entry of `[sweep]` → values (grid, zip) or a distribution (random, lhs).

    **Raises:** `ConfigError` with key `sweep.<key>`, saying which forms are accepted.
    """
    where = f"sweep.{key}"
    form, args = _entry_form(value, kind, where)
    if form == "values":
        if not isinstance(args, list) or not args:
            raise ConfigError(
                f"values: expected a non-empty list of numbers, got {given(args)}", where
            )
        for i, v in enumerate(args):
            if not is_number(v):
                raise ConfigError(f"values[{i}]: expected a finite number, got {given(v)}", where)
        return np.asarray(args, dtype=np.float64)
    forms = GRID_FORMS if form in GRID_FORMS else RANDOM_FORMS
    arity = 3 if form in ("linspace", "logspace") else 2
    if not isinstance(args, list) or len(args) != arity or not all(map(is_number, args)):
        raise ConfigError(f"{form} takes {forms[form]}; got {given(args)}", where)
    if form in ("linspace", "logspace"):
        return _spaced(form, args, where)
    try:
        return DISTRIBUTIONS[form](*map(float, args))
    except ValueError as e:
        raise ConfigError(f"{form} takes {forms[form]}: {e}", where) from None


def _entry_form(value: Any, kind: str, where: str) -> tuple[str, Any]:
    """`(form, arguments)` of one entry, e.g. `("linspace", [0, 1, 5])`; a bare list is
    `values` (grid and zip sweeps only)."""
    random = kind in ("random", "lhs")
    forms = RANDOM_FORMS if random else GRID_FORMS
    accepted = ", ".join(f"{{ {k} = {v.split(':')[0]} }}" for k, v in forms.items())
    if isinstance(value, list):
        if random:
            raise ConfigError(
                f"a {kind} sweep draws each key from a distribution; write one of {accepted}, "
                f"got {given(value)}",
                where,
            )
        value = {"values": value}
    if not isinstance(value, dict) or len(value) != 1:
        shown = given(value) if not isinstance(value, dict) else f"keys {list(value)}"
        extra = "" if random else " or a bare list of values"
        raise ConfigError(f"expected one of {accepted}{extra}; got {shown}", where)
    ((form, args),) = value.items()
    if form not in forms:
        if form in (GRID_FORMS if random else RANDOM_FORMS):
            need = '"grid" or "zip"' if random else '"random" or "lhs"'
            raise ConfigError(
                f"{form} belongs to a sweep with kind = {need}; this sweep has kind = "
                f'"{kind}", which takes {accepted}',
                where,
            )
        raise ConfigError(
            f"unknown form {form!r}; write one of {accepted}{did_you_mean(form, list(forms))}",
            where,
        )
    return form, args


def _spaced(form: str, args: list, where: str) -> np.ndarray:
    """The values of `{ linspace = [start, stop, n] }` or `{ logspace = [...] }`."""
    start, stop, n = args
    if not is_int(n) or n < 1:
        raise ConfigError(
            f"{form} takes {GRID_FORMS[form]}: n must be an integer >= 1, got {given(n)}", where
        )
    check_linspace_count(n, where)  # before allocating them
    if form == "linspace":
        return np.linspace(float(start), float(stop), n)
    if not (start > 0 and stop > 0):
        raise ConfigError(
            f"logspace takes the endpoints (both > 0), like numpy.geomspace, not exponents: "
            f"for 0.001 ... 10 write [0.001, 10.0, n]; got {given(args)}",
            where,
        )
    return np.geomspace(float(start), float(stop), n)


def parse_sweep(values: dict[str, Any], parsed: dict[str, Any]) -> SweepSpec:
    """The `[sweep]` handler: check every entry and setting against the model and `[time]`,
    build the sweep spec (nothing is drawn or compiled) and return a [`SweepSpec`][].

    For a stochastic model (one with noise) `samples` is the number of Monte Carlo paths
    per point of a grid or zip sweep (which may then have no swept keys), and `keep` may
    ask for statistics over the paths (`_monte_carlo_checks`)."""
    cls, kind = parsed["model"].cls, values["kind"]
    monte_carlo = cls.is_stochastic()
    if monte_carlo:
        _monte_carlo_checks(values, kind, cls)
        if parsed["solver"].seed is not None:
            raise ConfigError(
                "a sweep's Monte Carlo paths take their keys from [sweep] seed: move it there",
                "solver.seed",
            )
    entries = _entries(values, cls, allow_empty=monte_carlo)
    built = {key: entry_values(key, value, kind) for key, value in entries.items()}
    random = kind in ("random", "lhs")
    seed = (values["seed"] if values["seed"] is not None else 0) if random or monte_carlo else None
    dim = _check_settings(values, kind, built, monte_carlo)
    keep = respell_keep(values["keep"], monte_carlo and is_statistics(values["keep"]), "sweep.keep")
    if monte_carlo and is_statistics(keep):
        _check_statistics(keep, cls)
    else:
        _check_keep(keep, cls, parsed["time"])
    budget = values["memory_budget"]
    spec = _build(kind, built, values["samples"], seed, dim) if built else None
    if monte_carlo:
        _check_paths(values["samples"], 1 if spec is None else spec.size)
    return SweepSpec(
        kind=kind,
        entries=entries,
        samples=values["samples"],
        seed=seed,
        keep=tuple(keep) if isinstance(keep, list) else keep,
        chunk_size=values["chunk_size"],
        memory_budget=budget,
        dim=dim,
        engine=values["engine"],
        max_events=_max_events(values["max_events"], cls, monte_carlo and is_statistics(keep)),
        spec=spec,
        budget=None if budget is None else _budget_bytes(budget),
        monte_carlo=monte_carlo,
    )


def _max_events(max_events: int | None, cls: type[Model], statistics: bool) -> int | None:
    """`[sweep] max_events`, for a model with events whose record the sweep keeps."""
    if max_events is not None and not declared_events(cls)[0]:
        raise ConfigError(
            f"{cls.__name__} declares no events, so there is nothing to cap: remove max_events",
            "sweep.max_events",
        )
    if max_events is not None and statistics:
        raise ConfigError(
            "statistics over Monte Carlo paths keep no event record: remove max_events",
            "sweep.max_events",
        )
    return max_events


def _monte_carlo_checks(values: dict[str, Any], kind: str, cls: type[Model]) -> None:
    """`[sweep]` of a stochastic model: Monte Carlo paths (`samples`) of a grid or zip."""
    name = cls.__name__
    if kind in ("random", "lhs"):
        raise ConfigError(
            f"{name} is stochastic: its sweeps run samples = <Monte Carlo paths> per point "
            f'of a grid or zip sweep (kind = "grid" or "zip"), not {kind} parameter draws',
            "sweep.kind",
        )
    if values["samples"] is None:
        raise ConfigError(
            f"{name} is stochastic: give the number of Monte Carlo paths per point, e.g. "
            "samples = 10000 (and seed = 0; path i of point p gets the key "
            "fold_in(key(seed), p * samples + i))",
            "sweep.samples",
        )


def _check_paths(samples: int, points: int) -> None:
    """The Monte Carlo paths' count against what their keys can tell apart."""
    try:
        check_paths(samples, points)
    except ValueError as e:
        raise ConfigError(str(e).removeprefix("samples: "), "sweep.samples") from None


def _check_statistics(keep: list[str], cls: type[Model]) -> None:
    """Check statistics over the paths (`["x_mean", "x_q05"]`) against the model."""
    try:
        plan_statistics(keep, cls, field_defaults(cls)["state"])
    except ValueError as e:
        raise ConfigError(str(e).removeprefix("keep: "), "sweep.keep") from None


def _entries(values: dict[str, Any], cls: type[Model], allow_empty: bool) -> dict[str, Any]:
    """The swept keys of `[sweep]`, as written, each checked against the model's keys
    (none at all only in a Monte Carlo sweep: `allow_empty`)."""
    entries = dict(values["entries"])
    # `state.x = ...` (a dotted key) arrives as a `state` table: flatten it to "state.x".
    state = entries.pop("state", None)
    if state is not None:
        if not isinstance(state, dict) or not state:
            raise ConfigError(
                "expected a table of state variables (state.x = { linspace = [...] }), "
                f"got {given(state)}",
                "sweep.state",
            )
        entries.update({state_key(k): v for k, v in state.items()})
    if not entries and not allow_empty:
        raise ConfigError(
            'nothing to sweep: add a parameter (or a quoted "state.<var>") with its values, '
            "e.g. rho = { linspace = [0.0, 21.0, 100] }",
            "sweep",
        )
    settings = [k for k in values if k != "entries"]
    for key in entries:
        try:
            check_keys([key], cls, "[sweep]")
        except ValueError as e:
            # A misspelt setting lands here too: say so.
            close = did_you_mean(key, settings).replace("did you mean", "or the setting")
            problem = str(e).removeprefix(f"[sweep] key {key!r}: ")
            raise ConfigError(problem + close, f"sweep.{key}") from None
    return entries


def _check_settings(
    values: dict[str, Any], kind: str, built: dict[str, Any], monte_carlo: bool
) -> str | None:
    """Check the settings of `[sweep]` against its kind; return the dimension name (`None`
    for a grid, whose dimensions are named after the keys)."""
    random = kind in ("random", "lhs")
    if random and values["samples"] is None:
        raise ConfigError(
            f"a {kind} sweep needs the number of points: add samples = 1000", "sweep.samples"
        )
    for key in ("samples", "seed"):
        if not random and not monte_carlo and values[key] is not None:
            raise ConfigError(
                f'{key} applies to kind = "random" or "lhs" only; this sweep is "{kind}" (or to '
                "the Monte Carlo paths of a stochastic model, and this model has no noise)",
                f"sweep.{key}",
            )
    if kind == "grid" and values["dim"] is not None:
        raise ConfigError(
            "a grid has one dimension per key, named after it: remove dim", "sweep.dim"
        )
    if kind == "zip":
        lengths = {key: v.size for key, v in built.items()}
        if len(set(lengths.values())) > 1:
            raise ConfigError(
                "a zip sweep pairs values, so every key needs as many values; got "
                + ", ".join(f"{k}: {n}" for k, n in lengths.items()),
                "sweep",
            )
    dim = None if kind == "grid" else (values["dim"] or "sample")
    if dim in built:
        raise ConfigError(f"dim {dim!r} is also a swept key; choose another name", "sweep.dim")
    return dim


def _check_keep(keep: str | list[str], cls: type[Model], time: TimeSpec) -> None:
    """Check `keep` against the model's variables and observables and the saved times."""
    save = time.save
    if save == "dense":
        raise ConfigError(
            '"dense" keeps the interpolant of one solve; a sweep stores values at save '
            "times: give a number of points or a list of times",
            "time.save",
        )
    save_text = repr(save) if not isinstance(save, tuple) else f"[{len(save)} times]"
    try:
        plan_keep(keep, cls, field_defaults(cls)["state"], time.n_saved, save_text)
    except ValueError as e:
        raise ConfigError(str(e).removeprefix("keep: "), "sweep.keep") from None


def _budget_bytes(budget: str | int) -> int:
    """`memory_budget` in bytes (`"512MiB"` → 536870912)."""
    try:
        return parse_bytes(budget)
    except ValueError as e:
        raise ConfigError(str(e).removeprefix("memory_budget: "), "sweep.memory_budget") from None


def _build(
    kind: str, built: dict[str, Any], samples: int | None, seed: int | None, dim: str | None
) -> AbstractSweep:
    """The sweep spec (values in float64; the run rounds them to its dtype)."""
    if kind == "grid":
        return GridSweep(built)
    if kind == "zip":
        return ZipSweep(built, dim=dim)
    return RandomSweep(built, samples, seed=seed, method=kind, dim=dim)
