"""Refuse a fixed step that makes an explicit solver unstable (the CFL condition, generally).

An explicit Runge–Kutta method is stable for `y' = λ y` only while `h·λ` lies in its
stability region; along the negative real axis that region ends at `-β` (β = 2 for Euler).
For a method-of-lines PDE the largest |λ| of the Jacobian grows like `D/dx²` (diffusion)
or `c/dx` (advection), so a fixed step that is too large blows up after a few steps and
wastes the whole run. Before such a solve we estimate the Jacobian's spectral radius at the
initial state by power iteration (a few Jacobian–vector products) and raise when
`dt0·ρ` exceeds β by a clear margin.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

# Length of the real negative stability interval of each explicit solver: where
# |R(z)| = |1 + z bᵀ(I - zA)⁻¹1| first exceeds 1 for z < 0, computed from diffrax's Butcher
# tableaux and rounded up (so the check never refuses a stable step).
STABILITY_INTERVAL: dict[type, float] = {
    dfx.Euler: 2.0,
    dfx.Heun: 2.001,
    dfx.Midpoint: 2.001,
    dfx.Ralston: 2.001,
    dfx.Bosh3: 2.52,
    dfx.Tsit5: 3.51,
    dfx.Dopri5: 3.31,
    dfx.Dopri8: 5.17,
}
_MARGIN = 1.2  # power iteration estimates ρ from below; refuse only clear violations
_ITERATIONS = 40


@eqx.filter_jit
def _spectral_radius(vector_field, t0, y0, model):
    f = lambda y: vector_field(t0, y, model)  # noqa: E731
    key = jax.random.key(0)
    v = jax.tree.map(lambda y: jax.random.normal(key, jnp.shape(y), jnp.result_type(y)), y0)

    def norm(tree):
        return jnp.sqrt(sum(jnp.sum(leaf**2) for leaf in jax.tree.leaves(tree)))

    def body(_, carry):
        v, _ = carry
        jv = jax.jvp(f, (y0,), (v,))[1]
        size = norm(jv)
        return jax.tree.map(lambda x: x / jnp.where(size > 0, size, 1.0), jv), size

    v = jax.tree.map(lambda x: x / norm(v), v)
    # (y0 is a dict when the state's variables differ in shape: their common dtype.)
    dtype = jnp.result_type(*jax.tree.leaves(y0))
    _, rho = jax.lax.fori_loop(0, _ITERATIONS, body, (v, jnp.zeros((), dtype)))
    return rho


def check_explicit_step(solver, vector_field, model, t0, y0, dt0, name: str) -> None:
    """Raise `ValueError` if fixed step `dt0` is clearly unstable for explicit `solver`.

    Skipped (silently) for other solvers and when `t0`, `y0` or `dt0` are traced (inside
    `jit`/`vmap`, where nothing can be computed before the solve).
    """
    beta = STABILITY_INTERVAL.get(type(solver))
    if beta is None or dt0 is None:
        return
    leaves = jax.tree.leaves((dt0, t0, y0, model))
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return  # traced (jit/vmap/grad): nothing concrete to check before the solve
    h = float(np.asarray(dt0))
    rho = float(_spectral_radius(vector_field, t0, y0, model))
    if not np.isfinite(rho) or h * rho <= _MARGIN * beta:
        return
    raise ValueError(
        f"dt0 = {h:g} is unstable for {type(solver).__name__} on {name}: the Jacobian's "
        f"largest eigenvalue magnitude at the initial state is about {rho:.4g}, so "
        f"dt0·|λ| ≈ {h * rho:.3g} exceeds the method's stability limit {beta:g} (a CFL "
        f"violation for a PDE). Use dt0 <= {beta / rho:.3g}, an adaptive controller, or an "
        "implicit/IMEX/exponential solver (e.g. 'kvaerno5', 'crank_nicolson', 'etdrk4')"
    )
