"""A damped oscillator whose friction is learned: known spring, unknown friction force.

    dx/dt = v,    dv/dt = -omega^2 x + f(v)

`f` is a network the config declares (`[fit.network.friction]` in
`learned_friction.toml`; in Python: `LearnedFriction(friction=eqx.nn.MLP(1, 1, 4, 1,
...))`) and the fit trains on `data/damped_oscillator.csv`, made with
linear friction f(v) = -0.3 v (see `data/make_oscillator_data.py`): `true_friction`, which
the config's `reference` draws beside the learned network (the PNG's "learned friction").
"""

import equinox as eqx

import difsim as ds


def true_friction(v):
    """The friction force per unit mass that made the data: -0.3 v (v: shape (1,))."""
    return -0.3 * v


class LearnedFriction(ds.Model):
    omega: float = ds.param(2.0, units="1/s", description="angular frequency of the spring")
    # The network of [fit.network.friction] (v -> force). No default: building one here
    # would start JAX whenever a config naming this file is merely checked.
    friction: eqx.Module | None = None
    state = ds.State(x=ds.Var(1.0, units="m"), v=ds.Var(0.0, units="m/s"))
    time_units = "s"

    def rhs(self, t, s):
        return {"x": s.v, "v": -(self.omega**2) * s.x + self.friction(s.v[None])[0]}
