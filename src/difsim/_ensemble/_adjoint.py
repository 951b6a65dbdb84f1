"""How the ensemble engine is differentiated: strategy objects chosen with `adjoint=`.

Whatever the strategy, `jax.jvp`, `jax.jacfwd`, `jax.grad`, `jax.vjp`, `jax.jacrev` and
`jax.vmap` of any of them pass through. The strategies differ in what a derivative costs:

- [`ForwardAdjoint`][] (`"forward"`): one batched forward pass carries one tangent per
  differentiated scalar (a shared parameter's element, or an element of the swept values:
  lanes are independent, so one tangent covers every lane) beside the solve, giving the
  Jacobian; a tangent or cotangent is then contracted with it. Memory and time grow
  with the number of differentiated scalars `P`: about `1 + 0.4 P` solves for up to
  12 (one pass), then a pass per group of 12 tangents, each solving the primal again.
- [`DiscreteAdjoint`][] (`"discrete"`): reverse mode by a discrete adjoint of the
  engine's own steps (`_discrete.py`): each accepted step, and the save times it wrote,
  pulled back with `jax.vjp` of the method's step and dense output, earlier iterations
  recomputed from checkpoints. Time about 3–4 forward solves whatever `P` for solves of
  a hundred iterations and more, more for very short ones (measured on CPU:
  docs/benchmarks.md); memory a fixed ring and set of checkpoints per block.
- [`CheckpointAdjoint`][] (`"checkpoint"`): reverse mode by JAX through step loops that
  keep `checkpoints` copies of a block's state and recompute the steps in between: the
  whole loop body (step-size control, saves) differentiated, up to 18–24 forward solves
  on short solves; memory bounded (`checkpoints` copies of each block's state, one block
  at a time for large ensembles). (A tangent, for `jax.jvp`, is pushed forward in one
  forward-mode pass, for either reverse mode.)
- [`AutoAdjoint`][] (`"auto"`, the default): forward when `P <= max_forward`, else the
  discrete adjoint (a stochastic model: `"checkpoint"`'s path).

The choice is made where JAX differentiates the solve (its `custom_jvp` rule), which
knows which inputs carry a tangent: a gradient with respect to two parameters of a model
with a thousand goes forward.
"""

import abc
from typing import ClassVar

import diffrax as dfx
import equinox as eqx

from difsim.solvers import check_adjoint_name


class AbstractEnsembleAdjoint(eqx.Module):
    """How to differentiate an ensemble solve. `reverse(count)`: whether a derivative
    with respect to `count` scalars (shared elements plus per-lane elements) goes through
    the reverse-mode path."""

    name: ClassVar[str]

    @abc.abstractmethod
    def reverse(self, count: int) -> bool: ...

    @property
    def reverse_checkpoints(self) -> int | None:
        """Checkpoints per block of the checkpointed reverse-mode path (`None`: equinox's
        default)."""
        return getattr(self, "checkpoints", None)

    @property
    def discrete(self) -> bool:
        """Whether reverse mode through an ODE solve is the discrete adjoint
        (`_discrete.py`) rather than JAX's through checkpointed step loops."""
        return False


def _check_segment(segment) -> None:
    if segment is not None and (
        isinstance(segment, bool) or not isinstance(segment, int) or segment < 2 or segment % 2
    ):
        raise ValueError(f"segment must be an even int >= 2 or None, got {segment!r}")


def _check_checkpoints(checkpoints) -> None:
    if checkpoints is not None and (
        isinstance(checkpoints, bool) or not isinstance(checkpoints, int) or checkpoints < 1
    ):
        raise ValueError(f"checkpoints must be a positive int or None, got {checkpoints!r}")


class ForwardAdjoint(AbstractEnsembleAdjoint):
    """Forward mode: the Jacobian with respect to the differentiated scalars in one
    batched forward pass, then contracted. Cheapest for a few scalars."""

    name: ClassVar[str] = "forward"

    def reverse(self, count: int) -> bool:
        return False


class DiscreteAdjoint(AbstractEnsembleAdjoint):
    """Reverse mode by a discrete adjoint of the engine's own steps (`_discrete.py`): the
    backward pass pulls the cotangent back through each accepted step with `jax.vjp` of
    the method's step, and through the save times it wrote with its dense output,
    recomputing earlier iterations from checkpoints. Cost independent of the number of
    differentiated scalars; memory a ring of `segment` iterations and `segment`
    checkpoints of a block's lanes (default 32), whatever the number of steps taken (the
    checkpoints thin out as a solve goes on). The derivative is that of the steps the
    solve took, their sizes held fixed. ODEs only (a stochastic model goes through
    [`CheckpointAdjoint`][]'s path)."""

    name: ClassVar[str] = "discrete"
    segment: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        _check_segment(self.segment)

    def reverse(self, count: int) -> bool:
        return True

    @property
    def discrete(self) -> bool:
        return True


class CheckpointAdjoint(AbstractEnsembleAdjoint):
    """Reverse mode with checkpointing: bounded memory (`checkpoints` copies of a block's
    state, default about `sqrt(2 max_steps)`: 181 for 16,384; blocks one at a time when
    all of them would need more than 256 MiB), cost independent of the number of
    differentiated scalars. For models with many parameters.

    A solve of more steps than checkpoints recomputes steps on the backward pass, in
    another compiled program: rounding may then differ, so may a step's accept or size,
    and the gradient is that of a neighbouring sequence of steps, right to about the
    solver's accuracy (see `default_checkpoints` in `_solve.py`)."""

    name: ClassVar[str] = "checkpoint"
    checkpoints: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        _check_checkpoints(self.checkpoints)

    def reverse(self, count: int) -> bool:
        return True


# Forward mode up to this many differentiated scalars: about where the discrete adjoint
# costs as much. Measured 2026-12-02 (`bench_ensemble.py`, crossover section: gradients of
# a sweep loss over the forward solve, float32, ~20 steps, load 4), forward / discrete at
# P = 2 / 4 / 6 / 8 / 12 / 24: Lorenz (3 entries, 10⁴ lanes, extra parameters added to
# dx/dt) 1.6 / 2.4 / 2.8 / 3.7 / 4.9 / 11x against 3.6–4.4x; Lorenz-96 (40 entries, 10³
# lanes, the first P forcings) 3.0 / 5.3 / 5.8 / 7.0 / 6.5 / 15x against 5.1–6.2x.
DEFAULT_MAX_FORWARD = 6


class AutoAdjoint(AbstractEnsembleAdjoint):
    """Forward mode for at most `max_forward` differentiated scalars, reverse mode with
    checkpointing (`checkpoints` as [`CheckpointAdjoint`][]'s) above; the default
    `max_forward` is about where the two cost the same."""

    name: ClassVar[str] = "auto"
    max_forward: int = eqx.field(static=True, default=DEFAULT_MAX_FORWARD)
    checkpoints: int | None = eqx.field(static=True, default=None)
    segment: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        _check_checkpoints(self.checkpoints)
        _check_segment(self.segment)
        if isinstance(self.max_forward, bool) or not isinstance(self.max_forward, int):
            raise ValueError(f"max_forward must be an int, got {self.max_forward!r}")

    def reverse(self, count: int) -> bool:
        return count > self.max_forward

    @property
    def discrete(self) -> bool:
        return True


ADJOINTS: dict[str, type[AbstractEnsembleAdjoint]] = {
    cls.name: cls for cls in (AutoAdjoint, ForwardAdjoint, CheckpointAdjoint, DiscreteAdjoint)
}


def make_adjoint(adjoint: "str | AbstractEnsembleAdjoint") -> AbstractEnsembleAdjoint:
    """An adjoint from its name (`"auto"`, `"forward"`, `"checkpoint"`, `"discrete"`: see
    `difsim.solvers.ADJOINT_NAMES`) or as given.

    **Raises:** `ValueError` naming the choices for anything else (and, for a name of the
    vocabulary the engine does not take, the entry points that take it).
    """
    if isinstance(adjoint, AbstractEnsembleAdjoint):
        return adjoint
    if isinstance(adjoint, str) and adjoint in ADJOINTS:
        return ADJOINTS[adjoint]()
    if isinstance(adjoint, str):
        check_adjoint_name(adjoint, "simulate_ensemble")  # says which entry point takes it
    what = "a diffrax adjoint (ds.simulate's)" if isinstance(adjoint, dfx.AbstractAdjoint) else ""
    raise ValueError(
        f"simulate_ensemble: adjoint must be one of {', '.join(repr(k) for k in ADJOINTS)} "
        f"or an ensemble adjoint object, got {adjoint!r}{f', {what}' if what else ''}"
    )
