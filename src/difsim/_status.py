"""Per-trajectory status codes: integers that survive `vmap`, netCDF and sweeps."""

import enum

import diffrax as dfx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int


class Status(enum.IntEnum):
    """Outcome of one solve. `0` is success; every other value says what went wrong.

    The integer is what `Solution.status` holds (one per trajectory under `vmap`) and what
    netCDF outputs store, with CF `flag_values`/`flag_meanings` attributes.
    """

    SUCCESS = 0
    EVENT = 1
    MAX_STEPS = 2
    DT_MIN = 3
    NONFINITE = 4
    NONLINEAR_SOLVER = 5
    LINEAR_SOLVER = 6
    MAX_REJECTED = 7
    INTERNAL = 8

    @property
    def ok(self) -> bool:
        """Success, or a terminating event that stopped the solve as asked."""
        return self in (Status.SUCCESS, Status.EVENT)

    @property
    def message(self) -> str:
        """What happened, and a hint on what to change."""
        return _MESSAGES[self]


_MESSAGES = {
    Status.SUCCESS: "solved successfully",
    Status.EVENT: "stopped by the terminating event",
    Status.MAX_STEPS: "the maximum number of steps was reached; raise max_steps, loosen "
    "rtol/atol, or shorten the time span (a stiff problem wants an implicit solver such "
    "as 'kvaerno5')",
    Status.DT_MIN: "the step size fell below dtmin; the problem may be stiff (try "
    "'kvaerno5') or the solution may blow up",
    Status.NONFINITE: "the state became NaN or infinite; check parameters and the initial "
    "state, or whether the solution blows up in finite time",
    Status.NONLINEAR_SOLVER: "the implicit solver's nonlinear iteration failed; tighten "
    "rtol/atol or reduce the initial step dt0",
    Status.LINEAR_SOLVER: "a linear solve inside the implicit solver failed (singular or "
    "non-finite Jacobian)",
    Status.MAX_REJECTED: "too many step rejections in a row",
    Status.INTERNAL: "an internal error in the ODE solver",
}

# Every diffrax outcome, grouped by the advice a user needs. Listed explicitly so a new
# diffrax outcome maps to INTERNAL rather than silently to SUCCESS.
_FROM_DIFFRAX = (
    ("successful", Status.SUCCESS),
    ("event_occurred", Status.EVENT),
    ("max_steps_reached", Status.MAX_STEPS),
    ("dt_min_reached", Status.DT_MIN),
    ("nonfinite", Status.NONFINITE),
    ("nonlinear_max_steps_reached", Status.NONLINEAR_SOLVER),
    ("nonlinear_divergence", Status.NONLINEAR_SOLVER),
    ("singular", Status.LINEAR_SOLVER),
    ("breakdown", Status.LINEAR_SOLVER),
    ("stagnation", Status.LINEAR_SOLVER),
    ("conlim", Status.LINEAR_SOLVER),
    ("nonfinite_input", Status.LINEAR_SOLVER),
    ("max_steps_rejected", Status.MAX_REJECTED),
)


def _diffrax_table() -> np.ndarray:
    # diffrax's RESULTS index → Status, built once. Unlisted indices stay INTERNAL; the
    # table is padded with INTERNAL so a clipped lookup of any future index lands there.
    pairs = [
        (int(getattr(dfx.RESULTS, name)._value), int(status))
        for name, status in _FROM_DIFFRAX
        if hasattr(dfx.RESULTS, name)
    ]
    table = np.full(max(i for i, _ in pairs) + 2, int(Status.INTERNAL), dtype=np.int32)
    for index, code in pairs:
        table[index] = code
    return table


_TABLE = _diffrax_table()


def status_from_result(result: dfx.RESULTS) -> Int[Array, ""]:
    """Map a diffrax `RESULTS` value (possibly batched) to a [`Status`][] integer array."""
    # One gather from a constant table: a chain of `jnp.where`s per outcome would be
    # duplicated by XLA into every output masked by the status (see docs/benchmarks.md).
    # mode="clip", not "fill": no per-element bounds predicate (the padding covers it).
    return jnp.take(jnp.asarray(_TABLE), result._value, mode="clip")


def flag_attrs() -> dict[str, object]:
    """CF-convention attributes describing the status codes (for netCDF variables)."""
    return dict(
        flag_values=[int(s) for s in Status],
        flag_meanings=" ".join(s.name.lower() for s in Status),
        long_name="solver status (0 = success)",
    )
