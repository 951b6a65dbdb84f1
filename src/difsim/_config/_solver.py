"""The `[solver]` section of a config: solver, tolerances, step control, adjoint, precision."""

from typing import Any

from difsim import solvers
from difsim._config._experiment import SolverSpec
from difsim._config._schema import ConfigError
from difsim._config._stochastic import parse_sde_solver
from difsim._core import (
    KEYS,
    Model,
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
    try:  # [solver] adjoint is not used by a run, but it is checked as simulate checks it
        check_backsolve(values["adjoint"], cls, name)
    except ValueError as error:
        raise ConfigError(str(error), "solver.adjoint") from None
    dt0 = settings["dt0"]
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
        dt0=None if dt0 is None else float(dt0),
        controller=controller,
        max_steps=settings["max_steps"],
        adjoint=values["adjoint"],
        dtype=values["dtype"],
        root_tol=None if settings["root_tol"] is None else float(settings["root_tol"]),
    )


def solver_settings(cls: type[Model], values: dict[str, Any]) -> dict[str, Any]:
    """The one place a config resolves its solver settings (the given `[solver]` values,
    then the model's `solver_defaults`, then difsim's): `{key: value}` for `KEYS`."""
    given = {k: values[k] for k in KEYS if k != "solver"}
    for key in ("rtol", "atol", "root_tol"):
        try:
            check_tolerance(key, given[key])  # the Python API's check, so both agree
        except ValueError as error:
            raise ConfigError(str(error), f"solver.{key}") from None
    try:
        return resolve_solver_settings(cls, solver=values["name"], **given)
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error), "model.name") from None


def check_atol_against_state(parsed: dict[str, Any], atol_given: bool) -> None:
    """`[solver] atol` against the size of the initial state, as `simulate` checks it
    ([`check_atol_scale`][]). Run after the resources check: it builds the model, whose
    initial state may be a field on a grid. (A stochastic model's was checked by
    `parse_sde_solver`, which builds it anyway.)"""
    spec, model = parsed.get("solver"), parsed["model"]
    if spec is None or spec.controller != "pid" or model.cls.is_stochastic():
        return
    try:
        state = model.build().initial_state()
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error), "model.state") from None
    name, note = atol_origin(model.cls, atol_given)
    try:
        check_atol_scale(spec.atol, state.items(), model.cls.__name__, name, rtol=spec.rtol,
                         note=note)  # fmt: skip
    except ValueError as error:
        raise ConfigError(str(error), "solver.atol") from None
