"""One place that fills in the solver settings a caller left unset, and checks tolerances.

`simulate`, `sweep` and configs all resolve `solver`, `dt0`, `controller`, `rtol`, `atol`,
`max_steps` and `root_tol` here, so a Python call and a config that leave the same things out
run the same solve. Precedence: the caller's value, then the model's `solver_defaults`, then
difsim's. [`check_tolerance`][] is the one tolerance check (`rtol`, `atol`, `root_tol`), used by the
Python API and the config's `[solver]` section alike, which also refuses an `rtol` the run's
precision cannot deliver ([`rtol_floor`][]); [`check_atol_scale`][] the one check of `atol`
against the size of the state.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

GLOBAL_DEFAULTS: dict[str, Any] = dict(rtol=1e-6, atol=1e-6, max_steps=16_384)
KEYS = ("solver", "dt0", "controller", "rtol", "atol", "max_steps", "root_tol")
# Tied to the model's own choice of solver: dropped when the caller picks another solver.
_SOLVER_TIED = ("dt0", "controller", "root_tol")
_TOLERANCES = ("rtol", "atol", "root_tol")
# How the message of an rtol below float32's floor says to turn float64 on (configs say it
# their own way).
X64_HINT = "enable float64 (jax.config.update('jax_enable_x64', True) before building the model)"


def check_tolerance(
    key: str, value: Any, name: str | None = None, *, dtype=None, x64: str = X64_HINT
) -> None:
    """Raise a `ValueError` naming `name` and `value` unless `value` is a usable tolerance
    `key` (`"rtol"`, `"atol"` or `"root_tol"`).

    `rtol`: one finite number in `(0, 1)` (a relative error of 1 or more accepts anything),
    and with the run's floating `dtype` given, above what that precision can deliver
    ([`rtol_floor`][]: 6e-7 in float32, 1.1e-15 in float64). `atol`: a finite number
    `> 0`, or an array of them (one per state variable, checked against the state by
    [`solver_settings`][]); no floor, as floating point resolves small numbers as finely
    as large ones. `root_tol`: one number in `(0, 1)`, a fraction of the step's error
    allowance (see `difsim.solvers.StageNewton`, which itself stops its iteration at the
    rounding noise of the precision). A traced value (a tolerance under `vmap`) cannot be
    inspected and passes. `name` is how the message names it (default `key`; e.g.
    `"Lorenz.solver_defaults['rtol']"`), `x64` how it says to turn float64 on.
    """
    if value is None or isinstance(value, jax.core.Tracer):
        return
    name = key if name is None else name
    try:
        array = None if isinstance(value, str | bool) else np.asarray(value, np.float64)
    except (TypeError, ValueError):
        array = None
    if array is None or np.asarray(value).dtype == bool:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    if key in ("rtol", "root_tol") and array.ndim != 0:
        raise ValueError(f"{name} must be one number, got an array of shape {array.shape}")
    if not np.all(np.isfinite(array)) or not np.all(array > 0):
        what = "a finite number > 0" if array.ndim == 0 else "finite numbers > 0"
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if key == "rtol" and not float(array) < 1:
        raise ValueError(
            f"{name} must be < 1 (a relative error; 1e-6 asks for about 6 digits), got {value!r}"
        )
    if key == "root_tol" and not float(array) < 1:
        raise ValueError(
            f"{name} must be < 1: the nonlinear solves' error as a fraction of the step's "
            f"error allowance (default 0.01), got {value!r}"
        )
    if key == "rtol" and dtype is not None and float(array) <= (floor := rtol_floor(dtype)):
        kind = jnp.dtype(dtype).name
        fix = f"use rtol >= {_round_up(floor):.0e}"
        if jnp.finfo(dtype).bits < 64:
            fix = f"{x64}, or {fix}"
        raise ValueError(
            f"{name}={value!r} is below what {kind} can deliver (its attainable relative error "
            f"is about {floor:.2g}, 10 unit roundoffs): {fix}"
        )


def rtol_floor(dtype) -> float:
    """The smallest `rtol` a solve in floating `dtype` can deliver: 10 unit roundoffs,
    `10 · eps / 2` (5.96e-7 in float32, 1.11e-15 in float64); an `rtol` at or below it is
    refused by [`check_tolerance`][].

    Hairer's codes refuse the same (RADAU5, SEULEX: `RTOL <= 10 * UROUND`, "tolerances are
    too small"). Measured (tests/test_tolerance_floor.py; tsit5, kvaerno5 and dopri8 on
    Lorenz to t = 1, exponential decay to t = 5 and van der Pol to t = 10, error in the
    max-norm relative to the solution's size): at an `rtol` from the floor up to 100x
    above it the error stayed within 13x `rtol`, as at looser tolerances; below it the
    rounding of each step takes over (float32 at `rtol = 1e-9`: 145-1290x `rtol`). scipy's
    `solve_ivp` raises `rtol` to 100 eps instead, which in float32 (1.2e-5) would refuse
    difsim's default 1e-6.
    """
    return 5.0 * float(jnp.finfo(dtype).eps)


def _round_up(x: float) -> float:
    """`x` rounded up to one significant digit (5.96e-7 -> 6e-7)."""
    scale = 10.0 ** np.floor(np.log10(x))
    return float(np.ceil(x / scale * (1 - 1e-12)) * scale)


def check_atol_scale(
    atol: Any,
    state: Iterable[tuple[str, Any]],
    model: str,
    name: str = "atol",
    *,
    rtol: Any = None,
    note: str = "",
) -> None:
    """Raise a `ValueError` unless `atol` is below the size of the state it controls.

    The error test accepts a step whose error estimate is within `atol + rtol·|y|`: an
    `atol` as large as the state itself accepts any step while the state stays that size
    (`ExponentialDecay` with `atol=1e3` "succeeded" in 4 steps with y(10) = 138 instead of
    4.5e-5). The state's size is the largest absolute initial value over all its variables
    (`state`: `(name, value)` pairs, e.g. `Model.initial_state().items()`).

    - One `atol`: refused if it is at least that size.
    - One `atol` per variable (shape `(n_vars,)`, or any shape of that size): the entry of a
      variable that starts non-zero is refused if it is at least the whole state's size. A
      variable may start small and grow (an epidemic's infected from 1e-8 with atol 1e-6),
      so an entry is only compared with the largest variable, not with its own start.
    - Not checked: a state that starts at zero everywhere (it has no size yet: `atol`
      alone sets the scale until the state grows), the entry of a variable that starts at
      zero, and a traced `atol` or state (under `jit`/`vmap` of the initial values).

    `model` and `name` say whose state and which tolerance (`"atol"`, `"Chem.solver_defaults
    ['atol']"`, ...) the message names, `note` where the value came from (`" (difsim's
    default)"`); `rtol`, if concrete, scales the suggested `atol`.
    """
    values = list(state)
    if atol is None or _traced(atol) or any(_traced(v) or v is None for _, v in values):
        return
    sizes = [_largest(v) for _, v in values]
    size = max(sizes, default=0.0)
    if not size > 0 or not np.isfinite(size):
        return
    entries = np.asarray(atol, np.float64).reshape(-1)
    if entries.size == 1:
        culprits = [0] if entries[0] >= size else []
    elif entries.size == len(values):
        culprits = [i for i, a in enumerate(entries) if sizes[i] > 0 and a >= size]
    else:  # a shape the caller reports (see `solver_settings`)
        return
    if not culprits:
        return
    i, where = culprits[0], int(np.argmax(sizes))
    one = entries.size == 1
    which = "" if one else f" (its entry for {values[i][0]!r})"
    scale = rtol if isinstance(rtol, float | int) and 0 < rtol < 1 else 1e-6
    raise ValueError(
        f"{name}={_short(atol)}{note}{which} is at least the size of {model}'s state (its largest "
        f"initial value is {size:.3g}, of {values[where][0]!r}): the error test would accept "
        f"any step, with errors as large as the state itself. Give an atol well below that "
        f"size, e.g. {scale * size:.0e} (rtol times it)"
        + (", or one atol per state variable" if one else "")
    )


def atol_origin(cls: type, given: bool) -> tuple[str, str]:
    """`(name, note)` of the `atol` a solve of `cls` uses, for [`check_atol_scale`][]'s
    message: the caller's, the model's `solver_defaults`' or difsim's default."""
    if given:
        return "atol", ""
    if "atol" in (getattr(cls, "solver_defaults", None) or {}):
        return f"{cls.__name__}.solver_defaults['atol']", ""
    return "atol", " (difsim's default)"


def _largest(value: Any) -> float:
    """max |value|, 0 for an empty array; a device array's is reduced where it lives (a
    PDE field on a GPU: one number comes back, not the field)."""
    if np.size(value) == 0:
        return 0.0
    if isinstance(value, jax.Array):
        # Concrete values inside a trace (a model closed over by `jit`): computed now.
        with jax.ensure_compile_time_eval():
            return float(jnp.max(jnp.abs(value)))
    return float(np.max(np.abs(np.asarray(value))))


def _traced(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


def _short(value: Any) -> str:
    if np.ndim(value) == 0:
        return repr(float(np.asarray(value)))
    return "[" + ", ".join(f"{a:g}" for a in np.asarray(value, np.float64).reshape(-1)) + "]"


def model_solver_defaults(cls: type) -> dict[str, Any]:
    """The model class's `solver_defaults`, checked."""
    defaults = getattr(cls, "solver_defaults", None) or {}
    if not isinstance(defaults, Mapping):
        raise TypeError(f"{cls.__name__}.solver_defaults must be a dict, got {defaults!r}")
    unknown = [k for k in defaults if k not in KEYS]
    if unknown:
        raise ValueError(
            f"{cls.__name__}.solver_defaults has unknown key {unknown[0]!r}; keys are "
            f"{', '.join(KEYS)}"
        )
    for key in _TOLERANCES:
        name = f"{cls.__name__}.solver_defaults[{key!r}]"
        check_tolerance(key, defaults.get(key), name)
    return dict(defaults)


def resolve_solver_settings(
    cls: type, *, dtype=None, x64: str = X64_HINT, dae: bool = False, **given: Any
) -> dict[str, Any]:
    """`{key: value}` for every key in `KEYS`: `given` (non-`None`) wins, then the model's
    `solver_defaults`, then difsim's defaults (tsit5, or kvaerno5 for `stiff` models,
    rodas5p for a differential-algebraic model: `dae`).
    `dtype`: the run's floating precision, whose floor the resolved `rtol` must clear (see
    [`check_attainable`][]; `None`: not checked).

    **Raises:** `ValueError` for a tolerance that [`check_tolerance`][] refuses, naming
    the argument (or the model's `solver_defaults` entry) and the value.
    """
    for key in _TOLERANCES:
        check_tolerance(key, given.get(key))
    defaults = model_solver_defaults(cls)
    own_solver = given.get("solver") is None or given.get("solver") == defaults.get("solver")
    out: dict[str, Any] = {}
    for key in KEYS:
        value = given.get(key)
        if value is None and (own_solver or key not in _SOLVER_TIED):
            value = defaults.get(key)
        if value is None:
            value = GLOBAL_DEFAULTS.get(key)
        out[key] = value
    if out["solver"] is None:
        stiff = "kvaerno5" if getattr(cls, "stiff", False) else "tsit5"
        out["solver"] = "rodas5p" if dae else stiff
    check_attainable(cls, out["rtol"], given.get("rtol") is not None, dtype, x64)
    return out


def check_attainable(cls: type, rtol: Any, given: bool, dtype, x64: str = X64_HINT) -> None:
    """Raise unless `rtol`, resolved for a solve of `cls` in floating `dtype` (`None`: not
    checked), is above what that precision delivers ([`rtol_floor`][]), naming where it
    came from: the caller (`given`), the model's `solver_defaults` or difsim's default."""
    if dtype is None:
        return
    if given:
        name = "rtol"
    elif "rtol" in (getattr(cls, "solver_defaults", None) or {}):
        name = f"{cls.__name__}.solver_defaults['rtol']"
    else:
        name = "rtol (difsim's default)"
    check_tolerance("rtol", rtol, name, dtype=jnp.finfo(dtype).dtype, x64=x64)
