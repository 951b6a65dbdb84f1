"""`SaveSpec`: a solve's time span and the times it saves, checked once where they enter."""

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Real

from difsim._core._custom_types import RealScalarLike, SaveLike, Times
from difsim._resources import check_memory

DEFAULT_SAVE_POINTS = 101


class SaveSpec(eqx.Module):
    """When a solve starts and ends, and which times it saves (like `diffrax.SaveAt`).

    The checked form of [`simulate`][]'s `t`, `t0`, `t1` and `save` arguments: the
    constructor takes them exactly as `simulate` does and raises `ValueError` on anything
    wrong, so whatever receives a `SaveSpec` (`simulate`, a sweep, a config run) uses it
    without checking again. Checks that need values are skipped for traced ones (inside
    `jit`/`vmap`); shapes are always checked.

    ```python
    SaveSpec(t0=0.0, t1=10.0, save=5)   # 5 evenly spaced times from 0 to 10
    SaveSpec(t0=0.0, t1=10.0, save="final")
    SaveSpec([0.0, 1.0, 3.0])           # save at these times, solve from 0 to 3
    ```

    **Fields:**

    - `t0`, `t1`: start and end of the solve in the model's time units, as given (Python
      numbers or scalar arrays; `t1 > t0`).
    - `ts`: explicit save times, shape `(time,)`, or `None` when the saved times are evenly
      spaced (`save = n`) or only `t1` is saved.
    - `n_saved`: how many times are saved (1: only `t1`); static.
    - `save_text`: how the saved times were given, for labels and hashes: `"'final'"`,
      `"1"`, `"101"` or `"[3 times]"`; static.
    """

    t0: RealScalarLike
    t1: RealScalarLike
    ts: Real[ArrayLike, " time"] | None
    n_saved: int = eqx.field(static=True)
    save_text: str = eqx.field(static=True)

    def __init__(
        self,
        t: Times | None = None,
        *,
        t0: RealScalarLike | None = None,
        t1: RealScalarLike | None = None,
        save: SaveLike = None,
    ):
        """**Arguments:** as for [`simulate`][]: either `t` (increasing save times, at least
        2; the solve runs from `t[0]` to `t[-1]`) or `t0`, `t1` and `save` (`"final"`, a
        number of evenly spaced points, default 101, or increasing times in `[t0, t1]`)."""
        if t is not None:
            clash = [k for k, v in dict(t0=t0, t1=t1, save=save).items() if v is not None]
            if clash:
                raise ValueError(
                    f"give either t (the save times) or t0/t1/save, not t and {clash[0]}"
                )
            self.ts = _check_t(t)
            self.t0, self.t1 = self.ts[0], self.ts[-1]
            self.n_saved, self.save_text = self.ts.shape[0], f"[{self.ts.shape[0]} times]"
            return
        if t0 is None or t1 is None:
            raise ValueError("give the save times t, or both t0 and t1")
        _check_span(t0, t1)
        self.t0, self.t1 = t0, t1
        self.ts, self.n_saved, self.save_text = _check_save(
            DEFAULT_SAVE_POINTS if save is None else save, t0, t1
        )

    @property
    def final_only(self) -> bool:
        """Whether only the state at `t1` is saved."""
        return self.ts is None and self.n_saved == 1

    @property
    def save(self) -> str | int | None:
        """`"final"` (only `t1`), the number `n` of evenly spaced times, or `None` (the times
        are in `ts`): the normalised `save` argument."""
        if self.ts is not None:
            return None
        return "final" if self.n_saved == 1 else self.n_saved

    def save_times(self) -> Real[Array, " time"] | None:
        """The saved times as an array, shape `(n_saved,)`, or `None` when only `t1` is
        saved. Evenly spaced times are computed here, from `t0` and `t1` as given."""
        if self.final_only:
            return None
        if self.ts is None:
            return jnp.linspace(self.t0, self.t1, self.n_saved)
        return jnp.asarray(self.ts)

    def host_save_times(self) -> np.ndarray | None:
        """[`save_times`][] computed with NumPy, in the dtype JAX gives them, shape
        `(n_saved,)`; `None` when only `t1` is saved or the times are traced. For checks,
        which must not start JAX's backend (loading a config: see [`host_leaves`][])."""
        if self.final_only:
            return None
        try:
            if self.ts is None:
                dtype = jnp.result_type(self.t0, self.t1, float)  # as jnp.linspace's
                return np.linspace(float(self.t0), float(self.t1), self.n_saved).astype(dtype)
            return np.asarray(self.ts)
        except jax.errors.JAXTypeError:  # traced (jit/vmap)
            return None


def check_saved_memory(times: SaveSpec, layout: Any, model_name: str) -> None:
    """Refuse, before anything is allocated, a `simulate` whose saved values cannot fit in
    memory: `times.n_saved` saved states of the `layout`'s values (its `shapes` and
    `dtype`), plus the times.

    **Raises:** `difsim._resources.ResourceError` (a `ValueError`) naming `save`.
    """
    n_values = sum(math.prod(shape) for shape in layout.shapes)
    itemsize, what = layout.dtype.itemsize, f"simulate({model_name})"
    n = times.n_saved
    key = "save" if times.ts is None else "save times"
    check_memory(
        n * (n_values + 1) * itemsize,
        f"{what} saving {n:,} times of {n_values:,} value{'s' if n_values > 1 else ''} "
        f"({itemsize * 8}-bit)",
        key,
        'save fewer times (save = n, "final", or a list of times)',
    )


def check_dt0(dt0: RealScalarLike | None) -> RealScalarLike | None:
    """`dt0`, checked: time runs forward (`t1 > t0`), so a step is a finite number > 0.
    A traced `dt0` (under `jit`/`vmap`) is left to the solver.

    **Raises:** `ValueError` naming `dt0` and its value (diffrax's own check would raise
    some 30 lines from inside the compiled solve)."""
    c = None if dt0 is None else concrete(dt0)
    if c is None:
        return dt0
    if c.ndim != 0 or c.dtype.kind not in "biuf":
        raise ValueError(f"dt0 must be one number (a step in the model's time units), got {dt0!r}")
    if not (np.isfinite(c) and c > 0):
        raise ValueError(
            f"dt0 must be a finite step > 0 (time runs from t0 to t1 > t0), got {float(c)}; "
            "leave it out to let an adaptive solver choose it"
        )
    return dt0


def concrete(x: Any) -> np.ndarray | None:
    """`x` as a NumPy array, or `None` when it is traced (inside `jit`/`vmap`)."""
    try:
        return np.asarray(x)
    except Exception:  # a tracer: its value is checked by the solver instead
        return None


def _check_t(t: Times) -> Real[Array, " time"]:
    ts = jnp.asarray(t)
    if ts.ndim != 1 or ts.shape[0] < 2:
        raise ValueError(f"t must be a 1-D array of at least 2 save times, got shape {ts.shape}")
    _check_increasing(ts, "t")
    return ts


def _check_span(t0: RealScalarLike, t1: RealScalarLike) -> None:
    c0, c1 = concrete(t0), concrete(t1)
    for c in (c0, c1):
        if c is not None and (c.ndim != 0 or c.dtype.kind not in "biuf"):
            raise ValueError(f"t0 and t1 must be numbers, got t0={t0!r}, t1={t1!r}")
    if any(c is not None and not np.isfinite(c) for c in (c0, c1)):
        raise ValueError(f"t0 and t1 must be finite, got t0={t0!r}, t1={t1!r}")
    if c0 is not None and c1 is not None and not c1 > c0:
        raise ValueError(f"t1 must be greater than t0, got t0={float(c0)}, t1={float(c1)}")


def _check_save(save: SaveLike, t0, t1) -> tuple[Real[ArrayLike, " time"] | None, int, str]:
    """`(ts, n_saved, save_text)` for a `save` argument, raising on nonsense."""
    if isinstance(save, str):
        if save == "dense":
            raise ValueError(
                "save='dense' keeps the solver's interpolant, which only ds.simulate returns "
                "(Solution.evaluate); sweeps and the ensemble engine store values at save "
                "times: give save = n (a number of points) or a list of times"
            )
        if save != "final":
            raise ValueError(f"save must be 'final', a number of points or times, got {save!r}")
        return None, 1, "'final'"
    if isinstance(save, int | np.integer) and not isinstance(save, bool):
        if save < 1:
            raise ValueError(f"save must be at least 1 point, got {save}")
        return None, int(save), str(int(save))
    ts = _times(save)
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"save times must be a 1-D array, got shape {ts.shape}")
    _check_increasing(ts, "save")
    cts, c0, c1 = concrete(ts), concrete(t0), concrete(t1)
    if cts is not None and c0 is not None and c1 is not None:
        outside = cts[(cts < c0) | (cts > c1)]
        if outside.size:
            raise ValueError(
                f"save time {float(outside[0])} lies outside [t0, t1] = [{float(c0)}, {float(c1)}]"
            )
    return ts, ts.shape[0], f"[{ts.shape[0]} times]"


def _times(save: Any) -> Real[ArrayLike, " time"]:
    """Save times as given: a JAX array stays one; numbers become a float64 NumPy array, so
    a sweep's time coordinate keeps them exactly even when JAX runs in float32."""
    if isinstance(save, jax.Array):
        return save
    try:
        return np.asarray(save, dtype=np.float64)
    except Exception:  # e.g. a list holding tracers: JAX's own conversion says what is wrong
        return jnp.asarray(save)


def _check_increasing(ts: Real[ArrayLike, " time"], key: str) -> None:
    cts = concrete(ts)
    if cts is None:
        return
    if not np.all(np.isfinite(cts)):
        raise ValueError(f"{key} contains a non-finite time")
    if cts.size > 1 and not np.all(np.diff(cts) > 0):
        raise ValueError(f"{key} must be strictly increasing")
