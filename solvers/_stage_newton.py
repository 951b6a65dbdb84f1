r"""`StageNewton`: the nonlinear solves of diffrax's implicit Runge–Kutta stages, stopped by
Hairer & Wanner's convergence test measured in the units of the solution.

Each stage of an ESDIRK method (Kvaerno, KenCarp) or of backward Euler solves
$z = F(z)$ for the stage derivative $f_i$ (or increment $k_i$), whose stage value is
$Y_i = \tilde y_i + \gamma\,h\,f_i$ ($\tilde y_i + \gamma k_i$). A simplified Newton
(chord) iteration with $M = I - \gamma h\,\partial f/\partial y$ corrects
$z_{m+1} = z_m - \Delta_m$, $M\Delta_m = z_m - F(z_m)$. Following Hairer & Wanner
(*Solving ODEs II*, 2nd ed., §IV.8, eqs. (8.10)–(8.13)) the iteration measures each
correction *as a change of the stage value*, $\|\gamma h \Delta_m\|$ in the step-size
controller's weighted norm $\|v\| = \mathrm{norm}(v / (\mathrm{atol} +
\mathrm{rtol}\,|Y_i|))$, estimates the contraction rate
$\theta_m = \|\Delta_m\| / \|\Delta_{m-1}\|$ and stops when the remaining error
$\eta_m \|\Delta_m\|$, $\eta_m = \theta_m / (1 - \theta_m)$, is below $\kappa$: a
fraction of the error the step itself may make. It fails as soon as $\theta_m \ge 1$,
or when the rate predicts no convergence within `max_iterations`, and diffrax then
rejects the step and retries a shorter one.

Why not diffrax's default: `optimistix.Chord`/`Newton` with Cauchy termination demand
that the *residual* (a time derivative, in units of $y/t$) fall below `atol`, and
`diffrax.VeryChord` measures corrections of $f_i$ rather than of $Y_i$. Both tie the
nonlinear solve to the step tolerances in the wrong units: with `atol = 1e-20`, or
`rtol = 1e-10` on an oscillating reaction, most steps fail their root find and the solve
ends at `max_steps` (issue 14, point 8; figures in `docs/benchmarks.md`).
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.lax as lax
import jax.numpy as jnp
import jax.tree_util as jtu
import lineax as lx
import optimistix as optx
from jaxtyping import Array, Bool, PyTree, Scalar

# Corrections below this many ulps of the stage value are rounding noise: they count as
# converged whatever their rate (Hairer's RADAU5 bounds its Newton tolerance likewise,
# `FNEWT >= 10 * UROUND / RTOL`).
NOISE_ULPS = 10.0


class _StageState(eqx.Module):
    linear_state: tuple[lx.AbstractLinearOperator, PyTree[Any]]
    size: Scalar  # weighted norm of the last correction of the stage value
    size_prev: Scalar
    step: Array
    result: optx.RESULTS


class _NoAux(eqx.Module):
    fn: Callable

    def __call__(self, y, args):
        return self.fn(y, args)[0]


def _scaled(tree, c):
    return jtu.tree_map(lambda x: c * x, tree)


def stage_geometry(args) -> tuple[Callable, PyTree]:
    """`(to_stage, base)` of one of diffrax's implicit stage problems, read from the
    arguments diffrax passes its root finder: a correction `dz` of the unknown moves the
    stage value by `to_stage(dz)`, and the stage value is `base + to_stage(z)`.

    Three layouts (diffrax 0.7): an (E)SDIRK stage solved for `f_i`
    (`(stage, gamma, vf, prod, t_i, y_partial, args, control)`), one solved for `k_i`
    (`(stage, gamma, vf_prod, t_i, y_partial, args, control)`), and `ImplicitEuler`
    (`(vf_prod, t1, y0, args, control)`).

    **Raises:** `TypeError` for any other problem, at trace time.
    """
    if isinstance(args, tuple) and len(args) == 8 and callable(args[3]):
        _, gamma, _, prod, _, base, _, control = args
        return (lambda dz: _scaled(prod(dz, control), gamma)), base
    if isinstance(args, tuple) and len(args) == 7 and callable(args[2]):
        _, gamma, _, _, base, _, _ = args
        return (lambda dz: _scaled(dz, gamma)), base
    if isinstance(args, tuple) and len(args) == 5 and callable(args[0]):
        return (lambda dz: dz), args[2]
    raise TypeError(
        "StageNewton solves the stage equations of diffrax's implicit Runge–Kutta solvers "
        "(Kvaerno, KenCarp, ImplicitEuler): pass it as their root_finder; for another root "
        "find use optimistix.Newton"
    )


class StageNewton(optx.AbstractRootFinder):
    """Simplified Newton (chord) iteration for the stages of diffrax's implicit solvers,
    with Hairer & Wanner's convergence test on the stage value (see the module docstring).

    Use it as `diffrax.Kvaerno5(root_finder=diffrax.with_stepsize_controller_tols(
    StageNewton)(kappa=0.01))`, which is what `difsim.solvers.make_solver` builds for the
    named implicit solvers; `kappa` is their `root_tol`.

    **Fields:**

    - `rtol`, `atol`, `norm`: the step-size controller's (diffrax fills them in when they
      are `diffrax.with_stepsize_controller_tols`'s placeholders).
    - `kappa`: the iteration stops when its estimated remaining error is below `kappa`
      times the step's error allowance (CVODE's `nlscoef`, SciML's `κ`; Hairer & Wanner
      advise 0.01–0.1). Never below the rounding floor of `NOISE_ULPS` ulps of the stage value.
    - `reuse_jacobian`: `True` (chord): one Jacobian and factorisation per stage, or per
      step where diffrax supplies it (ESDIRKs linearise once, at the second stage);
      `False`: re-linearise at every iteration (Newton; what matrix-free Krylov solvers want).
    - `max_iterations`: the iteration budget the divergence forecast plans for; keep it
      equal to the solver's `root_find_max_steps` (diffrax's default 10).
    - `linear_solver`: a lineax solver for $M\\Delta = r$ (dense LU by default).
    """

    rtol: Any
    atol: Any
    norm: Callable[[PyTree], Scalar] = optx.rms_norm
    kappa: Any = 1e-2
    reuse_jacobian: bool = eqx.field(static=True, default=True)
    max_iterations: int = eqx.field(static=True, default=10)
    linear_solver: lx.AbstractLinearSolver = lx.AutoLinearSolver(well_posed=None)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags) -> _StageState:
        del f_struct, aux_struct
        if "init_state" in options:
            # diffrax linearises once per step (at the stage it chooses) and hands the
            # factorisation to every stage's solve.
            return options["init_state"]
        dtype = jnp.result_type(*jtu.tree_leaves(y))
        inf = jnp.array(jnp.inf, jnp.finfo(dtype).dtype)
        linear_state = self._linearise(fn, y, args, tags) if self.reuse_jacobian else None
        return _StageState(linear_state, inf, inf, jnp.array(0), optx.RESULTS.successful)

    def _linearise(self, fn, y, args, tags):
        jac = lx.linearise(lx.JacobianLinearOperator(_NoAux(fn), y, args, tags=tags))
        dynamic, static = eqx.partition(self.linear_solver.init(jac, options={}), eqx.is_array)
        return jac, eqx.combine(lax.stop_gradient(dynamic), static)

    def step(self, fn, y, args, options, state: _StageState, tags):
        del options
        if self.reuse_jacobian:
            fx, aux = fn(y, args)
            jac, linear_state = state.linear_state
        else:
            fx, lin_fn, aux = jax.linearize(lambda z: fn(z, args), y, has_aux=True)
            jac = lx.FunctionLinearOperator(lin_fn, jax.eval_shape(lambda: y), tags=tags)
            linear_state = self.linear_solver.init(jac, options={})
        sol = lx.linear_solve(jac, fx, self.linear_solver, state=linear_state, throw=False)
        new_y = jtu.tree_map(lambda a, b: a - b, y, sol.value)
        to_stage, base = stage_geometry(args)
        stage = jtu.tree_map(lambda b, s: b + s, base, to_stage(new_y))
        with jax.numpy_dtype_promotion("standard"):
            weighted = jtu.tree_map(
                lambda d, s: d / (self.atol + self.rtol * jnp.abs(s)), to_stage(sol.value), stage
            )
            size = jnp.asarray(self.norm(weighted), state.size.dtype)
        result = optx.RESULTS.promote(sol.result)
        new_state = _StageState(state.linear_state, size, state.size, state.step + 1, result)
        return new_y, new_state, aux

    def terminate(self, fn, y, args, options, state: _StageState, tags):
        del fn, y, args, options, tags
        converged, failed = self._verdict(state)
        started = state.step > 0
        linear_failed = state.result != optx.RESULTS.successful
        result = optx.RESULTS.where(
            started & failed & ~converged, optx.RESULTS.nonlinear_divergence, state.result
        )
        return (started & (converged | failed)) | linear_failed, result

    def _verdict(self, state: _StageState) -> tuple[Bool[Array, ""], Bool[Array, ""]]:
        """(converged, failed) after `state.step` corrections."""
        return chord_verdict(
            state.size, state.size_prev, state.step,
            rtol=self.rtol, kappa=self.kappa, max_iterations=self.max_iterations,
        )  # fmt: skip

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        del fn, args, options, state, tags, result
        return y, aux, {}


def chord_verdict(size, size_prev, k, *, rtol, kappa, max_iterations):
    """`(converged, failed)` of a chord iteration after `k` corrections, the last of
    weighted size `size` and the one before `size_prev` (Hairer & Wanner's test: see the
    module docstring). Shared by `StageNewton` and `Radau5`'s stage iteration."""
    eps = jnp.finfo(size.dtype).eps
    noise = NOISE_ULPS * eps / rtol
    tol = jnp.maximum(kappa, noise)
    first = k == 1
    theta = size / size_prev
    # One correction gives no rate: take eta = 1 (a contraction by half, the slowest
    # worth continuing), so the first correction must itself be within tolerance.
    eta = jnp.where(first, 1.0, theta / (1 - theta))
    finite = jnp.isfinite(size)
    contracting = first | (theta < 1)
    converged = finite & ((size <= noise) | (contracting & (eta * size <= tol)))
    # Hairer & Wanner (8.13): at this rate the remaining iterations cannot get there.
    left = max_iterations - k
    hopeless = ~first & (theta < 1) & (theta**left / (1 - theta) * size > tol)
    failed = ~finite | (~first & (theta >= 1)) | hopeless
    return converged, failed
