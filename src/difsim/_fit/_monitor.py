"""Watching a fit between blocks of steps: the loss of held-out experiments (or of all
training experiments, when each step sees a minibatch), the best iterate by that loss, and
early stopping after `patience` evaluations without improvement."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from difsim._fit._problem import AbstractProblem


@eqx.filter_jit
def _loss(problem, u):
    return problem.loss(u)


class Monitor:
    """Host-side record of a fit's evaluations (not a pytree: it lives between blocks).

    **Arguments:** `problem`, whose loss is evaluated after every block; `kind`,
    `"validation"` or `"training"` (what it measures, for messages); `patience`: stop
    after this many evaluations without a lower loss (`None`: never)."""

    def __init__(self, problem: AbstractProblem, kind: str, patience: int | None = None):
        if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int)
                                     or patience < 1):  # fmt: skip
            raise ValueError(f"patience must be a positive integer, got {patience!r}")
        self.problem, self.kind, self.patience = problem, kind, patience
        self.records: list[tuple[int, float]] = []
        self.best_u, self.best_loss, self.waited, self.stopped = None, np.inf, 0, False

    def observe(self, step: int, u) -> bool:
        """Evaluate at iterate `u` after `step` steps; `True` when the fit should stop."""
        loss = float(_loss(self.problem, jnp.asarray(u)))
        self.records.append((step, loss))
        if np.isfinite(loss) and loss < self.best_loss:
            self.best_u, self.best_loss, self.waited = np.asarray(u), loss, 0
        else:
            self.waited += 1
        self.stopped = self.patience is not None and self.waited >= self.patience
        return self.stopped

    def state(self, like) -> tuple[dict, np.ndarray]:
        """What a checkpoint keeps of the monitor: its record (JSON-ready; Python floats
        round-trip exactly) and the best iterate (`like`'s zeros before any)."""
        best = np.zeros_like(np.asarray(like)) if self.best_u is None else self.best_u
        record = dict(kind=self.kind, records=[[s, v] for s, v in self.records],
                      best_loss=self.best_loss if np.isfinite(self.best_loss) else None,
                      has_best=self.best_u is not None, waited=self.waited,
                      stopped=self.stopped)  # fmt: skip
        return record, best

    def restore(self, record: dict, best_u) -> None:
        """The monitor as a checkpoint's `state(...)` saved it."""
        self.records = [(int(s), float(v)) for s, v in record["records"]]
        self.best_u = np.asarray(best_u) if record["has_best"] else None
        self.best_loss = np.inf if record["best_loss"] is None else float(record["best_loss"])
        self.waited, self.stopped = int(record["waited"]), bool(record["stopped"])

    @property
    def history(self) -> np.ndarray:
        """`(evaluations, 2)`: the step count and the loss of each evaluation."""
        return np.array(self.records, dtype=float).reshape(-1, 2)

    def note(self) -> str:
        """What the monitor decided, for the fit's message."""
        if self.best_u is None:
            return ""
        step = int(self.history[np.argmin(self.history[:, 1]), 0])
        text = f"; the result is the iterate after {step} steps, of lowest {self.kind} loss "
        text += f"({self.best_loss:.6g})"
        if self.stopped:
            text += f", stopped early: no lower {self.kind} loss in {self.patience} evaluations"
        return text
