"""Named SDE solvers: an explicit name → class table with each method's calculus, orders and
the noise it needs, so that a model's noise can pick its default and refuse a mismatch.

The orders are those of diffrax's SDE solver table (`docs/devdocs/SDE_solver_table.md` in
diffrax 0.7; one correction, Euler–Heun, noted below), per noise type: *general* (any
diffusion matrix), *commutative* (e.g. scalar noise, or diagonal noise whose coefficient of
variable i depends on variable i only) and *additive* (diffusion independent of the
state). `tests/test_sde_orders.py` measures them.
"""

import dataclasses

import diffrax as dfx

CALCULI = ("ito", "stratonovich")
NOISE_TYPES = ("general", "commutative", "additive")


@dataclasses.dataclass(frozen=True)
class SDESolverInfo:
    """What difsim needs to know about a named SDE solver.

    **Fields:**

    - `name`: the name configs and `simulate(solver=...)` use.
    - `cls`: the diffrax solver class.
    - `calculus`: `"ito"` or `"stratonovich"`: the solution it converges to. (For additive
      noise the two coincide, so every solver may solve an additive SDE of either calculus.)
    - `additive_only`: whether it is valid only for additive noise (SRA1, ShARK, SEA).
    - `strong`, `weak`: `{noise type: order}` for `"general"`, `"commutative"` and
      `"additive"` noise (absent where the method does not apply).
    - `adaptive`: whether it carries an embedded error estimate (a PID controller may adapt
      its steps; valid for commutative noise, see `docs/stochastic.md`).
    - `description`: one line for `difsim solvers`.
    """

    name: str
    cls: type[dfx.AbstractSolver]
    calculus: str
    additive_only: bool
    strong: dict[str, float]
    weak: dict[str, float]
    adaptive: bool
    description: str


def _orders(general, commutative, additive) -> tuple[dict[str, float], dict[str, float]]:
    table = dict(general=general, commutative=commutative, additive=additive)
    strong = {k: v[0] for k, v in table.items() if v is not None}
    weak = {k: v[1] for k, v in table.items() if v is not None}
    return strong, weak


def _info(name, cls, calculus, orders, adaptive, description, additive_only=False):
    strong, weak = _orders(*orders)
    info = SDESolverInfo(name, cls, calculus, additive_only, strong, weak, adaptive, description)
    return name, info


_ANY = ((0.5, 1.0), (1.0, 1.0), (1.0, 1.0))  # general, commutative, additive: (strong, weak)
_HIGH = ((0.5, 1.0), (1.0, 1.0), (1.5, 2.0))
_ADDITIVE = (None, None, (1.5, 2.0))

SDE_SOLVERS: dict[str, SDESolverInfo] = dict(
    [
        _info("euler", dfx.Euler, "ito", ((0.5, 1.0), (0.5, 1.0), (1.0, 1.0)), False,
              "Euler–Maruyama (Itô): the cheapest; fixed step"),
        _info("milstein", dfx.ItoMilstein, "ito", _ANY, False,
              "Milstein (Itô): strong order 1 for commutative noise; fixed step"),
        # diffrax's table gives strong order 0.5 for commutative noise; its trapezoidal
        # noise term is the Stratonovich Milstein correction there, and
        # tests/test_sde_orders.py measures 1 (as for Heun: Rümelin, SIAM J. Numer.
        # Anal. 19, 604 (1982); Kloeden & Platen 1992, §11.1).
        _info("euler_heun", dfx.EulerHeun, "stratonovich", _ANY, False,
              "Euler–Heun (Stratonovich): cheap; fixed step"),
        _info("heun", dfx.Heun, "stratonovich", _ANY, True,
              "Heun (Stratonovich): strong order 1 for commutative noise; adaptive"),
        _info("stratonovich_milstein", dfx.StratonovichMilstein, "stratonovich", _ANY, False,
              "Milstein (Stratonovich): strong order 1 for commutative noise; fixed step"),
        _info("reversible_heun", dfx.ReversibleHeun, "stratonovich", _ANY, True,
              "reversible Heun (Stratonovich): algebraically reversible; adaptive"),
        _info("spark", dfx.SPaRK, "stratonovich", _HIGH, True,
              "SPaRK (Stratonovich): strong 1.5 for additive noise; adaptive"),
        _info("general_shark", dfx.GeneralShARK, "stratonovich", _HIGH, False,
              "general ShARK (Stratonovich): strong 1.5 for additive noise; fixed step"),
        _info("slowrk", dfx.SlowRK, "stratonovich", ((0.5, 1.0), (1.5, 2.0), (1.5, 2.0)), False,
              "SLOW-RK (Stratonovich): strong 1.5 for commutative noise; fixed step"),
        _info("shark", dfx.ShARK, "stratonovich", _ADDITIVE, True,
              "ShARK: strong 1.5, weak 2 for additive noise (default there); adaptive",
              additive_only=True),
        _info("sra1", dfx.SRA1, "stratonovich", _ADDITIVE, True,
              "SRA1 (Rößler): strong 1.5, weak 2 for additive noise; adaptive",
              additive_only=True),
        _info("sea", dfx.SEA, "stratonovich", (None, None, (1.0, 1.0)), False,
              "shifted Euler: strong 1 for additive noise, one evaluation per step",
              additive_only=True),
    ]
)  # fmt: skip

# The default per (calculus, additive): additive noise has the high-order adaptive ShARK
# (Itô and Stratonovich solutions coincide); otherwise the standard method of each calculus.
_DEFAULTS = {("ito", False): "euler", ("stratonovich", False): "heun"}


def default_sde_solver(calculus: str, additive: bool) -> str:
    """The name of the default solver for noise of `calculus` (`"ito"`/`"stratonovich"`),
    additive or not: `"shark"` for additive noise, else `"euler"` (Itô, Euler–Maruyama) or
    `"heun"` (Stratonovich)."""
    return "shark" if additive else _DEFAULTS[(calculus, False)]


def sde_solver_info(solver: str | dfx.AbstractSolver) -> SDESolverInfo | None:
    """The [`SDESolverInfo`][] of a solver given by name (case-insensitive) or instance
    (`None` if it is not in the table)."""
    if isinstance(solver, str):
        return SDE_SOLVERS.get(solver.lower())
    return next((i for i in SDE_SOLVERS.values() if type(solver) is i.cls), None)


def make_sde_solver(name: str) -> dfx.AbstractSolver:
    """A diffrax solver from a name in [`SDE_SOLVERS`][].

    **Raises:** `ValueError` listing the SDE solvers for an unknown name.
    """
    info = sde_solver_info(name)
    if info is None:
        names = ", ".join(repr(k) for k in SDE_SOLVERS)
        raise ValueError(f"unknown SDE solver {name!r}; choose one of {names}")
    return info.cls()
