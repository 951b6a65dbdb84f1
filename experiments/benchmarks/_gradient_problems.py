"""Problems of `bench_gradients.py`: each written twice, with difsim and with diffrax +
equinox by hand, as functions of the differentiated parameters alone.

Imported by bench_gradients.py after it has enabled float64. Every problem is a dict
`{name, P, x, fns}`: `x` the parameters (an `eqx.nn.MLP`, an array, or a tuple of
arguments), `fns` the contenders `{"difsim loss", "difsim grad", "diffrax loss",
"diffrax grad", ...}`, each a plain function of `x` (the benchmark compiles them). A loss
returns `(loss, steps)`: the steps its forward solve took (summed over lanes).
"""

import math
from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import optax

import difsim as ds
from difsim._core import State, Var, param

RTOL = ATOL = 1e-6
MAX_STEPS = 16384  # difsim's default; diffrax's checkpoints follow it (log2 of it)


def mlp_width(p: int) -> int:
    """Width `w` of a 2-w-w-2 MLP whose weight count `w² + 6w + 2` is nearest `p`."""
    w = max(1, round(-3 + math.sqrt(7 + p)))
    return min((w - 1, w, w + 1), key=lambda v: abs(v * v + 6 * v + 2 - p) if v else p)


def count(x) -> int:
    return sum(a.size for a in jax.tree.leaves(eqx.filter(x, eqx.is_inexact_array)))


def _sum_squares(sol) -> tuple[jax.Array, jax.Array]:
    """`(sum of squares of the saved states, steps taken)` of a difsim or diffrax solution."""
    steps = sol.num_steps if isinstance(sol, ds.Solution) else sol.stats["num_steps"]
    return sum(jnp.sum(y**2) for y in jax.tree.leaves(sol.ys)), jnp.sum(steps)


def _solve(field, y0, args, ts, adjoint=None, dt0=None):
    return dfx.diffeqsolve(
        dfx.ODETerm(field), dfx.Tsit5(), ts[0], ts[-1], dt0, y0, args=args,
        saveat=dfx.SaveAt(ts=ts), stepsize_controller=dfx.PIDController(rtol=RTOL, atol=ATOL),
        max_steps=MAX_STEPS, adjoint=adjoint or dfx.RecursiveCheckpointAdjoint(),
    )  # fmt: skip


def _grad(loss: Callable) -> Callable:
    return eqx.filter_grad(lambda x, *a: loss(x, *a)[0])


def _scan_loss(field: Callable, split: Callable, t0: float, t1: float, steps: int) -> Callable:
    """The floor under diffrax's gradient: `steps` equal Tsit5 steps of `field` in a
    `lax.scan`, differentiated by JAX directly (no step control, no checkpoints, every
    stage kept); loss = sum of squares of the state after each step. `split(x) -> (y0,
    args)`."""
    solver, term, dt = dfx.Tsit5(), dfx.ODETerm(field), (t1 - t0) / steps

    def loss(x):
        y0, args = split(x)

        def step(carry, t):
            y, state = carry
            y, _, _, state, _ = solver.step(term, t, t + dt, y, args, state, made_jump=False)
            return (y, state), jnp.sum(y**2)

        state = solver.init(term, t0, t0 + dt, y0, args)
        _, sq = jax.lax.scan(step, (y0, state), t0 + dt * jnp.arange(steps))
        return jnp.sum(sq), jnp.asarray(steps)

    return loss


DISCRETE = "difsim grad, discrete"


def _contenders(difsim_loss: Callable, hand_loss: Callable, steps: int | None = None,
                scan: Callable | None = None,
                discrete: Callable | None = None) -> dict:  # fmt: skip
    """Loss and gradient of each, and where the diffrax gradient's time goes: `steps` (the
    most steps a solve takes) adds its gradient with `checkpoints=steps` (diffrax's default,
    about sqrt(2 max_steps) = 180 checkpoints, allocates and carries them all however few
    steps are taken), `scan` a `_scan_loss` of as many steps and its gradient; `discrete`
    difsim's loss with `adjoint="discrete"` adds its gradient (the engine's own steps)."""
    fns = {
        "difsim loss": difsim_loss,
        "difsim grad": _grad(difsim_loss),
        "diffrax loss": hand_loss,
        "diffrax grad": _grad(hand_loss),
    }
    if steps:
        adjoint = dfx.RecursiveCheckpointAdjoint(checkpoints=steps)
        fns["diffrax grad, checkpoints = steps"] = _grad(lambda x: hand_loss(x, adjoint))
    if scan:
        fns |= {"scan loss": scan, "scan grad": _grad(scan)}
    if discrete:
        fns[DISCRETE] = _grad(discrete)
    return fns


# ------------------------------------------------------------------ (a) network parameters
class NeuralOscillator(ds.Model):
    """A damped oscillator plus a learned force: the universal-differential-equation shape."""

    net: eqx.nn.MLP
    state = State(x=Var(1.0), v=Var(0.0))

    def rhs(self, t, s):
        z = self.net(jnp.stack([s.x, s.v]))
        return dict(x=s.v + 0.1 * z[0], v=-s.x - 0.1 * s.v + 0.1 * z[1])


def _oscillator_field(t, y, net):
    z = net(y)
    return jnp.stack([y[1] + 0.1 * z[0], -y[0] - 0.1 * y[1] + 0.1 * z[1]])


NET_TS = jnp.linspace(0.0, 10.0, 21)
NET_DT0 = 0.01


def network_problem(p: int, anatomy: bool = True) -> dict:
    """2-w-w-2 tanh MLP (about `p` weights) inside a damped oscillator, `t` in [0, 10],
    loss = sum of squares of both states at 21 times."""
    w = mlp_width(p)
    net = eqx.nn.MLP(2, 2, w, 2, activation=jnp.tanh, key=jax.random.key(w))
    model = NeuralOscillator(net=net)

    def sol_d(net, adjoint="checkpoint"):
        m = eqx.tree_at(lambda m: m.net, model, net)
        return ds.simulate(m, NET_TS, rtol=RTOL, atol=ATOL, dt0=NET_DT0, adjoint=adjoint)

    def sol_h(net, adjoint=None):
        return _solve(_oscillator_field, jnp.array([1.0, 0.0]), net, NET_TS, adjoint, NET_DT0)

    hand = lambda n, adjoint=None: _sum_squares(sol_h(n, adjoint))  # noqa: E731
    steps = anatomy and int(eqx.filter_jit(hand)(net)[1])
    y0 = jnp.array([1.0, 0.0])
    scan = anatomy and _scan_loss(_oscillator_field, lambda n: (y0, n), 0.0, 10.0, steps)
    discrete = lambda n: _sum_squares(sol_d(n, "discrete"))  # noqa: E731
    fns = _contenders(lambda n: _sum_squares(sol_d(n)), hand, steps, scan, discrete)
    pairs = [(DISCRETE, "diffrax grad")]
    return dict(name=f"MLP 2-{w}-{w}-2", P=count(net), x=net, fns=fns, pairs=pairs)


def rhs_problem(p: int, evals: int = 192) -> dict:
    """Where a wide network's gradient goes: `evals` evaluations of the 2-w-w-2 MLP of
    `network_problem(p)` (about a solve's: 32 steps x 6 stages) at random states, summed;
    the gradient in the weights of the same sum (a) as reverse mode through a time loop
    forms it, one VJP per evaluation added into the carried weight cotangent (rank-1 updates
    of every weight matrix), and (b) batched: one VJP of all evaluations at once (each
    layer's weight gradient one matrix product). `pairs`: (a) and (b) must agree."""
    w = mlp_width(p)
    net = eqx.nn.MLP(2, 2, w, 2, activation=jnp.tanh, key=jax.random.key(w))
    ys = jax.random.normal(jax.random.key(0), (evals, 2))
    ct = jnp.array([1.0, 0.5])

    def forward(net):
        return jax.lax.fori_loop(0, evals, lambda i, acc: acc + ct @ net(ys[i]), 0.0)

    def per_eval(net):
        arrays, static = eqx.partition(net, eqx.is_array)

        def body(i, acc):
            _, vjp = jax.vjp(lambda a: eqx.combine(a, static)(ys[i]), arrays)
            return jax.tree.map(jnp.add, acc, vjp(ct)[0])

        return jax.lax.fori_loop(0, evals, body, jax.tree.map(jnp.zeros_like, arrays))

    def batched(net):
        return eqx.filter_grad(lambda n: jnp.sum(jax.vmap(n)(ys) @ ct))(net)

    fns = {"rhs evaluations": forward, "VJP per evaluation": per_eval, "VJP batched": batched}
    return dict(name=f"MLP 2-{w}-{w}-2, {evals} evaluations", P=count(net), x=net, fns=fns,
                pairs=[("VJP per evaluation", "VJP batched")])  # fmt: skip


# ------------------------------------------------------------------ (b) field parameters
FIELD_TS = jnp.linspace(0.0, 20.0, 11)
FIELD_D = 0.5  # cells²/time: D/dx² is the same on every grid, so are the steps
FIELD_DT0 = 0.05


def field_problem(n: int, anatomy: bool = True) -> dict:
    """1-D periodic heat equation on `n` cells of width 1, the initial field the parameter
    (P = n), `t` in [0, 20], loss = sum of squares of the field at 11 times."""
    model = ds.models.Heat(grid=ds.Grid.periodic((n,), (float(n),)), D=FIELD_D)
    u0 = jax.random.uniform(jax.random.key(n), (n,), minval=0.0, maxval=1.0)

    def sol_d(u0, adjoint="checkpoint"):
        m = model.replace(**{"state.u": u0})
        return ds.simulate(m, FIELD_TS, solver="tsit5", controller="pid", rtol=RTOL, atol=ATOL,
                           dt0=FIELD_DT0, adjoint=adjoint)  # fmt: skip

    def field(t, u, args):
        return FIELD_D * (jnp.roll(u, 1) - 2 * u + jnp.roll(u, -1))

    def sol_h(u0, adjoint=None):
        return _solve(field, u0, None, FIELD_TS, adjoint, FIELD_DT0)

    hand = lambda u, adjoint=None: _sum_squares(sol_h(u, adjoint))  # noqa: E731
    steps = anatomy and int(jax.jit(hand)(u0)[1])
    scan = anatomy and _scan_loss(field, lambda u: (u, None), 0.0, 20.0, steps)
    discrete = lambda u: _sum_squares(sol_d(u, "discrete"))  # noqa: E731
    fns = _contenders(lambda u: _sum_squares(sol_d(u)), hand, steps, scan, discrete)
    pairs = [(DISCRETE, "diffrax grad")]
    return dict(name=f"heat 1-D, {n:,} cells", P=n, x=u0, fns=fns, pairs=pairs)


# ------------------------------------------------------------------ 256-lane ensemble
class NeuralODE(ds.Model):
    """`dy/dt = net(y)`, two states."""

    net: eqx.nn.MLP
    state = State(x=Var(0.0), y=Var(0.0))

    def rhs(self, t, s):
        z = self.net(jnp.stack([s.x, s.y]))
        return dict(x=z[0], y=z[1])


ENS_TS = jnp.linspace(0.0, 2.0, 21)
CHECKPOINTED = "difsim grad, checkpointed loops"


def ensemble_problem(lanes: int = 256, width: int = 32) -> dict:
    """MLP 2-32-32-2 (1,218 weights, tanh), `t` in [0, 2], `lanes` initial states uniform in
    [-1, 1]², loss = sum of squares of every lane's states at 21 times. difsim contenders
    are absent (`error` says why) where `simulate_ensemble` refuses the model."""
    net = eqx.nn.MLP(2, 2, width, 2, activation=jnp.tanh, key=jax.random.key(0))
    y0 = jax.random.uniform(jax.random.key(1), (lanes, 2), minval=-1.0, maxval=1.0)
    model = NeuralODE(net=net)

    def sol_d(net, adjoint="auto"):
        m = eqx.tree_at(lambda m: m.net, model, net)
        points = {"state.x": y0[:, 0], "state.y": y0[:, 1]}
        return ds.simulate_ensemble(m, points, ENS_TS, rtol=RTOL, atol=ATOL, adjoint=adjoint)

    def sol_h(net, adjoint=None):
        field = lambda t, y, net: net(y)  # noqa: E731
        return jax.vmap(lambda y: _solve(field, y, net, ENS_TS, adjoint))(y0)

    # Steps are summed over the lanes (each lane steps on its own in both).
    most = int(jnp.max(eqx.filter_jit(lambda n: sol_h(n).stats["num_steps"])(net)))
    hand = lambda n, adjoint=None: _sum_squares(sol_h(n, adjoint))  # noqa: E731
    fns = _contenders(lambda n: _sum_squares(sol_d(n)), hand, most)
    # The engine's reverse mode before its discrete adjoint (the default's reverse mode).
    fns[CHECKPOINTED] = _grad(lambda n: _sum_squares(sol_d(n, "checkpoint")))
    name = f"{lanes} lanes, MLP 2-{width}-{width}-2"
    return dict(name=name, P=count(net), x=net, fns=fns)


# ------------------------------------------------------------------ UDE Lotka–Volterra step
LV_P = (1.3, 0.9, 0.8, 1.8)
LV_U0 = (0.44249296, 4.6280594)
LV_TS = jnp.arange(0.0, 5.0 + 1e-9, 0.25)


def rbf(x):
    return jnp.exp(-(x**2))


class LotkaVolterraUDE(ds.Model):
    """Rackauckas et al. 2020: the known growth and death terms plus a network for the
    interaction terms, `du = alpha u + net_1`, `dv = -delta v + net_2`."""

    net: eqx.nn.MLP
    alpha: float = param(LV_P[0])
    delta: float = param(LV_P[3])
    state = State(u=Var(LV_U0[0]), v=Var(LV_U0[1]))

    def rhs(self, t, s):
        z = self.net(jnp.stack([s.u, s.v]))
        return dict(u=self.alpha * s.u + z[0], v=-self.delta * s.v + z[1])


def lv_data(noise: float = 0.05) -> jax.Array:
    """The true Lotka–Volterra states on `LV_TS` (diffrax, 1e-10), plus `noise` times each
    state's standard deviation of Gaussian noise (seed 0): shape (21, 2)."""
    a, b, c, d = LV_P

    def field(t, y, args):
        return jnp.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])

    ys = dfx.diffeqsolve(
        dfx.ODETerm(field), dfx.Tsit5(), 0.0, 5.0, 0.01, jnp.array(LV_U0),
        saveat=dfx.SaveAt(ts=LV_TS),
        stepsize_controller=dfx.PIDController(rtol=1e-10, atol=1e-10),
    ).ys  # fmt: skip
    return ys + noise * jnp.std(ys, axis=0) * jax.random.normal(jax.random.key(0), ys.shape)


def ude_problem(learning_rate: float = 1e-2) -> dict:
    """One optax Adam step of the UDE Lotka–Volterra MSE, difsim vs by hand: `fns` take
    `(net, opt_state)`; 2-5-5-5-2 rbf MLP, Tsit5 at `RTOL`/`ATOL`, diffrax's first step."""
    data = lv_data()
    net = eqx.nn.MLP(2, 2, 5, 3, activation=rbf, key=jax.random.key(2020))
    model = LotkaVolterraUDE(net=net)
    a, d = LV_P[0], LV_P[3]

    def loss_d(net, state=None, adjoint="checkpoint"):
        m = eqx.tree_at(lambda m: m.net, model, net)
        sol = ds.simulate(m, LV_TS, rtol=RTOL, atol=ATOL, adjoint=adjoint)
        ys = jnp.stack([sol.ys["u"], sol.ys["v"]], axis=-1)
        return jnp.mean((ys - data) ** 2), sol.num_steps

    def field(t, y, net):
        z = net(y)
        return jnp.stack([a * y[0] + z[0], -d * y[1] + z[1]])

    def loss_h(net, state=None):
        sol = _solve(field, jnp.array(LV_U0), net, LV_TS)
        return jnp.mean((sol.ys - data) ** 2), sol.stats["num_steps"]

    opt = optax.adam(learning_rate)

    def stepper(loss):
        def step(net, state):
            (value, _), grad = eqx.filter_value_and_grad(loss, has_aux=True)(net)
            updates, state = opt.update(grad, state, eqx.filter(net, eqx.is_inexact_array))
            return eqx.apply_updates(net, updates), state, value

        return step

    # The floor: as many equal Tsit5 steps as the adaptive solve takes (25), no step
    # control and no saves, in a `lax.scan` that JAX differentiates directly.
    y0 = jnp.array(LV_U0)
    floor = _scan_loss(field, lambda n: (y0, n), 0.0, 5.0, int(eqx.filter_jit(loss_h)(net)[1]))
    fns = {"difsim step": stepper(loss_d), "diffrax step": stepper(loss_h),
           "difsim step, discrete": stepper(lambda n: loss_d(n, adjoint="discrete")),
           "floor step": stepper(floor), "difsim loss": loss_d, "diffrax loss": loss_h,
           "floor loss": floor}  # fmt: skip
    # The same steps called as a training loop calls them: through `eqx.filter_jit`, whose
    # dispatch (flattening the model and the optimiser state) is then part of each step.
    user = {"difsim step, filter_jit": fns["difsim step"],
            "diffrax step, filter_jit": fns["diffrax step"]}  # fmt: skip
    state = opt.init(eqx.filter(net, eqx.is_inexact_array))
    pairs = [("difsim step, discrete", "diffrax step")]
    return dict(name="UDE Lotka–Volterra", P=count(net), x=(net, state), fns=fns, user=user,
                pairs=pairs)  # fmt: skip
