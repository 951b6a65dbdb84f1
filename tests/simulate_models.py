"""Test models of `test_simulate.py`, written here rather than taken from the zoo so that
those tests pin down the core alone."""

import difsim as ds


class Decay(ds.Model):
    """y' = -k y."""

    k: float = ds.param(0.7, units="1/s", description="rate constant")
    state = ds.State(y=ds.Var(2.0, units="mol"))

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)


class DampedOscillator(ds.Model):
    """x'' + 2 gamma x' + omega^2 x = 0, written as a first-order system."""

    omega: float = 2.0
    gamma: float = 0.1
    state = ds.State(x=1.0, v=0.0)

    def rhs(self, t, s):
        return dict(x=s.v, v=-(self.omega**2) * s.x - 2 * self.gamma * s.v)


class Riccati(ds.Model):
    """y' = a y^2, y(0) = 1: y = 1 / (1 - a t), which blows up at t = 1/a."""

    a: float = 1.0
    state = ds.State(y=1.0)

    def rhs(self, t, s):
        return dict(y=self.a * s.y**2)


class VanDerPol(ds.Model):
    """x'' - mu (1 - x^2) x' + x = 0."""

    mu: float = 1.0
    state = ds.State(x=2.0, v=0.0)

    def rhs(self, t, s):
        return dict(x=s.v, v=self.mu * (1 - s.x**2) * s.v - s.x)


class Ball(ds.Model):
    """A ball dropped from height h in uniform gravity g."""

    g: float = ds.param(9.81, units="m/s^2")
    state = ds.State(h=ds.Var(10.0, units="m"), v=ds.Var(0.0, units="m/s"))

    def rhs(self, t, s):
        return dict(h=s.v, v=-self.g + 0 * s.v)


def ground(t, s, model):
    return s.h


GROUND = ds.Event(ground)
