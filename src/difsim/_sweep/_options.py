"""A sweep's settings, checked once where they enter: [`SweepOptions`][].

`ds.sweep` builds one [`SweepOptions`][] from its keywords and hands that object, never the
keywords, to everything that runs the sweep. What can be checked without the model is
checked (and parsed) at construction; the time and solver settings, which need the model,
are checked once when the sweep is prepared (`_setup.prepare`), into a [`SweepTimes`][] and
a [`SolverChoice`][].
"""

import dataclasses
import functools
import operator
import os
import types
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import diffrax as dfx
import jax
import numpy as np

from difsim._core import SolverSettings, check_max_events
from difsim._resources import parse_bytes as parse_bytes
from difsim._sweep._memo import Unkeyable, freeze

DEFAULT_MEMORY_BUDGET = 2**30  # bytes per chunk (1 GiB)


def check_chunk_size(chunk_size: Any) -> int | None:
    """`None`, or `chunk_size` as a positive `int`.

    **Raises:** `ValueError` naming `chunk_size` for anything else (a bool included).
    """
    if chunk_size is None:
        return None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}")
    return int(chunk_size)


# A tuple, built once: `bool | np.bool_` in a check would build a union on every call.
_BOOLS = (bool, np.bool_)

# How trajectories are integrated: "ensemble" (difsim's batched engine), "diffrax" (a
# vmapped diffrax solve) or "auto" (the ensemble engine whenever the solve allows it).
ENGINES = ("auto", "ensemble", "diffrax")


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """Everything [`sweep`][] takes besides the model and the spec, checked at construction.

    **Fields:** the keywords of [`sweep`][] (same names, same defaults), plus `on_chunk`.
    Construction parses and normalises those that do not depend on the model, once:

    - `memory_budget`: bytes per chunk, an `int` (a size like `"512MiB"` is parsed here;
      `None` gives 1 GiB). An `int` is taken as it is, not parsed again.
    - `chunk_size`: `None` or a positive `int`.
    - `max_events`: `None` (the model's own cap) or a positive `int`; checked against the
      model (which must declare events) when the sweep is prepared.
    - `devices`: `None` (every device) or a tuple of `jax.Device`.
    - `output`: `None` or a `Path`; `store`: `None` or a path or URL as a `str` (it needs
      an `output`); `resume`, `overwrite`: bools; `progress`: a bool or `None` (shown unless
      `False`: a bar on a terminal, log lines elsewhere).
    - `attrs`: a read-only mapping (empty when `None`).
    - `samples`, `seed`: Monte Carlo paths per point of a stochastic model, and the seed of
      their keys (checked with the model, in `_monte_carlo.monte_carlo_spec`); `brownian`,
      their Brownian path (`"tree"` or `"steps"`, as for `simulate`).
    - `on_chunk`: `None`, or called with the index of each chunk once it is stored (it may
      raise, which stops the sweep with every earlier chunk kept: a progress hook, and what
      the tests use to interrupt a sweep).

    `t0`, `t1`, `save`, `keep` and the solver settings are kept as given: they are checked
    against the model when the sweep is prepared.

    **Raises:** `ValueError` or `TypeError` naming the first bad field.
    """

    # A frozen dataclass rather than an `eqx.Module`: it holds devices and a callback, never
    # arrays, and is not meant to be a pytree.

    t0: float
    t1: float
    save: Any = "final"
    keep: str | Sequence[str] | None = None
    solver: str | dfx.AbstractSolver | None = None
    rtol: float | None = None
    atol: float | None = None
    dt0: float | None = None
    controller: str | dfx.AbstractStepSizeController | None = None
    max_steps: int | None = None
    root_tol: float | None = None
    max_events: int | None = None
    chunk_size: int | None = None
    memory_budget: int | str | None = None
    devices: Sequence[jax.Device] | None = None
    output: str | os.PathLike | None = None
    store: str | os.PathLike | None = None
    resume: bool = True
    overwrite: bool = False
    progress: bool | None = None
    attrs: Mapping[str, Any] | None = None
    on_chunk: Callable[[int], None] | None = None
    engine: str = "auto"
    samples: int | None = None
    seed: int = 0
    brownian: str | None = None

    def __post_init__(self):
        # Frozen: the normalised values are set once, here, through `object.__setattr__`.
        normalised = dict(
            chunk_size=check_chunk_size(self.chunk_size),
            max_events=check_max_events(self.max_events),
            memory_budget=_budget(self.memory_budget),
            devices=_devices(self.devices),
            output=_output(self.output),
            store=_store(self.store, self.output),
            attrs=_attrs(self.attrs),
        )
        for name, value in normalised.items():
            object.__setattr__(self, name, value)
        for name in ("resume", "overwrite"):
            if not isinstance(getattr(self, name), _BOOLS):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.progress is not None and not isinstance(self.progress, _BOOLS):
            raise TypeError(f"progress must be True, False or None, got {self.progress!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.on_chunk is not None and not callable(self.on_chunk):
            raise TypeError(
                f"on_chunk must be a function of the chunk index, got {self.on_chunk!r}"
            )

    @functools.cached_property
    def shaping_key(self) -> Hashable | None:
        """A content key of the options that shape a sweep's setup (all but where results
        go and how they are chunked, run and shown, `RUNTIME_OPTIONS`), equal exactly when
        they are equal; `None` when one has no content key. Computed once per object."""
        given = _shaping_getter()(self)
        kinds = tuple(map(type, given))
        if _PLAIN.issuperset(kinds):  # the usual settings: keyed with their types directly
            return given, kinds
        try:
            return freeze(given)
        except Unkeyable:
            return None


# Options that do not shape a setup (where results go, how they are chunked, run and
# shown); every other option is part of `SweepOptions.shaping_key`, new ones included.
# `attrs` only reach the Dataset's attributes: sweeps that set other ones share a setup's
# model part.
RUNTIME_OPTIONS = frozenset(
    {"chunk_size", "memory_budget", "devices", "output", "store", "resume", "overwrite",
     "progress", "on_chunk", "attrs"}
)  # fmt: skip


@functools.cache
def _shaping_getter() -> Callable[[SweepOptions], tuple[Any, ...]]:
    """The getter of the options that shape a setup, as one tuple (one C call)."""
    names = [f.name for f in dataclasses.fields(SweepOptions) if f.name not in RUNTIME_OPTIONS]
    return operator.attrgetter(*names)


# Keyword values a repeated sweep is recognised by: plain scalars, keyed with their types
# (`1`, `1.0` and `True` are other options).
_PLAIN = frozenset({str, int, float, bool, type(None)})
_RECENT: dict[tuple, SweepOptions] = {}
_RECENT_SIZE = 64


def sweep_options(**given: Any) -> SweepOptions:
    """`SweepOptions(**given)`; the same (frozen) object again for the same plain values.

    A sweep repeated in a loop or a notebook checks its keywords once, and what is derived
    from them ([`SweepOptions.shaping_key`][]) is computed once: on cold caches each check
    is a visible cost of a small sweep. Options with any other value (devices, attrs, a
    solver object, a list of kept quantities, a callback) are built anew each time.
    """
    values = tuple(given.values())
    kinds = tuple(map(type, values))
    if not _PLAIN.issuperset(kinds):
        return SweepOptions(**given)
    key = (tuple(given), values, kinds)
    options = _RECENT.get(key)
    if options is None:
        if len(_RECENT) >= _RECENT_SIZE:
            _RECENT.clear()
        options = _RECENT[key] = SweepOptions(**given)
    return options


def _budget(budget: int | str | None) -> int:
    if budget is None:
        return DEFAULT_MEMORY_BUDGET
    return parse_bytes(budget, "memory_budget")


def _devices(devices: Sequence[jax.Device] | None) -> tuple[jax.Device, ...] | None:
    # Checked where the mesh is built (`_distributed.batch_mesh`): the one place that knows
    # which devices a run may use.
    return None if devices is None else tuple(devices)


def _output(output: str | os.PathLike | None) -> Path | None:
    if output is None or isinstance(output, Path):
        return output
    if not isinstance(output, str | os.PathLike):
        raise TypeError(f"output must be a path (a str or os.PathLike) or None, got {output!r}")
    return Path(output)


def _store(store: str | os.PathLike | None, output: Any) -> str | None:
    if store is None:
        return None
    if not isinstance(store, str | os.PathLike) or not os.fspath(store):
        raise TypeError(
            f"store must be a path or URL (e.g. 's3://bucket/x.zarr') or None, got {store!r}"
        )
    if output is None:
        raise ValueError(
            "store needs an output path: the store keeps the chunks of the netCDF file "
            "`output` while the sweep runs"
        )
    return os.fspath(store)


def _attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if attrs is None:
        return types.MappingProxyType({})
    if not isinstance(attrs, Mapping):
        raise TypeError(f"attrs must be a dict of global attributes, got {attrs!r}")
    return types.MappingProxyType(dict(attrs))


@dataclasses.dataclass(frozen=True)
class SweepTimes:
    """A sweep's checked times: `t0 < t1` (finite), and what is saved: `save` is `"final"`,
    a number of points (> 1), or `None` with the times in `ts` (float64, strictly
    increasing, in `[t0, t1]`); `n_saved` saved times in all; `save_text` describes `save`
    for messages and the settings hash."""

    t0: float
    t1: float
    save: str | int | None
    ts: np.ndarray | None
    n_saved: int
    save_text: str


@dataclasses.dataclass(frozen=True)
class SolverChoice:
    """A sweep's solver settings, resolved against the model (its `solver_defaults`, then
    difsim's) and checked: `solver` a known name or solver object, `controller` spelt out
    (for `None`, the one `simulate` would choose), `rtol`, `atol` floats, `dt0` as given
    (or the model's), `max_steps` an int; `max_events`, the room of each trajectory's event
    record (the sweep's `max_events`, else the model's cap; `None` for a model without
    events). Hashable: part of the compiled chunk's static argument."""

    solver: Any
    controller: Any
    rtol: float
    atol: float
    dt0: Any
    max_steps: int
    settings: SolverSettings
    root_tol: float | None = None  # the same, as objects: what each trajectory's solve takes
    max_events: int | None = None
