"""Issue 14, point 12: mistakes in a model's code reach the user as difsim errors that name
the model, the method and the fix, never as raw JAX errors or silently wrong numbers."""

import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds


class BranchOnState(ds.Model):
    k: float = 1.0
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        if s.x > 0:  # a Python `if` on a traced value
            return dict(x=-self.k * s.x)
        return dict(x=s.x)


class BranchOnParameter(ds.Model):
    k: float = 1.0
    order: int = 2  # an int field is static: a Python loop over it is fine
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        x = s.x
        for _ in range(self.order):
            x = 1.0 * x
        if self.k > 0:  # a parameter is traced in the compiled solve, too
            return dict(x=-self.k * x)
        return dict(x=x)


class MissingAndExtra(ds.Model):
    state = ds.State(x=1.0, y=0.0)

    def rhs(self, t, s):
        return dict(x=-s.x, yy=s.y)


class ComplexOutput(ds.Model):
    w: float = 1.0
    state = ds.State(x=1.0)

    def rhs(self, t, s):
        return dict(x=1j * self.w * s.x)


class ComplexState(ds.Model):
    w: float = 1.5
    state = ds.State(x=1.0 + 0.0j)

    def rhs(self, t, s):
        return dict(x=1j * self.w * s.x)


class FieldWithoutValue(ds.Model):
    D: float = 0.1
    grid: ds.Grid = ds.Grid.periodic(shape=(16,), extent=2 * np.pi)
    state = ds.State(u=ds.Var(None, units="K"), v=0.0)

    def rhs(self, t, s):
        return dict(u=self.D * ds.fd.laplacian(s.u, self.grid), v=-s.v)


SPAN = dict(t0=0.0, t1=1.0, save="final")

TRACES = []  # one entry per trace of `Variants.rhs`


class Variants(ds.Model):
    k: float = 1.0
    variant: int = 1  # static: part of the tree structure the check is keyed on

    state = ds.State(x=1.0)

    def rhs(self, t, s):
        TRACES.append(self.variant)
        if self.variant == 1:
            return dict(x=-self.k * s.x)
        return dict(x=-self.k * s.x, y=s.x)


@pytest.mark.parametrize(
    "cls, line", [(BranchOnState, "if s.x > 0:"), (BranchOnParameter, "if self.k > 0:")]
)
def test_python_if_on_traced_value_names_model_method_and_fix(cls, line):
    with pytest.raises(TypeError) as info:
        ds.simulate(cls(), **SPAN)
    message = str(info.value)
    assert message.startswith(f"{cls.__name__}.rhs uses a Python `if`")
    assert "line" in message and line in message and __file__ in message
    assert "jnp.where" in message and "jax.lax.cond" in message


def test_python_if_in_a_sweep_is_named_before_the_engine_traces_it():
    # The ensemble engine (the sweep's default) traces rhs itself: the sweep checks first.
    with pytest.raises(TypeError, match=r"BranchOnState\.rhs uses a Python `if`"):
        ds.sweep(BranchOnState(), ds.GridSweep({"k": [0.5, 1.0]}), t0=0.0, t1=1.0)
    # Called directly, the engine checks too.
    with pytest.raises(TypeError, match=r"BranchOnState\.rhs uses a Python `if`"):
        ds.simulate_ensemble(BranchOnState(), {"k": jnp.asarray([0.5, 1.0])}, t0=0.0, t1=1.0)


def test_missing_and_extra_keys_are_both_reported():
    with pytest.raises(ValueError) as info:
        ds.simulate(MissingAndExtra(), **SPAN)
    message = str(info.value)
    assert "no derivative for state variable 'y'" in message
    assert "'yy', which is not a state variable of MissingAndExtra" in message
    assert "is 'yy' meant to be 'y'?" in message


def test_complex_derivative_of_a_real_state_is_refused_not_cast():
    # Cast to real, the derivative was 0 and x stayed 1.0 "successfully".
    with pytest.raises(TypeError) as info:
        ds.simulate(ComplexOutput(), **SPAN)
    message = str(info.value)
    assert "ComplexOutput.rhs returned complex values" in message and "'x'" in message
    assert "x=1.0 + 0j" in message  # the supported alternative, tested below


def test_complex_state_integrates_in_complex_arithmetic():
    # What the error above suggests: x' = i w x from x(0) = 1 is exp(i w t).
    ts = np.linspace(0.0, 2.0, 5)
    with pytest.warns(UserWarning, match="Complex dtype support in Diffrax"):
        sol = ds.simulate(ComplexState(), t=ts, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sol.x), np.exp(1j * 1.5 * ts), rtol=0, atol=1e-8)
    assert sol.to_xarray().x.dtype == np.complex128


def test_field_without_value_says_how_to_set_it():
    with pytest.raises(ValueError) as info:
        ds.simulate(FieldWithoutValue(), **SPAN)
    message = str(info.value)
    assert "FieldWithoutValue: state variable 'u' has no initial value" in message
    assert "def initial_state(self)" in message and "'state.u'" in message
    # Following the advice works, and keeps the variable's declared units.
    x = FieldWithoutValue.grid.axis(0)
    model = FieldWithoutValue().replace(**{"state.u": jnp.sin(x)})
    state = model.initial_state()
    assert state.var_info("u").units == "K"
    # Second-order finite differences give sin(x)'' = -(2 - 2 cos dx) / dx^2 sin(x).
    dx = 2 * np.pi / 16
    expected = -0.1 * (2 - 2 * np.cos(dx)) / dx**2 * np.sin(x)
    np.testing.assert_allclose(model.rhs(0.0, state)["u"], expected, atol=1e-12)


def test_a_model_that_passed_the_check_is_not_traced_again_for_new_values():
    for k in (1.0, 2.0, 0.5):
        sol = ds.simulate(Variants(k=k), rtol=1e-10, atol=1e-10, **SPAN)
        np.testing.assert_allclose(sol.ys["x"][-1], np.exp(-k), rtol=1e-8)
        if k == 1.0:
            traced = len(TRACES)  # the check's trace and the compiled solve's
    assert len(TRACES) == traced  # new values: neither checked nor compiled again
    # Another static field is another model to the check, and a failure is never kept.
    for _ in range(2):
        with pytest.raises(ValueError, match=r"'y', which is not a state variable of Variants"):
            ds.simulate(Variants(variant=2), **SPAN)
