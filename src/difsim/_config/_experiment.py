"""The checked form of an experiment config: one small frozen spec per section."""

import contextlib
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import tomli_w

from difsim._config._schema import ConfigError
from difsim._core import Model, host_leaves, state_key
from difsim._fit import MultipleShooting
from difsim._pde import grid_from_table
from difsim._sweep import AbstractSweep


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """`[model]`: which model, with which parameters and initial state."""

    name: str
    cls: type[Model]
    parameters: Mapping[str, Any]
    state: Mapping[str, Any]
    grid: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def build(self, host: bool = False) -> Model:
        """The model instance (arrays take the current default float dtype, so call this
        inside the run's precision context). `host`: with NumPy arrays for leaves, for
        checks that must not start JAX's backend (see [`host_leaves`][])."""
        defaults = field_defaults(self.cls)
        params = {k: _as_value(v, defaults.get(k)) for k, v in self.parameters.items()}
        state0 = defaults.get("state")
        state = {
            state_key(k): _as_value(v, None if state0 is None else state0[k])
            for k, v in self.state.items()
        }
        if self.grid:
            params["grid"] = grid_from_table(defaults["grid"], self.grid)
        try:
            with host_leaves() if host else contextlib.nullcontext():
                return self.cls(**params).replace(**state)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{self.cls.__name__} rejected these values: {e}", "model") from e


@dataclasses.dataclass(frozen=True)
class TimeSpec:
    """`[time]`: the time span and the save times (in the model's time units)."""

    t0: float
    t1: float
    save: str | int | tuple[float, ...]

    @property
    def n_saved(self) -> int:
        """How many times are saved."""
        if self.save in ("final", "dense"):  # "dense": the final state, and the interpolant
            return 1
        return self.save if isinstance(self.save, int) else len(self.save)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `simulate`/`sweep`: `t0`, `t1`, `save`."""
        save = list(self.save) if isinstance(self.save, tuple) else self.save
        return dict(t0=self.t0, t1=self.t1, save=save)


@dataclasses.dataclass(frozen=True)
class SolverSpec:
    """`[solver]`: solver, tolerances, step control, adjoint and precision."""

    name: str
    rtol: float
    atol: float
    dt0: float | None
    controller: str
    max_steps: int
    adjoint: str
    dtype: str
    brownian: str | None = None  # a stochastic model's Brownian path ("tree", "steps")
    seed: int | None = None  # the key of a stochastic model's single run
    root_tol: float | None = None

    def key(self) -> Any:
        """The PRNG key of a stochastic model's single run (`jax.random.key(seed)`, seed 0
        by default); made at run time, as it touches the JAX backend."""
        return jax.random.key(self.seed or 0)

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `simulate`/`sweep`: solver, tolerances and step control."""
        out = dict(
            solver=self.name,
            rtol=self.rtol,
            atol=self.atol,
            dt0=self.dt0,
            controller=self.controller,
            max_steps=self.max_steps,
            root_tol=self.root_tol,
        )
        return out if self.brownian is None else {**out, "brownian": self.brownian}


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """`[output]`: where the netCDF file (`path`, ending in `.nc`) and the PNG quick-look go,
    and whether an earlier difsim output of the same kind may be replaced (`overwrite`; the
    rules are `difsim._io`'s ownership check); `store`, where a sweep keeps its chunks."""

    path: str | None
    plot: bool | str
    overwrite: bool = False
    store: str | None = None  # a sweep's zarr store (path or fsspec URL); None: path + .zarr

    def paths(self, output: str | os.PathLike | None = None) -> tuple[Path | None, Path | None]:
        """`(netcdf, png)` paths; `output` replaces the configured netCDF path. The PNG is
        the explicit `plot` path, else the netCDF path with suffix `.png`, else `None`."""
        nc = Path(output) if output is not None else (Path(self.path) if self.path else None)
        if isinstance(self.plot, str):
            return nc, Path(self.plot)
        return nc, (nc.with_suffix(".png") if self.plot and nc is not None else None)


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    """`[sweep]`: the swept keys (in config form, as written), the kind of sweep, what to
    keep and how to chunk, plus what the config parser built from them: `spec`, the
    [`GridSweep`][], [`ZipSweep`][] or [`RandomSweep`][] (values in float64; the run rounds
    them to its dtype), and `budget`, `memory_budget` in bytes. Equality compares the
    config as written (the built objects follow from it)."""

    kind: str
    entries: Mapping[str, Any]
    samples: int | None = None
    seed: int | None = None
    keep: str | tuple[str, ...] = "final"
    chunk_size: int | None = None
    memory_budget: str | int | None = None
    dim: str | None = None
    engine: str = "auto"
    max_events: int | None = None
    spec: AbstractSweep | None = dataclasses.field(compare=False, repr=False, kw_only=True)
    budget: int | None = dataclasses.field(default=None, compare=False, kw_only=True)
    monte_carlo: bool = dataclasses.field(default=False, compare=False, kw_only=True)

    def build(self) -> AbstractSweep | None:
        """The sweep spec object, built once when the config was parsed (`None` for Monte
        Carlo paths of the model as it is, with no swept keys)."""
        return self.spec

    def paths(self) -> dict[str, Any]:
        """Keyword arguments of `sweep` for the Monte Carlo paths of a stochastic model
        (`samples`, `seed`), or none."""
        return dict(samples=self.samples, seed=self.seed or 0) if self.monte_carlo else {}

    def to_dict(self) -> dict[str, Any]:
        settings = {
            "kind": self.kind,
            "samples": self.samples,
            "seed": self.seed,
            "keep": list(self.keep) if isinstance(self.keep, tuple) else self.keep,
            "chunk_size": self.chunk_size,
            "memory_budget": self.memory_budget,
            "dim": self.dim,
            "engine": None if self.engine == "auto" else self.engine,
            "max_events": self.max_events,
        }
        return {**{k: v for k, v in settings.items() if v is not None}, **self.entries}


@dataclasses.dataclass(frozen=True)
class FitSpec:
    """`[fit]`: the data, what is free (with its range), what the data observe, and the
    optimizer's settings, as written in the config. `kwargs()` gives the arguments of
    [`fit`][] (besides the model, the data and the solver settings)."""

    # The scalar settings of [fit], in the order the config writes them.
    SETTINGS = (
        "data", "time", "t0", "control", "noise", "optimizer", "steps", "learning_rate", "clip",
        "tol", "adjoint", "multiple_shooting", "shooting_penalty", "multistart", "seed",
        "multistart_scale", "checkpoint", "max_failures", "experiment", "batch_size",
        "validation", "patience", "curriculum",
    )  # fmt: skip

    data: str
    free: Mapping[str, Any]
    observe: Mapping[str, str] = dataclasses.field(default_factory=dict)
    weights: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    sigma: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # [fit.network.<field>]: a network built for the field, and fitted.
    network: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    time: str | None = None
    t0: float | None = None
    control: str | None = None
    noise: str = "gaussian"
    optimizer: str = "trust_region"
    steps: int | None = None
    learning_rate: float = 1e-2
    clip: float | None = None
    tol: float = 1e-8
    adjoint: str | None = None
    multiple_shooting: int | None = None
    shooting_penalty: float | None = None
    multistart: int | None = None
    seed: int | None = None
    multistart_scale: float | None = None
    checkpoint: str | None = None
    max_failures: int = 20
    experiment: str | None = None
    batch_size: int | None = None
    validation: float | list | None = None
    patience: int | None = None
    curriculum: int | list | None = None  # growing horizons: a count of stages, or them
    shooting: MultipleShooting | None = dataclasses.field(
        default=None, compare=False, repr=False, kw_only=True
    )

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of [`fit`][]: `free`, `observe`, … (`multistart` as
        `(n, jax.random.key(seed), scale)`)."""
        free = {k: (tuple(v) if isinstance(v, list) else v) for k, v in self.free.items()}
        out: dict[str, Any] = dict(
            free={**{name: "identity" for name in self.network}, **free},
            observe=dict(self.observe) or None,
            weights={k: np.asarray(v, float) for k, v in self.weights.items()} or None,
            sigma={k: np.asarray(v, float) for k, v in self.sigma.items()} or None,
            time=self.time,
            t0=None if self.t0 is None else float(self.t0),
            control=self.control,
            noise=self.noise,
            optimizer=self.optimizer,
            steps=self.steps,
            learning_rate=float(self.learning_rate),
            clip=None if self.clip is None else float(self.clip),
            tol=float(self.tol),
            adjoint=self.adjoint,
            checkpoint=self.checkpoint,
            max_failures=self.max_failures,
            experiment=self.experiment,
            batch_size=self.batch_size,
            validation=(
                list(self.validation) if isinstance(self.validation, list | tuple)
                else None if self.validation is None else float(self.validation)
            ),
            patience=self.patience,
            seed=0 if self.seed is None else int(self.seed),
            curriculum=list(self.curriculum) if isinstance(self.curriculum, list | tuple)
            else self.curriculum,
        )  # fmt: skip
        if self.shooting is not None:
            out["multiple_shooting"] = self.shooting
        if self.multistart is not None:
            # The key is made here, at run time: making it touches the JAX backend, which
            # checking a config does not need.
            key = jax.random.key(self.seed)
            out["multistart"] = (self.multistart, key, float(self.multistart_scale))
        return out

    def to_dict(self) -> dict[str, Any]:
        settings = {k: getattr(self, k) for k in self.SETTINGS}
        tables = {
            k: dict(getattr(self, k)) for k in ("free", "observe", "weights", "sigma", "network")
        }
        return {
            **{k: v for k, v in settings.items() if v is not None},
            **{k: v for k, v in tables.items() if v},
        }


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A checked experiment config: what `difsim run` executes (a sweep when `sweep` is set,
    a fit to data when `fit` is set; a fit has no `time`: its times come from the data).

    Build one with [`load_config`][]; run it with [`run_config`][]. `to_dict()` and
    `to_toml()` give the complete config (defaults filled in), which loads back to an equal
    `Experiment` — outputs store it so every run can be reproduced.

    **Example:**

    ```python
    import difsim as ds

    experiment = ds.load_config({"model": {"name": "lorenz"}, "time": {"t1": 1.0}})
    assert isinstance(experiment, ds.Experiment)
    assert ds.load_config(experiment.to_dict()).to_dict() == experiment.to_dict()  # round trip
    ```
    """

    model: ModelSpec
    time: TimeSpec | None
    solver: SolverSpec
    output: OutputSpec
    sweep: SweepSpec | None = None
    fit: FitSpec | None = None
    source: str | None = dataclasses.field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The complete config as plain TOML-able data (optional unset keys omitted)."""
        model = {"name": self.model.name}
        if self.model.parameters:
            model["parameters"] = dict(self.model.parameters)
        if self.model.state:
            model["state"] = dict(self.model.state)
        if self.model.grid:
            model["grid"] = dict(self.model.grid)
        out: dict[str, Any] = {"model": model}
        if self.time is not None:
            save = self.time.save
            out["time"] = {
                "t0": self.time.t0,
                "t1": self.time.t1,
                "save": list(save) if isinstance(save, tuple) else save,
            }
        out["solver"] = dataclasses.asdict(self.solver)
        out["output"] = dataclasses.asdict(self.output)
        if self.sweep is not None:
            out["sweep"] = self.sweep.to_dict()
        if self.fit is not None:
            out["fit"] = self.fit.to_dict()
        return {s: {k: v for k, v in d.items() if v is not None} for s, d in out.items()}

    def to_toml(self) -> str:
        """The complete config as TOML text."""
        return tomli_w.dumps(self.to_dict())


# ---------------------------------------------------------------- helpers
def field_defaults(cls: type) -> dict[str, Any]:
    """`{field: default}` of a dataclass; fields without a default are left out."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _as_value(value: Any, default: Any) -> Any:
    if isinstance(value, bool):
        return value
    shape = np.shape(value) if default is None else np.shape(default)
    if not isinstance(value, list) and shape == ():
        return value
    # A scalar fills an array-valued default (a uniform field); arrays take the default
    # float dtype of the run's precision.
    return jnp.broadcast_to(jnp.asarray(value, dtype=float), shape)
