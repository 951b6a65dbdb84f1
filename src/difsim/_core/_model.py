"""`Model`: a physical system as an equinox Module (parameters are pytree leaves)."""

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

import equinox as eqx
import jax
import numpy as np

from difsim._core._noise import Noise
from difsim._core._state import State, VarInfo, check_precision, state_var
from difsim._pde import Grid, irfftn, rfftn


def param(
    default: Any = dataclasses.MISSING,
    *,
    units: str | None = None,
    description: str | None = None,
) -> Any:
    """Declare a model parameter with units and a description (shown in outputs).

    ```python
    import jax.numpy as jnp
    import difsim as ds


    class Decay(ds.Model):
        k: float = ds.param(0.5, units="1/s", description="rate constant")
        state = ds.State(x=ds.Var(1.0, units="mol/L", description="concentration"))
        time_units = "s"

        def rhs(self, t, s):
            return dict(x=-self.k * s.x)


    model = Decay(k=2.0)  # a parameter is a constructor argument with a default
    assert Decay().k == 0.5 and model.k == 2.0
    ```
    """
    return eqx.field(default=default, metadata=dict(units=units, description=description))


_HOST_LEAVES = contextvars.ContextVar("difsim_host_leaves", default=False)


@contextlib.contextmanager
def host_leaves() -> Iterator[None]:
    """Within this context, models built take NumPy arrays (of JAX's default dtypes) as
    leaves instead of JAX arrays: what checking a config builds, which must not start JAX's
    backend (a multi-process run calls `jax.distributed.initialize()` after loading it)."""
    token = _HOST_LEAVES.set(True)
    try:
        yield
    finally:
        _HOST_LEAVES.reset(token)


def _to_leaf(value: Any, annotation: Any) -> Any:
    # Python floats become (weakly typed) JAX arrays so that `eqx.filter_jit`/`filter_grad`
    # see parameters as traced, differentiable leaves rather than static constants.
    if isinstance(value, bool):
        return value
    host = _HOST_LEAVES.get()
    if isinstance(value, float) or (isinstance(value, int) and annotation in (float, "float")):
        if host:
            return np.asarray(float(value), jax.dtypes.canonicalize_dtype(np.float64))
        return jax.numpy.asarray(float(value))
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.inexact):
        if host:
            return value.astype(jax.dtypes.canonicalize_dtype(value.dtype))
        return jax.numpy.asarray(value)
    return value


class Model(eqx.Module):
    """Base class of every difsim model: an ODE or PDE right-hand side plus its parameters.

    A model is an `equinox.Module`, hence a pytree: its parameters (the annotated fields)
    are leaves that `jax.jit`, `jax.vmap` and `jax.grad` pass through. Subclasses declare

    - parameters as annotated fields with defaults (`rho: float = 28.0`, or [`param`][] for
      units), converted to JAX arrays on construction;
    - `state = ds.State(...)`: the named state variables and their default initial values;
    - `rhs(self, t, s)`: the time derivative, given time `t` and a [`State`][] `s`
      (read variables as `s.x`), returning a `dict` with one entry per variable.

    Stiff/non-stiff splitting (for IMEX solvers such as KenCarp4): define
    `rhs_nonstiff(t, s)` and `rhs_stiff(t, s)` instead of `rhs`; `rhs` is then their sum.
    A pseudo-spectral model on a periodic grid may define `rhs_nonstiff_spectrum(t, s,
    s_hat)` instead of (or besides) `rhs_nonstiff`: the spectral solver ETDRK4 then works
    without transforming each stage back and forth.

    Noise (a stochastic differential equation, see `docs/stochastic.md`): define
    `diffusion(self, t, s)`, returning like `rhs` one entry per noisy state variable; the
    class attribute `noise = ds.Noise(...)` chooses diagonal (default) or general noise and
    the calculus (Itô by default). `simulate` then needs a PRNG key.

    Class-level options (`ClassVar`): `time_units` (a UDUNITS string, e.g. `"s"`; `None`
    is written `"1"`, model units), `stiff` (pick a stiff solver by default),
    `events` (a tuple of [`Event`][]s and [`TimeEvent`][]s: impacts, doses, switches that
    change the state or end the solve; see docs/events.md), `max_events` (most events in
    one solve, default 100),
    `solver_defaults` (settings `simulate`/`sweep`/configs use when the caller leaves them
    unset, e.g. `{"solver": "etdrk4", "dt0": 0.25}`; `dt0` and `controller` apply only
    with the model's own solver), and how outputs are drawn: `phase` (a pair of variables
    to draw as a phase portrait), `phase_aspect` (`"equal"` for orbits), `plot_time_scale`
    (`"log"` for kinetics spanning decades), `invariants` (`{method name: VarInfo}`:
    conserved quantities of the saved states, kept in outputs and drawn as relative
    drift).

    PDE models keep their [`Grid`][] in a field (conventionally `grid`): its coordinates
    label the outputs (`x`, `y`, `z`), and state variables with as many axes as the grid
    take its dimension names.

    Models are immutable: `model.replace(rho=30.0, **{"state.x": 2.0})` returns a new one.

    **Example:**

    ```python
    import jax.numpy as jnp
    import difsim as ds


    class Decay(ds.Model):
        k: float = ds.param(0.5, units="1/s", description="rate constant")
        state = ds.State(x=ds.Var(1.0, units="mol/L", description="concentration"))
        time_units = "s"

        def rhs(self, t, s):
            return dict(x=-self.k * s.x)


    sol = ds.simulate(Decay(k=0.3), jnp.linspace(0.0, 4.0, 5), rtol=1e-6, atol=1e-6)
    assert jnp.allclose(sol.ys["x"], jnp.exp(-0.3 * sol.ts), rtol=1e-4)
    ```
    """

    time_units: ClassVar[str | None] = None
    stiff: ClassVar[bool] = False
    phase: ClassVar[tuple[str, str] | None] = None
    events: ClassVar[tuple[Any, ...]] = ()
    max_events: ClassVar[int] = 100
    phase_aspect: ClassVar[str] = "auto"
    plot_time_scale: ClassVar[str] = "linear"
    invariants: ClassVar[dict[str, VarInfo]] = {}
    solver_defaults: ClassVar[dict[str, Any]] = {}
    noise: ClassVar[Noise] = Noise()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # `state = ds.State(...)` is written without an annotation, which would leave it a
        # class attribute; make it a keyword-only field so each model instance carries its
        # own (differentiable, sweepable) initial state.
        declared = cls.__dict__.get("state")
        if isinstance(declared, State):
            cls.__annotations__ = {**cls.__dict__.get("__annotations__", {}), "state": State}
            cls.state = dataclasses.field(default=declared, kw_only=True)

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if field.metadata.get("static", False):
                continue
            if field.name == "state":
                # Initial values become arrays too, or `eqx.filter_jit`/`filter_grad` would
                # treat a Python-float initial state as static (no gradient, recompiles).
                # Done per instance, not in `State()`, which runs at class definition,
                # possibly before the user enables float64.
                state = self.state
                if isinstance(state, State):
                    for k, v in state.items():
                        check_precision(v, f"{type(self).__name__} state variable {k!r}")
                    values = {k: _to_leaf(v, float) for k, v in state.items()}
                    if any(values[k] is not v for k, v in state.items()):
                        object.__setattr__(self, "state", state.with_values(values))
                continue
            value = getattr(self, field.name)
            check_precision(value, f"{type(self).__name__} parameter {field.name!r}")
            converted = _to_leaf(value, field.type)
            if converted is not value:
                object.__setattr__(self, field.name, converted)

    # ---------------------------------------------------------------- dynamics
    def rhs(self, t, s: State) -> Mapping[str, Any]:
        """Time derivative of each state variable: `{name: ds/dt}` (units of var / time)."""
        if not self.has_split():
            raise NotImplementedError(
                f"{type(self).__name__} must define rhs(self, t, s) (or both "
                "rhs_nonstiff and rhs_stiff)"
            )
        slow, fast = self.rhs_nonstiff(t, s), self.rhs_stiff(t, s)
        return {name: slow[name] + fast[name] for name in s.names}

    def diffusion(self, t, s: State) -> Mapping[str, Any]:
        """Optional: the noise of a stochastic model, `{name: g}` (units of var / √time).

        Diagonal noise (default): `g` has the variable's shape, and `dx = rhs dt + g dW` with
        an independent Brownian motion per entry; variables left out have no noise. General
        noise (`noise = ds.Noise(dim=m)`): `g` has shape `(*var_shape, m)`, one column per
        shared Brownian motion. See [`Noise`][difsim.Noise].
        """
        raise NotImplementedError(f"{type(self).__name__} defines no diffusion (it has no noise)")

    @classmethod
    def is_stochastic(cls) -> bool:
        """Whether the model defines `diffusion` (an SDE, solved with a PRNG key)."""
        return cls.diffusion is not Model.diffusion

    def rhs_nonstiff(self, t, s: State) -> Mapping[str, Any]:
        """Non-stiff part of the right-hand side (treated explicitly by IMEX solvers).

        Default, for a model that defines `rhs_nonstiff_spectrum`: the inverse FFT of that.
        """
        if not self.has_spectrum():
            raise NotImplementedError(f"{type(self).__name__} defines no rhs_nonstiff")
        grid = self.spectral_grid()
        s_hat = s.with_values({name: rfftn(value, grid) for name, value in s.items()})
        spectra = self.rhs_nonstiff_spectrum(t, s, s_hat)
        return {name: irfftn(spectra[name], grid) for name in s.names}

    def rhs_nonstiff_spectrum(self, t, s: State, s_hat: State) -> Mapping[str, Any]:
        """Optional: the Fourier spectrum of `rhs_nonstiff`, `{name: ds.spectral.rfftn(f, grid)}`.

        For pseudo-spectral models on the periodic grid of [`spectral_grid`][]. `s` holds the
        state's fields, `s_hat` their spectra (`ds.spectral.rfftn(s.<name>, grid)`, shape
        `(n_0, ..., n_{d-1} // 2 + 1)`). Read whichever is cheaper: under `jit` the one
        left unread is never computed. Returning the spectrum spares
        [`ETDRK4`][difsim.solvers.ETDRK4] a forward FFT per stage, and reading `s_hat` an
        inverse one. A model defining only this gets `rhs_nonstiff` (its inverse FFT) for
        every other solver.
        """
        raise NotImplementedError(f"{type(self).__name__} defines no rhs_nonstiff_spectrum")

    def rhs_stiff(self, t, s: State) -> Mapping[str, Any]:
        """Stiff part of the right-hand side (treated implicitly by IMEX solvers)."""
        raise NotImplementedError(f"{type(self).__name__} defines no rhs_stiff")

    @classmethod
    def has_split(cls) -> bool:
        """Whether the model defines `rhs_stiff` and `rhs_nonstiff` (or its spectrum)."""
        nonstiff = cls.rhs_nonstiff is not Model.rhs_nonstiff or cls.has_spectrum()
        return nonstiff and cls.rhs_stiff is not Model.rhs_stiff

    @classmethod
    def has_spectrum(cls) -> bool:
        """Whether the model defines `rhs_nonstiff_spectrum`."""
        return cls.rhs_nonstiff_spectrum is not Model.rhs_nonstiff_spectrum

    def spectral_grid(self) -> Grid:
        """The periodic grid `rhs_nonstiff_spectrum` transforms over: the model's only
        [`Grid`][] field, which must be periodic on every axis."""
        grids = self.grids()
        if len(grids) != 1 or not grids[0].is_periodic:
            found = ", ".join(g.describe() for g in grids) or "none"
            raise ValueError(
                f"{type(self).__name__}.rhs_nonstiff_spectrum needs exactly one Grid field, "
                f"periodic on every axis (found: {found})"
            )
        return grids[0]

    def initial_state(self) -> State:
        """The initial state used by `simulate` (default: the `state` field, every
        variable of which must then have a value)."""
        state = self._declared_state()
        unset = [name for name, value in state.items() if value is None]
        if unset:
            raise ValueError(_unset_message(type(self).__name__, unset, state.names))
        return state

    def _declared_state(self) -> State:
        try:
            return self.state
        except AttributeError:
            raise TypeError(
                f"{type(self).__name__} declares no state variables: add a class attribute "
                "like `state = ds.State(x=1.0, v=0.0)`"
            ) from None

    def coords(self) -> dict[str, Any]:
        """Coordinates of the state variables' own axes, `{dim: 1-D values}`; used to label
        outputs. Default: the coordinates of the model's grid(s)."""
        coords: dict[str, Any] = {}
        for grid in self.grids():
            coords.update(grid.coords)
        return coords

    def grids(self) -> tuple[Grid, ...]:
        """The [`Grid`][] fields of the model (empty for an ODE model)."""
        return tuple(
            value
            for f in dataclasses.fields(self)
            if isinstance(value := getattr(self, f.name, None), Grid)
        )

    def default_dims(self, name: str, ndim: int) -> tuple[str, ...]:
        """Dimension names for state variable `name` with `ndim` axes when it declares no
        `dims`: the grid's (when the axes match a grid), else `<name>_dim<i>`."""
        for grid in self.grids():
            if grid.ndim == ndim:
                return grid.dims
        return tuple(f"{name}_dim{i}" for i in range(ndim))

    # ---------------------------------------------------------------- parameters
    @classmethod
    def parameter_names(cls) -> tuple[str, ...]:
        """Names of the model's parameters (fields other than `state` and static ones)."""
        return tuple(
            f.name
            for f in dataclasses.fields(cls)
            if f.name != "state" and not f.metadata.get("static", False)
        )

    def parameters(self) -> dict[str, Any]:
        """`{name: value}` of every numeric parameter (sub-modules such as grids excluded)."""
        return {
            name: getattr(self, name)
            for name in self.parameter_names()
            if not isinstance(getattr(self, name), eqx.Module)
        }

    @classmethod
    def parameter_info(cls, name: str) -> dict[str, str | None]:
        """Units and description of parameter `name` (from [`param`][]; `None` if unset)."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if name not in cls.parameter_names():
            raise ValueError(
                f"{cls.__name__} has no parameter {name!r}; parameters are "
                f"{', '.join(cls.parameter_names()) or '(none)'}"
            )
        field = fields[name]
        return {k: field.metadata.get(k) for k in ("units", "description")}

    def replace(self, **changes: Any) -> "Model":
        """A copy with parameters and/or initial-state values changed.

        Keys are parameter names, `state` (a [`State`][] or a mapping of some variables), or
        `"state.<var>"` for one variable. An unknown key raises `ValueError` listing the valid
        ones; nothing about `self` changes.
        """
        fields = {}
        state_updates = {}
        names = self.parameter_names()
        for key, value in changes.items():
            if key == "state":
                if isinstance(value, State):
                    fields["state"] = value
                else:
                    state_updates.update(value)
            elif (var := state_var(key)) is not None:
                state_updates[var] = value
            elif key in names:
                fields[key] = value
            else:
                raise ValueError(
                    f"{type(self).__name__} has no parameter {key!r}; parameters are "
                    f"{', '.join(names) or '(none)'}, and state variables are set as 'state.<var>'"
                )
        if state_updates:
            # The declared state, not the base class's checked one: replacing is how a
            # variable declared without a value (`ds.Var(None)`) gets one.
            own = type(self).initial_state is not Model.initial_state
            default = self.initial_state() if own else self._declared_state()
            base = fields.get("state", default)
            fields["state"] = base.replace(**state_updates)
        return dataclasses.replace(self, **fields)


def _unset_message(cls: str, unset: list[str], names: tuple[str, ...]) -> str:
    """How to give a value to state variables declared `ds.Var(None)`."""
    which = ", ".join(repr(n) for n in unset)
    example = ", ".join(f"{n}=..." for n in names)
    one = unset[0]
    return (
        f"{cls}: state variable{'s' if len(unset) > 1 else ''} {which} "
        f"{'have' if len(unset) > 1 else 'has'} no initial value (declared ds.Var(None)). "
        f"Define `def initial_state(self): return ds.State({example})` on {cls} (e.g. "
        f"fields built from self.grid), or give the values: "
        f"model.replace(**{{'state.{one}': value}}) or {cls}(state=ds.State({example}))"
    )
