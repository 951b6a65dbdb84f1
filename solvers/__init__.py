"""Named time steppers, step-size controllers and adjoints for difsim.

This package is the lowest layer of difsim: it depends on diffrax alone, never on the
difsim core, so the core (and configs) can look solvers up by name without import cycles.
Every name a config may use is listed in [`SOLVERS`][], [`CONTROLLERS`][] and
[`ADJOINTS`][]; nothing is re-implemented — each entry builds a diffrax object.
"""

from difsim.solvers._registry import (
    ADJOINT_DESCRIPTIONS as ADJOINT_DESCRIPTIONS,
    ADJOINTS as ADJOINTS,
    CONTROLLERS as CONTROLLERS,
    SOLVERS as SOLVERS,
    SolverInfo as SolverInfo,
    make_adjoint as make_adjoint,
    make_controller as make_controller,
    make_solver as make_solver,
    solver_info as solver_info,
)
