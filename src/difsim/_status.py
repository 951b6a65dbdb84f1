"""One result scheme for every solve: `simulate`, `sweep`, `fit` and `steady_state`.

[`Status`][] is an integer enumeration whose members carry their messages, like diffrax's
`RESULTS`: the integer survives `vmap`, netCDF and sweep outputs, the message says what
happened. diffrax's and optimistix's results map into it through explicit tables built
from their enumerations: every library member has a definite target, and where several
members share one target the library's own message stays available
([`library_message`][]).
"""

import enum
import warnings

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Int


class Status(enum.IntEnum):
    """Outcome of one solve. `0` is success; every other value says what happened.

    The integer is what `Solution.status` holds (one per trajectory under `vmap`) and what
    netCDF outputs store, with CF `flag_values`/`flag_meanings` attributes. Members by the
    solve that gives them:

    - `simulate`, `sweep`: `SUCCESS`, `EVENT`, `MAX_STEPS`, `DT_MIN`, `NONFINITE`,
      `NONLINEAR_SOLVER`, `LINEAR_SOLVER`, `MAX_REJECTED`, `INTERNAL`, `EVENT_LIMIT`,
      `ZENO`, `EVENT_LOST`, `INCONSISTENT_INIT` (a differential-algebraic model).
    - `fit` (`FitResult.status`): `CONVERGED`, `COMPLETED`, `FIT_MAX_STEPS`, `DIVERGED`,
      `OPTIMIZER_FAILED`, `FIT_STALLED`.
    - `steady_state`: `SUCCESS`, `NEWTON_MAX_STEPS`, `NEWTON_DIVERGED`, `LINEAR_SOLVER`,
      `NONFINITE`.

    Each member also has a short text (`str(status)`, `status.text`: `"success"`, …,
    `"converged"`, `"max_steps"`, `"failed"`): what the JSON and netCDF outputs of a fit
    store, and what `FitResult.status` was before it became a `Status`.

    Deprecated since 0.1 (removed in 0.3 at the earliest): comparing a member with its
    text (`result.status == "converged"`) still works but warns. Members hash as their
    integers, so equality with a string broke Python's rule that equal values hash alike
    (`{"converged": 1}[Status.CONVERGED]` failed), and two members (`MAX_STEPS` of a solve,
    `FIT_MAX_STEPS` of a fit) shared the text `"max_steps"`. Compare with a member
    (`result.status is ds.Status.CONVERGED`) or with `status.text`.

    **Example:**

    ```python
    import difsim as ds

    sol = ds.simulate(ds.models.Lorenz(), t0=0.0, t1=1.0, max_steps=4, throw=False)
    status = ds.Status(int(sol.status))
    assert status is ds.Status.MAX_STEPS and not status.ok and status.text == "max_steps"
    print(status.message)  # what happened, and what to change
    ```
    """

    # (integer, text, message). The integers of the first nine are stored in sweep outputs
    # and never change; new members take the next free integers (the table lookups below
    # and simulate's error messages index by value, so the values stay contiguous).
    SUCCESS = 0, "success", "solved successfully"
    EVENT = 1, "event", "stopped by the terminating event"
    MAX_STEPS = (
        2,
        "max_steps",
        "the maximum number of steps was reached; raise max_steps, loosen rtol/atol, or "
        "shorten the time span (with an explicit solver, a stiff problem wants an implicit "
        "one such as 'kvaerno5')",
    )
    DT_MIN = (
        3,
        "dt_min",
        "the step size fell below dtmin; the problem may be stiff (try 'kvaerno5') or the "
        "solution may blow up (an adaptive SDE solve's dtmin is the finest step its Brownian "
        "path resolves, (t1 - t0) / (8 max_steps) unless its controller sets one: raise "
        "max_steps)",
    )
    NONFINITE = (
        4,
        "nonfinite",
        "the state became NaN or infinite; check parameters and the initial state, or "
        "whether the solution blows up in finite time",
    )
    NONLINEAR_SOLVER = (
        5,
        "nonlinear_solver",
        "the implicit solver's nonlinear iteration failed; tighten rtol/atol or reduce the "
        "initial step dt0 (with 'imex_euler' or 'crank_nicolson', which have none: the stiff "
        "part is not linear in the state; move its nonlinear terms to rhs_nonstiff)",
    )
    LINEAR_SOLVER = (
        6,
        "linear_solver",
        "a linear solve inside the implicit solver failed (singular or non-finite Jacobian)",
    )
    MAX_REJECTED = 7, "max_rejected", "too many step rejections in a row"
    INTERNAL = 8, "internal", "an internal error in the ODE solver"
    CONVERGED = 9, "converged", "the optimizer's tolerance was met"
    COMPLETED = (
        10,
        "completed",
        "all steps ran (optax optimizers have no convergence test: check that the loss "
        "history has flattened)",
    )
    FIT_MAX_STEPS = (
        11,
        "max_steps",
        "the optimizer ran all its steps without meeting its tolerance; raise steps",
    )
    DIVERGED = (
        12,
        "diverged",
        "too many consecutive rejected steps (non-finite loss or failed solves); try a "
        "smaller learning rate, bounds on the parameters (ds.Bounded) or a better initial "
        "guess",
    )
    OPTIMIZER_FAILED = 13, "failed", "the optimizer failed (its own message says why)"
    NEWTON_MAX_STEPS = (
        14,
        "newton_max_steps",
        "Newton's method did not converge within max_steps; start from a guess nearer an "
        "equilibrium (there may be none near it) or raise max_steps",
    )
    NEWTON_DIVERGED = (
        15,
        "newton_diverged",
        "Newton's method diverged; start from a guess nearer an equilibrium",
    )
    EVENT_LIMIT = (
        16,
        "event_limit",
        "more events than max_events happened: the solve stopped at the first one over the "
        "cap (t_end, y_end hold the time and the state just before it); raise max_events, "
        "or the model may chatter (infinitely many events in finite time, e.g. a bouncing "
        "ball with restitution < 1 coming to rest: end the solve before that time, or add "
        "a terminal event)",
    )
    ZENO = (
        17,
        "zeno",
        "the events of one condition accumulate in finite time (Zeno behaviour, e.g. a ball "
        "bouncing ever faster as it comes to rest): their spacing shrank geometrically below "
        "what the solve's tolerances resolve, so it stopped at the first event it cannot "
        "resolve (t_end, within ~100 time tolerances atol + rtol*|t| of where they "
        "accumulate; y_end the state just before it); end the solve before t_end, or give "
        "the event a terminal condition (e.g. stop once the ball is at rest)",
    )
    EVENT_LOST = (
        18,
        "event_lost",
        "an event's crossing was lost: its condition passed zero in the event's direction "
        "without being located (two crossings in one solver step, or a root found at the "
        "wrong crossing); the solve stopped where this was seen (t_end, y_end); tighten "
        "rtol/atol, or cap the step (controller=diffrax.PIDController(..., dtmax=...))",
    )
    FIT_STALLED = (
        19,
        "stalled",
        "the optimizer's own test passed on its last steps, but the result is not a minimum "
        "(a Gauss–Newton step from it would still lower the loss); try several starts "
        "(multistart=(16, 0)) or multiple shooting (multiple_shooting=4)",
    )
    INCONSISTENT_INIT = (
        20,
        "inconsistent_init",
        "the algebraic variables could not be made consistent with the constraints at t0 "
        "(Newton on 0 = g(t0, x, z) did not converge from the given values): give them "
        "values closer to a solution of the constraints, or check that they have one",
    )

    def __new__(cls, value: int, text: str, message: str):
        member = int.__new__(cls, value)
        member._value_ = value
        member._text = text
        member._message = message
        return member

    @property
    def ok(self) -> bool:
        """Success: a solve that succeeded or stopped at its terminating event, a fit that
        converged or ran all its steps."""
        return self in (Status.SUCCESS, Status.EVENT, Status.CONVERGED, Status.COMPLETED)

    @property
    def message(self) -> str:
        """What happened, and a hint on what to change."""
        return self._message

    @property
    def text(self) -> str:
        """The short text (`"converged"`, `"max_steps"`, …) that outputs store."""
        return self._text

    # Equal to its integer, as an IntEnum; to its text only with a DeprecationWarning (see
    # the class docstring): the hash is the integer's.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            warnings.warn(
                f"comparing a Status with a string ({other!r}) is deprecated since difsim "
                f"0.1 and will be removed in 0.3: compare with ds.Status.{self.name} (or "
                f"status.text == {other!r})",
                DeprecationWarning,
                stacklevel=2,
            )
            return other == self._text
        return int.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = int.__hash__

    def __str__(self) -> str:
        return self._text

    def __format__(self, spec: str) -> str:
        return format(self._text, spec)


_MAX_STEPS_BASE = (
    "the maximum number of steps was reached; raise max_steps, loosen rtol/atol, or "
    "shorten the time span"
)


def max_steps_message(implicit: bool | None, mostly_rejected: bool) -> str:
    """`Status.MAX_STEPS`'s message for a solve whose solver is known: `implicit` (`None`:
    unknown), and whether most of its steps were rejected.

    `implicit`: whether the solver is one for stiff problems (implicit, or a Rosenbrock
    method). Suggests an implicit solver only to the user of an explicit one; with a stiff
    solver whose steps were mostly rejected, points at its nonlinear solves instead.
    """
    if implicit is None:
        return Status.MAX_STEPS.message
    if not implicit:
        return f"{_MAX_STEPS_BASE} (a stiff problem wants an implicit solver such as 'kvaerno5')"
    if mostly_rejected:
        # The named implicit solvers' stage solves stop at root_tol (StageNewton) and their
        # failures shrink the step; what remains is a step the error test keeps refusing,
        # or an unusual problem for the nonlinear solves (a poor Jacobian, a custom solver).
        return (
            f"{_MAX_STEPS_BASE}. Most steps were rejected: by the error test, or by the "
            "implicit solver's nonlinear solves; loosen rtol/atol, or (Kvaerno, KenCarp, "
            "Radau, implicit Euler) only their nonlinear solves' tolerance (root_tol=0.1; "
            "config [solver] root_tol)"
        )
    return _MAX_STEPS_BASE


def result_index(result) -> Int[Array, "*batch"]:
    """The integer of an item of an equinox enumeration (diffrax's or optimistix's
    `RESULTS`, possibly batched): the one leaf of its pytree, `0 <= index < len(results)`."""
    # Equinox documents its enumeration items as pytrees (they pass through `jit` and
    # `vmap`) but names no accessor for their integer; the pytree's one leaf is that integer
    # (tests/test_status.py checks it against every member's message).
    (index,) = jax.tree.leaves(result)
    return index


def _item(results, index: int):
    """The item of `results` with integer `index`: the pytree of a member, its leaf replaced."""
    treedef = jax.tree.structure(results.successful)
    return jax.tree.unflatten(treedef, [np.asarray(index, np.int32)])


# Every diffrax outcome, by name, grouped by the advice a user needs. Every member of
# `diffrax.RESULTS` must be listed (tests/test_status.py checks), so that a new one is a
# decision here rather than a silent fall into INTERNAL.
DIFFRAX_TARGETS = {
    "successful": Status.SUCCESS,
    "event_occurred": Status.EVENT,
    "max_steps_reached": Status.MAX_STEPS,
    "dt_min_reached": Status.DT_MIN,
    "nonfinite": Status.NONFINITE,
    "nonlinear_max_steps_reached": Status.NONLINEAR_SOLVER,
    "nonlinear_divergence": Status.NONLINEAR_SOLVER,
    "singular": Status.LINEAR_SOLVER,
    "breakdown": Status.LINEAR_SOLVER,
    "stagnation": Status.LINEAR_SOLVER,
    "conlim": Status.LINEAR_SOLVER,
    "nonfinite_input": Status.LINEAR_SOLVER,
    "max_steps_rejected": Status.MAX_REJECTED,
    "internal_error": Status.INTERNAL,
}

# Every optimistix outcome of a root find (`steady_state`), likewise complete. In a fit,
# any optimistix failure is OPTIMIZER_FAILED, and `FitResult.message` quotes optimistix.
OPTIMISTIX_TARGETS = {
    "successful": Status.SUCCESS,
    "max_steps_reached": Status.NEWTON_MAX_STEPS,
    "nonlinear_max_steps_reached": Status.NEWTON_MAX_STEPS,
    "nonlinear_divergence": Status.NEWTON_DIVERGED,
    "singular": Status.LINEAR_SOLVER,
    "breakdown": Status.LINEAR_SOLVER,
    "stagnation": Status.LINEAR_SOLVER,
    "conlim": Status.LINEAR_SOLVER,
    "nonfinite_input": Status.NONFINITE,
    "nonfinite": Status.NONFINITE,
}


def _table(results, targets: dict[str, Status]) -> np.ndarray:
    # Library index → Status, built once. Padded with INTERNAL (also the target of a
    # member missing from `targets`) so that a clipped lookup of any index lands there.
    # A name this library version lacks (an older diffrax) has nothing to map.
    table = np.full(len(results) + 1, int(Status.INTERNAL), np.int32)
    for name, target in targets.items():
        member = getattr(results, name, None)
        if member is not None:
            table[int(result_index(member))] = int(target)
    return table


_DIFFRAX_TABLE = _table(dfx.RESULTS, DIFFRAX_TARGETS)
_OPTIMISTIX_TABLE = _table(optx.RESULTS, OPTIMISTIX_TARGETS)


def status_from_result(result: dfx.RESULTS) -> Int[Array, "*batch"]:
    """Map a diffrax `RESULTS` value (possibly batched) to a [`Status`][] integer array."""
    # One gather from a constant table: a chain of `jnp.where`s per outcome would be
    # duplicated by XLA into every output masked by the status (see docs/benchmarks.md).
    # mode="clip", not "fill": no per-element bounds predicate (the padding covers it).
    return jnp.take(jnp.asarray(_DIFFRAX_TABLE), result_index(result), mode="clip")


def status_from_optimistix(result: optx.RESULTS) -> Int[Array, "*batch"]:
    """Map an optimistix `RESULTS` value of a root find (possibly batched) to a
    [`Status`][] integer array."""
    return jnp.take(jnp.asarray(_OPTIMISTIX_TABLE), result_index(result), mode="clip")


def optimistix_status(index: int) -> Status:
    """The [`Status`][] of optimistix outcome `index` of a root find (on the host; see
    [`status_from_optimistix`][] for arrays)."""
    return Status(int(_OPTIMISTIX_TABLE[min(index, _OPTIMISTIX_TABLE.shape[0] - 1)]))


def library_message(results, index: int) -> str:
    """The library's own message for outcome `index` of `results` (`diffrax.RESULTS` or
    `optimistix.RESULTS`): what a [`Status`][] shared by several outcomes leaves out."""
    if 0 <= index < len(results):
        return str(results[_item(results, index)])
    return f"unknown {results.__module__}.{results.__qualname__} outcome {index}"


def flag_attrs(dtype: np.dtype | type = np.int32) -> dict[str, object]:
    """CF-convention attributes describing the status codes (for netCDF variables).

    `flag_values` is an array of `dtype`, the status variable's own: CF requires the two
    to share a type, and a list of Python integers would be written as int64.
    """
    return dict(
        flag_values=np.array([int(s) for s in Status], dtype=dtype),
        flag_meanings=" ".join(s.name.lower() for s in Status),
        long_name="solver status (0 = success)",
    )


class SolveError(RuntimeError):
    """A solve that failed, raised by `simulate(..., throw=True)` (the default).

    **Attributes:**

    - `status`: the [`Status`][] of the failed solve (`Status.MAX_STEPS`, …).
    - `solution`: the `Solution` as `throw=False` returns it (values past the failure NaN;
      step counts, `t_end` and `y_end` where events record them), for a look at where the
      solve stopped; `None` where it is not kept.

    Raised only where difsim can read the status on the host: from a call outside
    `jax.jit` (also under an eager `jax.grad`). Inside `jax.jit` or `jax.vmap` compiled
    code cannot raise a Python exception of its own: there the same message comes as
    equinox's `EquinoxRuntimeError`; use `throw=False` and read `Solution.status` instead.

    **Example:**

    ```python
    import difsim as ds

    try:
        ds.simulate(ds.models.Lorenz(), t0=0.0, t1=10.0, max_steps=8)  # throw=True: the default
    except ds.SolveError as error:
        assert error.status is ds.Status.MAX_STEPS
        print(error)  # what failed, and what to change
        assert error.solution is None or int(error.solution.status) == ds.Status.MAX_STEPS
    else:
        raise AssertionError("8 steps cannot reach t = 10")
    ```
    """

    def __init__(self, message: str, *, status: Status, solution=None):
        super().__init__(message)
        self.status = status
        self.solution = solution


SolveError.__module__ = "difsim"  # its public name, in tracebacks
