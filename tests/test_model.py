"""The `Model` and `State` API: declaration, conversion, access, `replace`, metadata, and
models whose state variables are arrays (one field, or a mix of shapes)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds


class Projectile(ds.Model):
    """A projectile with drag (a test model)."""

    g: float = ds.param(9.81, units="m/s^2", description="gravitational acceleration")
    drag: float = 0.1
    n: float = 2  # an int default for a float field: becomes a float array
    label: str = eqx.field(static=True, default="test")
    state = ds.State(
        x=ds.Var(0.0, units="m", description="height"),
        v=ds.Var(5.0, units="m/s"),
    )

    def rhs(self, t, s):
        return dict(x=s.v, v=-self.g - self.drag * s.v * jnp.abs(s.v) ** (self.n - 1))


# ------------------------------------------------------------------------------ State
def test_state_access_and_metadata():
    s = ds.State(a=ds.Var(1.0, units="m", description="length", dims=None), b=2.0, c=[1, 2])
    assert s.names == ("a", "b", "c") and list(s) == ["a", "b", "c"] and len(s) == 3
    assert s.a == 1.0 and s["b"] == 2.0 and dict(s.items())["c"] == [1, 2]
    assert s.var_info("a") == ds.VarInfo(units="m", description="length")
    assert s.var_info("b") == ds.VarInfo()
    field = ds.State(u=ds.Var(np.zeros(4), dims=("x",)))
    assert field.var_info("u").dims == ("x",)
    both = ds.State({"a": 1.0}, b=2.0)  # a mapping, then keywords
    assert both.names == ("a", "b")


def test_state_unknown_variable_errors_list_the_variables():
    s = ds.State(a=1.0, b=2.0)
    with pytest.raises(AttributeError, match=r"state has no variable 'z'; variables are a, b"):
        s.z
    with pytest.raises(KeyError, match=r"state has no variable 'z'"):
        s["z"]
    with pytest.raises(ValueError, match=r"unknown state variable 'z'; variables are a, b"):
        s.replace(z=1.0)
    with pytest.raises(AttributeError, match=r"variable 'z'"):
        s.var_info("z")


def test_state_replace_keeps_order_and_metadata():
    s = ds.State(a=ds.Var(1.0, units="m"), b=2.0)
    t = s.replace(a=3.0)
    assert t.a == 3.0 and t.b == 2.0 and s.a == 1.0  # the original is untouched
    assert t.names == ("a", "b") and t.var_info("a").units == "m"
    assert s.with_values({"b": 5.0, "a": 4.0}).names == ("a", "b")


def test_state_is_a_pytree_of_its_values():
    s = ds.State(a=ds.Var(1.0, units="m"), b=jnp.arange(3.0))
    leaves = jax.tree_util.tree_leaves(s)
    assert len(leaves) == 2
    doubled = jax.tree_util.tree_map(lambda x: 2 * x, s)
    assert isinstance(doubled, ds.State) and doubled.var_info("a").units == "m"
    np.testing.assert_array_equal(doubled.b, [0.0, 2.0, 4.0])
    assert doubled.a == 2.0


# ------------------------------------------------------------------------------ Model
def test_parameters_become_arrays_and_state_values_too():
    m = Projectile()
    for name in ("g", "drag", "n"):
        value = getattr(m, name)
        assert isinstance(value, jax.Array) and value.dtype == jnp.float64, name
    assert float(m.n) == 2.0
    assert m.label == "test"  # static fields are left alone
    # Initial values are array leaves (differentiable, not static under eqx.filter_jit).
    assert all(isinstance(v, jax.Array) for _, v in m.initial_state().items())
    assert m.initial_state().var_info("x").units == "m"
    assert isinstance(Projectile(g=np.float64(3.0)).g, jax.Array)
    arr = Projectile(drag=np.array([0.1, 0.2]))
    assert isinstance(arr.drag, jax.Array)
    dynamic, static = eqx.partition(m, eqx.is_array)
    assert len(jax.tree_util.tree_leaves(dynamic)) == 5  # g, drag, n, x(0), v(0)


def test_float32_values_are_kept():
    m = Projectile(g=jnp.float32(9.81), state=ds.State(x=jnp.float32(0.0), v=jnp.float32(5.0)))
    assert m.g.dtype == jnp.float32 and m.state.v.dtype == jnp.float32


def test_parameter_names_values_and_info():
    assert Projectile.parameter_names() == ("g", "drag", "n")
    params = Projectile(drag=0.3).parameters()
    assert list(params) == ["g", "drag", "n"] and float(params["drag"]) == 0.3
    assert Projectile.parameter_info("g") == dict(
        units="m/s^2", description="gravitational acceleration"
    )
    assert Projectile.parameter_info("drag") == dict(units=None, description=None)
    with pytest.raises(ValueError, match=r"Projectile has no parameter 'mass'; parameters are g"):
        Projectile.parameter_info("mass")


def test_replace_parameters_and_state():
    m = Projectile()
    r = m.replace(g=1.6, **{"state.v": 2.0})
    assert float(r.g) == 1.6 and float(r.state.v) == 2.0 and float(r.state.x) == 0.0
    assert isinstance(r.g, jax.Array)
    assert float(m.g) == 9.81 and float(m.state.v) == 5.0  # immutable
    assert r.state.var_info("v").units == "m/s"
    r2 = m.replace(state={"x": 1.0, "v": -1.0})
    assert (float(r2.state.x), float(r2.state.v)) == (1.0, -1.0)
    r3 = m.replace(state=ds.State(x=7.0, v=8.0))
    assert float(r3.initial_state().x) == 7.0
    # A whole new state plus one variable changed on top of it.
    r4 = m.replace(state=ds.State(x=7.0, v=8.0), **{"state.x": 9.0})
    assert (float(r4.state.x), float(r4.state.v)) == (9.0, 8.0)


def test_replace_unknown_names_list_the_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"Projectile has no parameter 'mass'; parameters are "
        r"g, drag, n, and state variables are set as 'state.<var>'",
    ):
        Projectile().replace(mass=1.0)
    with pytest.raises(ValueError, match=r"unknown state variable 'h'; variables are x, v"):
        Projectile().replace(**{"state.h": 1.0})
    with pytest.raises(ValueError, match=r"has no parameter 'label'"):
        Projectile().replace(label="static fields are not parameters")


def test_model_without_state_or_rhs():
    class NoState(ds.Model):
        k: float = 1.0

        def rhs(self, t, s):
            return {}

    with pytest.raises(TypeError, match=r"NoState declares no state variables"):
        NoState().initial_state()

    class NoRhs(ds.Model):
        state = ds.State(y=1.0)

    with pytest.raises(NotImplementedError, match=r"NoRhs must define rhs"):
        ds.simulate(NoRhs(), t0=0.0, t1=1.0)
    assert not NoRhs.has_split()


def test_split_model_rhs_is_the_sum_of_its_parts():
    class Split(ds.Model):
        state = ds.State(y=2.0, z=1.0)

        def rhs_nonstiff(self, t, s):
            return dict(y=t * s.y, z=s.z)

        def rhs_stiff(self, t, s):
            return dict(y=-3 * s.y, z=s.y)

    assert Split.has_split() and not Projectile.has_split()
    m = Split()
    out = m.rhs(2.0, m.initial_state())
    assert float(out["y"]) == 2 * 2.0 - 6.0 and float(out["z"]) == 1.0 + 2.0


def test_class_options_default_off():
    assert ds.Model.time_units is None and ds.Model.stiff is False and ds.Model.phase is None
    assert Projectile().coords() == {}


# ------------------------------------------------------------------------------ array states
N = 8
RATES = np.linspace(0.5, 2.0, N)
TS = np.linspace(0.0, 1.0, 5)


class FieldDecay(ds.Model):
    """u_i' = -r_i u_i on a 1-D grid of N points: one array-valued variable."""

    rates: jax.Array
    state = ds.State(u=ds.Var(np.ones(N), units="K", dims=("x",)))

    def coords(self):
        return {"x": np.linspace(0.0, 1.0, N)}

    def rhs(self, t, s):
        return dict(u=-self.rates * s.u)


class Mixed(ds.Model):
    """A scalar c and a vector u of different shapes (the unpacked dict layout):
    u' = -r u, c' = -mean(u), so c = c0 - mean((1 - exp(-r t)) / r)."""

    rates: jax.Array
    state = ds.State(c=3.0, u=ds.Var(np.ones(N), dims=("x",)))

    def rhs(self, t, s):
        return dict(c=-jnp.mean(s.u), u=-self.rates * s.u)


def test_array_valued_state_variable():
    sol = ds.simulate(FieldDecay(rates=RATES), t=TS, rtol=1e-11, atol=1e-11)
    assert sol.u.shape == (len(TS), N)
    np.testing.assert_allclose(sol.u, np.exp(-np.outer(TS, RATES)), rtol=1e-9)
    assert sol.final["u"].shape == (N,)


def test_mixed_shapes_use_a_dict_layout():
    sol = ds.simulate(Mixed(rates=RATES), t=TS, rtol=1e-11, atol=1e-11)
    assert sol.c.shape == (len(TS),) and sol.u.shape == (len(TS), N)
    np.testing.assert_allclose(sol.u, np.exp(-np.outer(TS, RATES)), rtol=1e-9)
    c = 3.0 - np.mean((1 - np.exp(-np.outer(TS, RATES))) / RATES, axis=1)
    np.testing.assert_allclose(sol.c, c, rtol=1e-9)
    final = sol.final
    assert final["c"].shape == () and final["u"].shape == (N,)


def test_mixed_shapes_under_grad():
    # (Under vmap: tests/test_solution.py, whose Cooling model mixes shapes too.)
    # d c(T) / d r_i = -(1/N) d/dr [(1 - exp(-r T)) / r].
    def c_final(rates):
        sol = ds.simulate(Mixed(rates=rates), t0=0.0, t1=1.0, save="final", rtol=1e-11, atol=1e-11)
        return sol.c[0]

    grad = jax.grad(c_final)(jnp.asarray(RATES))
    expected = -((np.exp(-RATES) * RATES - (1 - np.exp(-RATES))) / RATES**2) / N
    np.testing.assert_allclose(grad, expected, rtol=1e-7)


def test_wrong_field_shape_is_named():
    class Bad(ds.Model):
        state = ds.State(u=np.ones(N))

        def rhs(self, t, s):
            return dict(u=s.u[:-1])

    with pytest.raises(
        ValueError,
        match=r"Bad\.rhs returned shape \(7,\) for state variable "
        r"'u', whose shape is \(8,\)",
    ):
        ds.simulate(Bad(), t=TS)
