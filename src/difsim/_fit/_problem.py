"""The fit problem's interface: unconstrained free variables `u` → weighted residuals."""

import abc
import dataclasses
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from difsim._core import Model, simulate
from difsim._fit._data import FitData
from difsim._fit._free import flat_size, resolve, unflatten, with_values
from difsim._fit._transforms import AbstractTransform


class SimOptions(eqx.Module):
    """How each model evaluation is solved (the `simulate` options of a fit)."""

    solver: Any = eqx.field(static=True)
    rtol: float = eqx.field(static=True)
    atol: float = eqx.field(static=True)
    max_steps: int = eqx.field(static=True)
    adjoint: str = eqx.field(static=True)
    root_tol: float | None = eqx.field(static=True, default=None)

    def simulate(self, model: Model, ts: Array):
        return simulate(
            model,
            t=ts,
            solver=self.solver,
            rtol=self.rtol,
            atol=self.atol,
            max_steps=self.max_steps,
            root_tol=self.root_tol,
            adjoint=self.adjoint,
            throw=False,
        )


class AbstractProblem(eqx.Module):
    """A fit problem: unconstrained vector `u` of shape `(p,)` → weighted residuals `(m,)`.

    The first `len(free)` entries of `u` are the user's free parameters (transformed to
    natural units by `transforms`); any further ones are method-specific (segment initial
    states in multiple shooting), listed in `extra_names`.
    """

    model: eqx.AbstractVar[Model]
    free: eqx.AbstractVar[tuple[str, ...]]
    transforms: eqx.AbstractVar[tuple[AbstractTransform, ...]]
    data: eqx.AbstractVar[FitData]
    noise: eqx.AbstractVar[str]

    @abc.abstractmethod
    def residuals(self, u: Float[Array, " p"]) -> Float[Array, " m"]:
        """Weighted residuals at `u`; NaN where a model evaluation failed."""

    @abc.abstractmethod
    def predict(self, model: Model, coords: Float[Array, " c"]) -> Float[Array, "c k"]:
        """The observed quantities of `model` at `coords` (times, or control values)."""

    @property
    def extra_names(self) -> tuple[str, ...]:
        return ()

    def with_adjoint(self, adjoint: str) -> "AbstractProblem":
        """The same problem differentiated by `adjoint` (one of `_drivers.ADJOINTS`)."""
        sim = getattr(self, "sim", None)
        if sim is None or sim.adjoint == adjoint:
            return self
        return dataclasses.replace(self, sim=dataclasses.replace(sim, adjoint=adjoint))

    @property
    def names(self) -> tuple[str, ...]:
        """Every free variable: the user's, then the method's extras."""
        return self.free + self.extra_names

    def all_transforms(self) -> tuple[AbstractTransform, ...]:
        return self.transforms

    def sizes(self) -> tuple[int, ...]:
        """How many entries of `u` each of the user's free variables takes (1 for a
        scalar; an array's size; a module's floating-point values), from `self.model`."""
        return tuple(flat_size(resolve(self.model, name)) for name in self.free)

    def num_free(self) -> int:
        """Entries of `u` that are the user's free variables (the extras follow)."""
        return sum(self.sizes())

    def element_names(self) -> tuple[str, ...]:
        """A name per entry of `u`: `k`, `coef[3]` (flat index into an array or module),
        then the extras."""
        out = []
        for name, size in zip(self.free, self.sizes()):
            out += [name] if size == 1 else [f"{name}[{i}]" for i in range(size)]
        return tuple(out) + self.extra_names

    def num_residuals(self) -> int:
        """Length of the residual vector (data residuals, then any method-specific ones)."""
        return int(np.prod(self.data.values.shape))

    def _blocks(self, u: Float[Array, " p"]):
        """`(transform, piece of u)` per free variable (the extras one entry each)."""
        sizes = self.sizes() + (1,) * (len(self.all_transforms()) - len(self.free))
        offsets = np.cumsum((0,) + sizes)
        return [(t, u[offsets[i] : offsets[i + 1]]) for i, t in enumerate(self.all_transforms())]

    def natural(self, u: Float[Array, " p"]) -> Float[Array, " p"]:
        """Free variables in natural units (each transform elementwise)."""
        return jnp.concatenate([t.forward(piece) for t, piece in self._blocks(u)])

    def derivative(self, u: Float[Array, " p"]) -> Float[Array, " p"]:
        """`dx/du` of every free variable (for the chain rule of the covariance)."""
        return jnp.concatenate([t.derivative(piece) for t, piece in self._blocks(u)])

    def values_from(self, u: Float[Array, " p"]) -> dict[str, Any]:
        """`{name: value}` of the user's free variables at `u`, each shaped like (and for a
        module, structured like) its value in `self.model`."""
        blocks = self._blocks(u)[: len(self.free)]
        return {
            name: unflatten(resolve(self.model, name), t.forward(piece))
            for name, (t, piece) in zip(self.free, blocks)
        }

    def model_from(self, u: Float[Array, " p"]) -> Model:
        """The model with the free parameters and initial state taken from `u`."""
        return with_values(self.model, self.values_from(u))

    def full(self) -> "AbstractProblem":
        """The problem on all its data (without the minibatches of `at_step`)."""
        return self

    def at_step(self, step) -> "AbstractProblem":
        """The problem optimizer step `step` sees (a minibatch of it; itself by default)."""
        del step
        return self

    def loss(self, u: Float[Array, " p"]) -> Float[Array, ""]:
        r"""$\tfrac12 \sum_i r_i^2$, the objective every optimizer minimises."""
        r = self.residuals(u)
        return 0.5 * jnp.sum(r * r)
