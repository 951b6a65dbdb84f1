r"""The exact likelihood of a linear-Gaussian SDE, by the Kalman filter.

A model whose drift is affine in the state and whose noise is additive,
$$\mathrm{d}X = (A X + b)\,\mathrm{d}t + G\,\mathrm{d}W_t,$$
has Gaussian transitions: over a time step $\Delta$, $X_{t+\Delta} \mid X_t \sim
\mathcal{N}(\Phi X_t + c, Q)$ with $\Phi = e^{A\Delta}$, $c = \int_0^\Delta e^{As}b\,ds$ and
$Q = \int_0^\Delta e^{As} G G^\top e^{A^\top s}\,ds$, all read off one matrix exponential
(Van Loan, IEEE Trans. Autom. Control 23, 395 (1978), on the state augmented with a constant
1). Observations $y_k = H X_{t_k} + v_k$, $v_k \sim \mathcal{N}(0, R)$ (exact when $R = 0$),
then have the likelihood of the Kalman filter's innovations $e_k$ with covariances $S_k$:
$$-\log L = \tfrac12 \sum_k \left(e_k^\top S_k^{-1} e_k + \log\det 2\pi S_k\right).$$
For the Ornstein–Uhlenbeck process observed exactly this is the product of its transition
densities. $A$, $b$ and $G$ are the model's own `rhs` and `diffusion` (their Jacobian at the
initial state), checked to be affine and state-independent before the fit starts.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import expm
from jaxtyping import Array, Float

from difsim._core import Model, State
from difsim._fit._data import FitData
from difsim._fit._diagnostics import Estimate, likelihood_step
from difsim._fit._problem import AbstractProblem
from difsim._fit._transforms import AbstractTransform


def linear_sde(model: Model, t) -> tuple[Array, Array, Array]:
    """`(A, b, G)` of a model with scalar state variables `x` (in declaration order):
    drift `A x + b` (`(d, d)`, `(d,)`) and diffusion `G` (`(d, m)`), as the model
    computes them at its initial state and time `t` (traced: differentiable in the model's
    parameters)."""
    state = model.initial_state()
    names, info = state.names, state.info
    x0 = jnp.stack([jnp.asarray(state[n], float) for n in names])

    def drift(x):
        out = model.rhs(t, State.from_info(info, dict(zip(names, x))))
        return jnp.stack([jnp.asarray(out[n], x.dtype) for n in names])

    jac = jax.jacfwd(drift)(x0)
    out = model.diffusion(t, State.from_info(info, dict(zip(names, x0))))
    dim = type(model).noise.dim
    if dim is None:
        g = jnp.diag(jnp.stack([jnp.asarray(out.get(n, 0.0), x0.dtype) for n in names]))
    else:
        zero = jnp.zeros(dim, x0.dtype)
        g = jnp.stack(
            [jnp.broadcast_to(jnp.asarray(out.get(n, zero), x0.dtype), (dim,)) for n in names]
        )
    return jac, drift(x0) - jac @ x0, g


def check_linear(model: Model, t0: float) -> None:
    """Raise `ValueError` unless `model` is a linear-Gaussian SDE: scalar state variables,
    drift affine in the state and independent of time, noise independent of the state
    (checked at random states, concretely, before a fit)."""
    cls = type(model).__name__
    state = model.initial_state()
    if any(np.ndim(v) != 0 for v in state.values.values()):
        raise ValueError(f"KalmanLikelihood needs scalar state variables; {cls} has arrays")
    names, info = state.names, state.info
    a, b, g = linear_sde(model, t0)
    rng = np.random.default_rng(0)
    for shift, dt in ((rng.normal(size=len(names)), 0.0), (rng.normal(size=len(names)), 1.0)):
        x = np.asarray([float(state[n]) for n in names]) + 3 * shift
        s = State.from_info(info, dict(zip(names, jnp.asarray(x))))
        f = np.asarray([float(model.rhs(t0 + dt, s)[n]) for n in names])
        if not np.allclose(f, np.asarray(a @ x + b), rtol=1e-6, atol=1e-9):
            raise ValueError(
                f"KalmanLikelihood needs a drift that is affine in the state and independent "
                f"of time, and {cls}.rhs is not (at t = {t0 + dt:g}): use SimulatedMoments"
            )
        a2, b2, g2 = linear_sde(model.replace(state=s), t0 + dt)
        if not np.allclose(np.asarray(g2), np.asarray(g), rtol=1e-6, atol=1e-12):
            raise ValueError(
                f"KalmanLikelihood needs additive noise, and {cls}.diffusion depends on the "
                "state or time: use SimulatedMoments"
            )


def transition(a, b, g, dt) -> tuple[Array, Array, Array]:
    """`(Φ, c, Q)` of the exact transition over a step `dt` (Van Loan's matrix exponential
    on the state augmented with a constant 1)."""
    d = a.shape[0]
    aug = jnp.zeros((d + 1, d + 1), a.dtype).at[:d, :d].set(a).at[:d, d].set(b)
    gg = jnp.zeros((d + 1, d + 1), a.dtype).at[:d, :d].set(g @ g.T)
    block = jnp.block([[-aug, gg], [jnp.zeros_like(aug), aug.T]]) * dt
    e = expm(block)
    phi = e[d + 1 :, d + 1 :].T
    q = phi @ e[: d + 1, d + 1 :]
    return phi[:d, :d], phi[:d, d], 0.5 * (q[:d, :d] + q[:d, :d].T)


class KalmanProblem(AbstractProblem):
    """Fit a linear-Gaussian SDE to one observed path by its exact likelihood: `loss` is
    the negative log-likelihood, `residuals` the standardised innovations (diagnostics).

    `observed`: the state indices the data columns observe; `obs_var`: their measurement
    noise variances (0: exact); `t0`: the time of the model's (fixed) initial state.
    Observations at `t0` itself carry no information about the parameters and are skipped.
    """

    model: Model
    free: tuple[str, ...] = eqx.field(static=True)
    transforms: tuple[AbstractTransform, ...]
    data: FitData
    noise: str = eqx.field(static=True)
    t0: Float[Array, ""]
    observed: tuple[int, ...] = eqx.field(static=True)
    obs_var: Float[Array, " k"]
    # The distinct time steps between observations (from t0), and each observation's: one
    # matrix exponential per distinct step (one for evenly spaced data), not per datum.
    steps: Float[Array, " u"]
    step_index: tuple[int, ...] = eqx.field(static=True)

    def _filter(self, model: Model):
        """`(innovations (n, k), S (n, k, k), used (n,))` over the data."""
        a, b, g = linear_sde(model, self.t0)
        state = model.initial_state()
        m = jnp.stack([jnp.asarray(state[n], a.dtype) for n in state.names])
        p = jnp.zeros((m.shape[0], m.shape[0]), a.dtype)
        h = jnp.eye(m.shape[0], dtype=a.dtype)[np.asarray(self.observed)]
        r = jnp.diag(self.obs_var)
        times = self.data.times
        phis, cs, qs = jax.vmap(lambda dt: transition(a, b, g, dt))(self.steps)

        def step(carry, obs):
            m, p = carry
            t, y, mask, i = obs
            phi, c, q = phis[i], cs[i], qs[i]
            m, p = phi @ m + c, phi @ p @ phi.T + q
            used = (t > self.t0) & jnp.all(mask)
            s = h @ p @ h.T + r
            s_safe = jnp.where(used, s, jnp.eye(s.shape[0], dtype=s.dtype))
            e = jnp.where(used, y - h @ m, 0.0)
            gain = p @ h.T @ jnp.linalg.inv(s_safe)
            m = jnp.where(used, m + gain @ e, m)
            p = jnp.where(used, p - gain @ h @ p, p)
            return (m, 0.5 * (p + p.T)), (e, s_safe, used)

        obs = (times, self.data.values, self.data.mask, jnp.asarray(self.step_index))
        _, (e, s, used) = jax.lax.scan(step, (m, p), obs)
        return e, s, used

    def loss(self, u):
        e, s, used = self._filter(self.model_from(u))
        sign, logdet = jnp.linalg.slogdet(2 * jnp.pi * s)
        quad = jnp.einsum("ni,nij,nj->n", e, jnp.linalg.inv(s), e)
        nll = 0.5 * jnp.sum(jnp.where(used, quad + logdet, 0.0))
        return jnp.where(jnp.all(sign > 0), nll, jnp.nan)

    def residuals(self, u):
        e, s, used = self._filter(self.model_from(u))
        whitened = jax.vmap(lambda e, s: jnp.linalg.solve(jnp.linalg.cholesky(s), e))(e, s)
        return jnp.where(used[:, None], whitened, 0.0).reshape(-1)

    def predict(self, model, coords):
        """The model's mean at `coords` from its initial state at `t0`, `(c, k)`."""
        a, b, g = linear_sde(model, self.t0)
        state = model.initial_state()
        m0 = jnp.stack([jnp.asarray(state[n], a.dtype) for n in state.names])

        def mean(t):
            phi, c, _ = transition(a, b, g, t - self.t0)
            return phi @ m0 + c

        means = jax.vmap(mean)(jnp.asarray(coords, a.dtype))
        return means[:, np.asarray(self.observed)]

    def covariance(self, u) -> Estimate:
        """The [`Estimate`][] of a likelihood fit: the inverse observed information (the
        Hessian of the negative log-likelihood) in natural units, and a Newton step on
        the negative log-likelihood for the final-point test."""
        hess, grad = (np.asarray(a) for a in _hessian(self, u))
        dxdu = np.asarray(self.derivative(u))
        try:
            cov_u = np.linalg.inv(hess)
        except np.linalg.LinAlgError:
            cov_u = np.full_like(hess, np.nan)
        cov = dxdu[:, None] * cov_u * dxdu[None, :]
        dof = self.data.num_observations - u.shape[0]
        decrease, step = likelihood_step(grad, hess)
        r = np.asarray(self.residuals(u))
        return Estimate(cov, r, 1.0, dof, hess, decrease, step, "Newton")


@eqx.filter_jit
def _hessian(problem: KalmanProblem, u):
    # Forward over forward, not `jax.hessian` (forward over reverse): for the few
    # parameters of a Kalman fit the p² tangents cost nothing at run time, and the program
    # skips the reverse pass through the filter's scan and the matrix exponential's
    # branches: compiled in half the time (the OU fit of docs/stochastic.md: 8.7 s -> 4.0-4.6
    # s, the whole fit 21 -> 16-18 s; the same Hessian to 6e-16 relative). The gradient
    # comes along, from the same pass.
    grad = jax.jacfwd(problem.loss)

    def with_grad(v):
        g = grad(v)
        return g, g

    return jax.jacfwd(with_grad, has_aux=True)(u)


def step_table(t0: float, times: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """`(distinct steps, index of each observation's step)` between `t0` and the data
    times, the steps rounded to 1e-12 relative so that evenly spaced data share one."""
    steps = np.diff(np.concatenate([[t0], np.asarray(times, np.float64)]))
    scale = max(float(np.max(np.abs(steps))), 1e-300)
    keys = np.round(steps / scale, 12)
    unique, index = np.unique(keys, return_inverse=True)
    return unique * scale, tuple(int(i) for i in index)
