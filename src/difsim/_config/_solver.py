"""The `[solver]` section of a config: solver, tolerances, step control, adjoint, precision."""

from collections.abc import Iterable
from typing import Any

import numpy as np

from difsim import solvers
from difsim._config._experiment import ModelSpec, SolverSpec, field_defaults
from difsim._config._schema import ConfigError
from difsim._config._stochastic import parse_sde_solver
from difsim._core import (
    KEYS,
    Model,
    State,
    atol_origin,
    check_atol_scale,
    check_backsolve,
    check_tolerance,
    resolve_solver_settings,
)


def parse_solver(values: dict[str, Any], parsed: dict[str, Any]) -> SolverSpec:
    """The `[solver]` handler: resolve the settings once (see [`solver_settings`][]), check
    that solver, controller and step fit together and the model, return a [`SolverSpec`][]."""
    cls = parsed["model"].cls
    if cls.is_stochastic():
        return parse_sde_solver(values, parsed)
    for key in ("brownian", "seed"):
        if values[key] is not None:
            raise ConfigError(
                f"{cls.__name__} has no noise (no diffusion): it has no Brownian path",
                f"solver.{key}",
            )
    if values["name"] is not None and values["name"] not in solvers.SOLVERS:
        raise ConfigError(
            f"{values['name']!r} is an SDE solver, and {cls.__name__} has no noise (no "
            f"diffusion); choose one of {', '.join(map(repr, solvers.SOLVERS))}",
            "solver.name",
        )
    settings = solver_settings(cls, values)
    name = settings["solver"]
    if name not in solvers.SOLVERS:
        raise ConfigError(
            f"{cls.__name__}.solver_defaults names an unknown solver {name!r}", "model.name"
        )
    info = solvers.SOLVERS[name]
    if info.imex and not cls.has_split():
        raise ConfigError(
            f"{name!r} is an IMEX solver, so {cls.__name__} would need rhs_nonstiff and "
            "rhs_stiff; choose a solver that is not IMEX, e.g. 'kvaerno5' or 'tsit5'",
            "solver.name",
        )
    controller = settings["controller"] or ("pid" if info.adaptive else "constant")
    if controller == "pid" and not info.adaptive:
        raise ConfigError(
            f"'pid' needs an error estimate, which solver {name!r} does not have; use "
            'controller = "constant" with a step dt0, or an adaptive solver',
            "solver.controller",
        )
    if controller == "constant" and settings["dt0"] is None:
        raise ConfigError(
            f"a fixed step (controller 'constant', solver {name!r}) needs the step size: "
            "give dt0, e.g. dt0 = 0.01",
            "solver.dt0",
        )
    _check_adjoint(values["adjoint"], cls, name)
    if values["root_tol"] is not None and not info.implicit:
        implicit = ", ".join(repr(n) for n, i in solvers.SOLVERS.items() if i.implicit)
        raise ConfigError(
            f"root_tol sets the nonlinear solves of implicit solvers ({implicit}); solver "
            f"{name!r} solves none: remove root_tol or choose an implicit solver",
            "solver.root_tol",
        )
    return SolverSpec(
        name=name,
        rtol=float(settings["rtol"]),
        atol=float(settings["atol"]),
        dt0=None if settings["dt0"] is None else float(settings["dt0"]),
        controller=controller,
        max_steps=settings["max_steps"],
        adjoint=values["adjoint"],
        dtype=values["dtype"],
        root_tol=None if settings["root_tol"] is None else float(settings["root_tol"]),
    )


def _check_adjoint(adjoint: str, cls: type[Model], solver: str) -> None:
    """`[solver] adjoint` is not used by a run, but it is checked as `simulate` checks it."""
    try:
        check_backsolve(adjoint, cls, solver)
    except ValueError as error:
        raise ConfigError(str(error), "solver.adjoint") from None


def solver_settings(cls: type[Model], values: dict[str, Any]) -> dict[str, Any]:
    """The one place a config resolves its solver settings (the given `[solver]` values,
    then the model's `solver_defaults`, then difsim's): `{key: value}` for `KEYS`."""
    given = {k: values[k] for k in KEYS if k != "solver"}
    dtype = run_dtype(values)
    for key in ("rtol", "atol", "root_tol"):
        try:  # the Python API's check, so both agree
            check_tolerance(key, given[key], dtype=dtype, x64=X64_CONFIG)
        except ValueError as error:
            raise ConfigError(str(error), f"solver.{key}") from None
    try:
        return resolve_solver_settings(
            cls, solver=values["name"], dtype=dtype, x64=X64_CONFIG, **given
        )
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error), "model.name") from None


# How a config turns float64 on, for the message of an rtol below float32's floor.
X64_CONFIG = 'set [solver] dtype = "float64"'


def run_dtype(values: dict[str, Any]) -> np.dtype:
    """The floating dtype a run of the `[solver]` section `values` computes in: its
    `dtype` key (`difsim run` turns float64 on for `"float64"`)."""
    return np.dtype(values["dtype"])


def check_atol_against_state(
    solver: SolverSpec | None,
    model: ModelSpec,
    *,
    atol_given: bool = True,
    state: Iterable[tuple[str, Any]] | None = None,
) -> None:
    """`[solver] atol` against the size of the initial state, as `simulate` checks it
    ([`check_atol_scale`][]). `state`: the built model's initial state (what a run passes,
    once JAX may start); by default the state the config declares (the class's, with
    `[model.state]` applied: plain numbers, so checking a config never starts JAX's
    backend), when the model's `initial_state()` is that state; else nothing is checked
    here and the run checks it. (A stochastic model's was checked by `parse_sde_solver`.)

    **Raises:** [`ConfigError`][] naming `[solver] atol`.
    """
    if solver is None or solver.controller != "pid" or model.cls.is_stochastic():
        return
    state = declared_state(model) if state is None else state
    if state is None:
        return
    name, note = atol_origin(model.cls, atol_given)
    try:
        check_atol_scale(solver.atol, state, model.cls.__name__, name, rtol=solver.rtol,
                         note=note)  # fmt: skip
    except ValueError as error:
        raise ConfigError(str(error), "solver.atol") from None


def declared_state(model: ModelSpec) -> list[tuple[str, Any]] | None:
    """The initial state a config declares (`(name, value)` pairs), if it is what the
    model's `initial_state()` returns; `None` if the model computes its own."""
    state = field_defaults(model.cls).get("state")
    if model.cls.initial_state is not Model.initial_state or not isinstance(state, State):
        return None
    values = {**dict(state.items()), **model.state}
    return [(name, values[name]) for name in state.names]
