"""The `[solver]` section of a config for a stochastic model: its SDE solver, checked with
the rules `simulate` applies (`difsim._core.sde_solver_settings`: the noise's calculus,
additive or not, fixed or adaptive steps)."""

from typing import Any

import numpy as np

from difsim._config._experiment import SolverSpec
from difsim._config._schema import ConfigError
from difsim._core import Layout, SaveSpec, check_saves, sde_solver_settings

# Which key of [solver] an error of the SDE settings is about, by the words of its message.
_CULPRITS = (
    ("root_tol", "solver.root_tol"),
    ("brownian", "solver.brownian"),
    ("save time", "solver.dt0"),
    ("dt0", "solver.dt0"),
    ("controller", "solver.controller"),
    ("atol", "solver.atol"),
    ("tol", "solver.rtol"),
)


def parse_sde_solver(values: dict[str, Any], parsed: dict[str, Any]) -> SolverSpec:
    """The `[solver]` handler for a stochastic model: resolve its SDE settings once (the
    given values, the model's `solver_defaults`, then the SDE defaults) on the model the
    config builds, and return them as a [`SolverSpec`][]."""
    model = parsed["model"].build(host=True)  # loading a config must not start JAX's backend
    time = parsed.get("time")
    if time is not None and time.save == "dense":  # (what simulate refuses, by its key)
        raise ConfigError(
            f'{type(model).__name__} is stochastic: save = "dense" would keep the solver\'s '
            "interpolant between steps, which is not a sample of the process (it drops the "
            "noise within each step); give a number of save points or a list of times",
            "time.save",
        )
    given = {k: values[k] for k in ("controller", "dt0", "rtol", "atol", "max_steps", "root_tol")}
    try:
        settings = sde_solver_settings(
            model, Layout.of(model.initial_state()), solver=values["name"],
            brownian=values["brownian"], dtype=np.dtype(values["dtype"]),
            x64='set [solver] dtype = "float64"', **given,
        )  # fmt: skip
        if time is not None:  # (a fit takes its times from the data)
            check_saves(settings, SaveSpec(**time.kwargs()))
    except (TypeError, ValueError) as e:
        text = str(e)
        key = next((k for word, k in _CULPRITS if word in text.split(":")[0]), "solver.name")
        raise ConfigError(text, key) from None
    controller = settings.controller_requested
    return SolverSpec(
        name=settings.solver_requested,
        rtol=float(settings.rtol),
        atol=float(settings.atol),
        dt0=None if settings.dt0 is None else float(settings.dt0),
        controller=controller if isinstance(controller, str) else type(controller).__name__,
        max_steps=int(settings.max_steps),
        adjoint=values["adjoint"],
        dtype=values["dtype"],
        brownian=values["brownian"],
        seed=values["seed"],
    )
