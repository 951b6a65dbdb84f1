"""Shared parts of the Brownian-path tests (tests/test_brownian.py, tests/test_fuzz_sde.py):
the accepted steps of an adaptive SDE solve, and the chi-square bounds of the mean square
of standard normal draws.
"""

import functools

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from difsim._core import Layout, sde_solver_settings
from difsim._core._sde import sde_terms
from difsim._core._sde_steps import sde_controller

# Each bound is two-sided at this level: a correct path fails one check in a million.
ALPHA = 1e-6


def chi2_bounds(n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """The two-sided `1 - alpha` interval of `mean(z**2)` for `n` independent standard
    normal `z` (`chi2(n) / n`)."""
    lo, hi = stats.chi2.ppf([alpha / 2, 1 - alpha / 2], n)
    return float(lo) / n, float(hi) / n


def normal_bound(n: int, alpha: float = ALPHA) -> float:
    """The two-sided `1 - alpha` bound of `|mean(z)|` for `n` independent standard normal `z`."""
    return float(stats.norm.ppf(1 - alpha / 2)) / np.sqrt(n)


def adaptive_run(model, key, t0, t1, t_stop, max_steps: int, loop_steps: int = 2**15):
    """The accepted steps of the adaptive solve `simulate(model, t0=t0, t1=t1, key=key,
    save="final", max_steps=max_steps)` (default solver and tolerances) up to `t_stop`:
    the same solver, Brownian tree (over `[t0, t1]`) and controller (which stepping up to
    `t_stop` does not change), run by diffrax with the step times saved.

    **Returns:** `(ts, ys, settings)`: the accepted steps' ends from `t0` on (`ts[0] = t0`),
    the packed state there, and the solve's `SolverSettings`.
    """
    layout = Layout.of(model.initial_state())
    dtype = jnp.finfo(layout.dtype).dtype
    given = dict(solver=None, controller=None, dt0=None, rtol=None, atol=None)
    settings = sde_solver_settings(model, layout, **given, max_steps=max_steps)
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    terms = sde_terms(model, layout, key, t0, t1, None, settings)
    controller = sde_controller(settings, None, True, t0, t1)
    y0 = layout.pack(model.initial_state().values)
    sol = dfx.diffeqsolve(
        terms, settings.solver, t0, jnp.asarray(t_stop, dtype), None, y0, args=model,
        stepsize_controller=controller, saveat=dfx.SaveAt(t0=True, steps=True),
        max_steps=loop_steps, throw=True,
    )  # fmt: skip
    keep = np.isfinite(np.asarray(sol.ts))
    return np.asarray(sol.ts)[keep], np.asarray(sol.ys)[keep], settings


@eqx.filter_jit
@functools.partial(jax.vmap, in_axes=(None, 0, 0))
def _increments(path, ta, tb):
    return path.evaluate(ta, tb, use_levy=True)


def standardized(path, ta, tb):
    """`(z_w, z_h)`: the increments of `path` (a Brownian path with space-time Lévy area)
    over the intervals `[ta, tb]`, divided by their standard deviations (`W`: `√h`, `H`:
    `√(h/12)`), flattened. Compiled once per kind of path and block of 1024 intervals
    (the intervals are padded with copies of the first)."""
    ta, tb = np.asarray(ta), np.asarray(tb)
    n = len(ta)
    pad = -n % 1024
    ta_p, tb_p = (np.concatenate([x, np.full(pad, x[0])]) for x in (ta, tb))
    full = _increments(path, jnp.asarray(ta_p), jnp.asarray(tb_p))
    inc = jax.tree.map(lambda x: x[:n], full)
    h = (tb - ta).reshape(-1, 1)
    w = np.asarray(inc.W).reshape(len(h), -1) / np.sqrt(h)
    hh = np.asarray(inc.H).reshape(len(h), -1) / np.sqrt(h / 12)
    return w.reshape(-1), hh.reshape(-1)
