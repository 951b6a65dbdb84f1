"""The backends of `simulate`: one strategy per kind of solve, behind one interface.

`simulate` checks its arguments into a plan, then picks the backend that runs it:

- [`ScanBackend`][]: a fixed-step solve without events, as `lax.scan`s (`_fixed_step.py`);
- [`HybridBackend`][]: a solve with events or dense output, from event to event
  (`_hybrid.py`);
- [`DiffraxBackend`][]: any other solve, one `diffrax.diffeqsolve`.

Each returns a [`RawSolve`][] of the same shape, so what follows the solve (NaN past a
failure, the final state, the labelled `Solution`) is written once, not per kind.
"""

import abc
from typing import Any, NamedTuple

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp

from difsim._core._event_plan import EventPlan
from difsim._core._fixed_step import ScanPlan, scan_solve
from difsim._core._hybrid import solve_hybrid
from difsim._core._nonfinite import guard_nonfinite
from difsim._core._vector_field import Layout
from difsim._status import status_from_result


class RawSolve(NamedTuple):
    """What a backend returns: the saves as its solver left them, and how the solve went.

    **Fields:** `saved_ts` (`(time,)`, `inf` at saves never reached), `saved_ys` (packed
    `(time, n)` or `{name: (time, ...)}`, as the layout keeps the state), `status` (a
    [`Status`][] code), `stats` (`num_steps`, `num_accepted_steps`, `num_rejected_steps`),
    `result` (the solver's own result code), `t_final` (the time of the final state: `t1`,
    or where an event ended the solve), `t_end`/`y_end` (that time and state by name where
    the backend records them, else `None`), `record` (the event record) and `dense` (the
    interpolant), `None` where absent.
    """

    saved_ts: Any
    saved_ys: Any
    status: Any
    stats: dict
    result: Any
    t_final: Any
    t_end: Any = None
    y_end: Any = None
    record: Any = None
    dense: Any = None


class AbstractBackend(eqx.Module):
    """How one kind of solve runs. `run(...)` integrates from `t0` to `t1` from the packed
    state `y0`, saving at `ts` (or only the end when `final_only`)."""

    @abc.abstractmethod
    def run(self, *, terms, solver, t0, t1, dt0, y0, model, ts, final_only: bool,
            controller, adjoint, max_steps: int, meter, layout: Layout) -> RawSolve:  # fmt: skip
        ...


class ScanBackend(AbstractBackend):
    """A fixed-step solve without events as `lax.scan`s, shaped like diffrax's solution."""

    plan: ScanPlan

    def run(self, *, terms, solver, t0, t1, dt0, y0, model, ts, final_only, controller,
            adjoint, max_steps, meter, layout) -> RawSolve:  # fmt: skip
        del controller, adjoint, max_steps, meter, layout  # the plan holds the steps
        reached, saved_ys, result, steps = scan_solve(terms, solver, t0, dt0, y0, model, self.plan)
        save_ts = jnp.broadcast_to(t1, (1,)) if final_only else ts
        stats = dict(num_steps=steps, num_accepted_steps=steps, num_rejected_steps=steps * 0)
        return RawSolve(jnp.where(reached, save_ts, jnp.inf), saved_ys,
                        status_from_result(result), stats, result, t1)  # fmt: skip


class HybridBackend(AbstractBackend):
    """A solve with events or dense output, from event to event (`_hybrid.py`)."""

    plan: EventPlan

    def run(self, *, terms, solver, t0, t1, dt0, y0, model, ts, final_only, controller,
            adjoint, max_steps, meter, layout) -> RawSolve:  # fmt: skip
        sol = solve_hybrid(
            self.plan, terms=terms, solver=solver, t0=t0, t1=t1, dt0=dt0, y0=y0, model=model,
            ts=None if final_only else ts, controller=guard_nonfinite(controller),
            adjoint=adjoint, max_steps=max_steps, layout=layout, meter=meter,
        )  # fmt: skip
        t_end = sol.ts[1][0]
        y_end = {k: v[0] for k, v in layout.unpack(sol.ys[1], axis=1).items()}
        record = sol.record if self.plan.events else None
        return RawSolve(sol.ts[0], sol.ys[0], sol.status, sol.stats, sol.result, t_end,
                        t_end, y_end, record, sol.dense)  # fmt: skip


class DiffraxBackend(AbstractBackend):
    """Any other solve: one `diffrax.diffeqsolve`."""

    def run(self, *, terms, solver, t0, t1, dt0, y0, model, ts, final_only, controller,
            adjoint, max_steps, meter, layout) -> RawSolve:  # fmt: skip
        del layout
        # A plain SaveAt: diffrax's BacksolveAdjoint rejects `SaveAt(subs=...)`.
        saveat = dfx.SaveAt(t1=True) if final_only else dfx.SaveAt(ts=ts)
        sol = dfx.diffeqsolve(
            terms, solver, t0, t1, dt0, y0, args=model, saveat=saveat,
            stepsize_controller=guard_nonfinite(controller), adjoint=adjoint,
            max_steps=max_steps, throw=False, progress_meter=meter,
        )  # fmt: skip
        return RawSolve(sol.ts, sol.ys, status_from_result(sol.result), sol.stats,
                        sol.result, t1)  # fmt: skip


def choose_backend(scan_plan: ScanPlan | None, event_plan: EventPlan | None) -> AbstractBackend:
    """The backend of a solve: the scan when `plan_scan` made a plan (it makes none for a
    solve with events), else the event-to-event solve when there are events or dense
    output, else diffrax."""
    if scan_plan is not None:
        return ScanBackend(scan_plan)
    if event_plan is not None:
        return HybridBackend(event_plan)
    return DiffraxBackend()
