"""Tolerances are checked once, alike in the Python API, sweeps and configs (issue 14, point 5):
finite, positive, rtol < 1, a per-variable atol shaped like the state, and no controller
instance whose tolerances would silently override (or be overridden by) `rtol`/`atol`."""

import math

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._app._cli import main
from difsim._config._load import ConfigError, load_config
from difsim._core import solver_settings

from .helpers import with_key


class TwoScales(ds.Model):
    """x' = -x, y' = -10 y with x(0) = 1, y(0) = 1e-9: y = 1e-9 exp(-10 t), fast but far
    below any absolute tolerance that suits x."""

    state = ds.State(x=1.0, y=1e-9)

    def rhs(self, t, s):
        return dict(x=-s.x, y=-10.0 * s.y)


class Mixed(ds.Model):
    """A scalar and a vector variable: no stacked state, so no per-variable atol."""

    state = ds.State(a=1.0, b=ds.Var(jnp.ones(3)))

    def rhs(self, t, s):
        return dict(a=-s.a, b=-s.b)


SPAN = dict(t0=0.0, t1=1.0, save="final")
CONFIG = {
    "model": {"name": "lorenz"},
    "time": {"t0": 0.0, "t1": 1.0, "save": 11},
    "solver": {"name": "tsit5", "rtol": 1e-8, "atol": 1e-8, "dtype": "float64"},  # 1e-8: float64
    "output": {"path": "runs/lorenz.nc"},
}


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        (dict(rtol=-1.0), ["rtol", "finite number > 0", "-1.0"]),
        (dict(rtol=1e6), ["rtol", "must be < 1", "1000000.0"]),
        (dict(rtol=1.0), ["rtol", "must be < 1", "1.0"]),
        (dict(rtol=math.nan), ["rtol", "finite number > 0", "nan"]),
        (dict(rtol=jnp.inf), ["rtol", "finite number > 0", "inf"]),
        (dict(rtol="1e-6"), ["rtol", "positive number", "'1e-6'"]),
        (dict(rtol=True), ["rtol", "positive number", "True"]),
        (dict(rtol=[1e-6, 1e-6]), ["rtol", "one number", "(2,)"]),
        (dict(atol=0.0), ["atol", "finite number > 0", "0.0"]),
        (dict(atol=-1e-9), ["atol", "finite number > 0", "-1e-09"]),
        (dict(atol=math.nan), ["atol", "finite number > 0", "nan"]),
        (dict(atol=[1e-6, math.inf]), ["atol", "finite numbers > 0", "inf"]),
        (dict(atol=[1e-6, 1e-6, 1e-6]), ["atol has shape (3,)", "shape (2,)", "x, y"]),
        (dict(atol=np.full((2, 1), 1e-6)), ["atol has shape (2, 1)", "shape (2,)"]),
    ],
)
def test_bad_tolerances_raise_naming_argument_and_value(kw, words):
    with pytest.raises(ValueError) as info:
        ds.simulate(TwoScales(), **SPAN, **kw)
    for word in words:
        assert word in str(info.value)
    assert "\n" not in str(info.value)


def test_sweep_checks_tolerances_before_any_work():
    spec = ds.GridSweep({"sigma": jnp.array([9.0, 10.0])})
    with pytest.raises(ValueError, match=r"rtol must be < 1 .*got 1000000.0"):
        ds.sweep(ds.models.Lorenz(), spec, t0=0.0, t1=1.0, rtol=1e6)


def test_model_solver_defaults_are_checked_and_named():
    class Sloppy(TwoScales):
        solver_defaults = {"rtol": 5.0}

    with pytest.raises(ValueError, match=r"Sloppy.solver_defaults\['rtol'\] must be < 1"):
        ds.simulate(Sloppy(), **SPAN)


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("solver.rtol", 1e6, ["[solver] rtol", "must be < 1", "1000000.0"]),
        ("solver.rtol", 1.0, ["[solver] rtol", "must be < 1", "1.0"]),
        ("solver.atol", 0.0, ["[solver] atol", "positive number", "0.0"]),
    ],
)
def test_config_uses_the_same_check(key, value, words):
    for source, overrides in ((with_key(CONFIG, key, value), None), (CONFIG, {key: value})):
        with pytest.raises(ConfigError) as info:
            load_config(source, overrides=overrides)
        assert info.value.key == key
        for word in words:
            assert word in str(info.value)


def test_controller_instance_with_rtol_or_atol_is_an_error():
    pid = dfx.PIDController(rtol=1e-9, atol=1e-10)
    for key in ("rtol", "atol"):
        with pytest.raises(ValueError) as info:
            ds.simulate(TwoScales(), **SPAN, controller=pid, **{key: 1e-3})
        text = str(info.value)
        assert f"{key}=0.001 was given beside controller=PIDController" in text
        assert f"remove the {key} argument" in text
    # Alone, the instance's tolerances are the solve's (events and root finds use them too).
    settings = solver_settings(TwoScales(), controller=pid)
    assert (settings.rtol, settings.atol) == (1e-9, 1e-10)
    with pytest.raises(ValueError, match=r"the controller's rtol must be < 1 .*got 3.0"):
        solver_settings(TwoScales(), controller=dfx.PIDController(rtol=3.0, atol=1e-6))


def _diffrax_final(atol):
    """The same solve by diffrax directly (y stacked as difsim stacks it): the reference."""
    sol = dfx.diffeqsolve(
        dfx.ODETerm(lambda t, y, args: -y * jnp.array([1.0, 10.0])), dfx.Tsit5(), 0.0, 1.0, None,
        jnp.array([1.0, 1e-9]), stepsize_controller=dfx.PIDController(rtol=1e-6, atol=atol),
        saveat=dfx.SaveAt(t1=True), max_steps=16384,
    )  # fmt: skip
    return np.asarray(sol.ys[0])


def test_per_variable_atol_is_applied_per_variable():
    exact = np.array([np.exp(-1.0), 1e-9 * np.exp(-10.0)])
    atol = [1e-6, 1e-18]
    own = ds.simulate(TwoScales(), **SPAN, rtol=1e-6, atol=atol)
    got = np.array([own.final["x"], own.final["y"]])
    np.testing.assert_array_equal(got, _diffrax_final(jnp.array(atol)))
    # The tiny variable is resolved to ~rtol only with its own atol: with one atol of 1e-6
    # the solver does not see y at all.
    assert abs(got[1] / exact[1] - 1) < 1e-4
    one = ds.simulate(TwoScales(), **SPAN, rtol=1e-6, atol=1e-6)
    assert abs(float(one.final["y"]) / exact[1] - 1) > 1.0
    with pytest.raises(ValueError, match="share one shape.*give one number"):
        ds.simulate(Mixed(), **SPAN, atol=[1e-6, 1e-6])


def test_traced_tolerances_still_pass():
    # A tolerance under vmap cannot be inspected: it passes, and each lane uses its own.
    finals = jax.vmap(lambda r: ds.simulate(TwoScales(), **SPAN, rtol=r, atol=1e-12).final["x"])(
        jnp.array([1e-3, 1e-10])
    )
    errors = np.abs(np.asarray(finals) - np.exp(-1.0))
    assert errors[1] < 1e-9 < errors[0]


@pytest.mark.parametrize("bad", [0, -5, 2**31, 1.5, True, "100"])
def test_max_steps_from_python_is_checked_before_solving(bad):
    # An int32 step counter: 2**31 would overflow inside the compiled loop.
    with pytest.raises(ValueError, match=r"max_steps must be an integer from 1 to 2\*\*31 - 1"):
        ds.simulate(ds.models.ExponentialDecay(), t0=0.0, t1=1.0, max_steps=bad)


# --------------------------------------------------------------- atol against the state
class Nano(ds.Model):
    """Nanomolar concentrations: a state far below difsim's default atol of 1e-6."""

    state = ds.State(a=1e-9, b=2e-9)

    def rhs(self, t, s):
        return dict(a=-s.a, b=s.a)


class NanoOwnAtol(Nano):
    solver_defaults = {"atol": 1e-3}


class FromRest(ds.Model):
    """x' = 1 from x(0) = 0: a state that starts at zero everywhere has no size yet."""

    state = ds.State(x=0.0)

    def rhs(self, t, s):
        return dict(x=jnp.ones_like(s.x))


def test_atol_at_least_the_state_is_refused():
    # Issue 14: ExponentialDecay with atol 1e3 "succeeded" after 4 steps with y(10) = 138
    # instead of 4.5e-5. An atol at or above the state's size (1 here) is refused.
    decay = ds.models.ExponentialDecay()
    for atol in (1e300, 1e3, 1.0):
        with pytest.raises(ValueError) as info:
            ds.simulate(decay, t0=0.0, t1=10.0, rtol=1e-6, atol=atol)
        text = str(info.value)
        assert text.startswith(f"atol={atol!r} is at least the size of ExponentialDecay's state")
        assert "largest initial value is 1, of 'y'" in text and "e.g. 1e-06" in text
    # Just below the size the error test still constrains the solve: to within atol.
    sol = ds.simulate(decay, t0=0.0, t1=10.0, rtol=1e-6, atol=0.5, save="final")
    assert abs(float(sol.final["y"]) - np.exp(-10.0)) < 0.5


def test_atol_names_where_it_came_from():
    default = (
        r"^atol=1e-06 \(difsim's default\) is at least the size of Nano's state \(its largest "
        r"initial value is 2e-09, of 'b'\).*e\.g\. 2e-15 \(rtol times it\), or one atol per"
    )
    with pytest.raises(ValueError, match=default):
        ds.simulate(Nano(), **SPAN)
    with pytest.raises(ValueError, match=r"^NanoOwnAtol\.solver_defaults\['atol'\]=0\.001 is"):
        ds.simulate(NanoOwnAtol(), **SPAN)
    pid = dfx.PIDController(rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match=r"^the controller's atol=1e-06 is at least the size"):
        ds.simulate(Nano(), **SPAN, controller=pid)
    # An atol below the state's size is accepted: the solve then resolves the state.
    sol = ds.simulate(Nano(), **SPAN, rtol=1e-8, atol=1e-18)
    np.testing.assert_allclose(float(sol.final["a"]), 1e-9 * np.exp(-1.0), rtol=1e-6)


def test_per_variable_atol_is_compared_with_the_whole_state():
    # y starts at 1e-9 and may grow: its own atol is compared with the largest variable
    # (x, 1), not with its own start, so 1e-6 for y passes and 1e300 does not.
    ds.simulate(TwoScales(), **SPAN, atol=[1e-6, 1e-6])
    with pytest.raises(ValueError) as info:
        ds.simulate(TwoScales(), **SPAN, atol=[1e-6, 1e300])
    text = str(info.value)
    assert text.startswith("atol=[1e-06, 1e+300] (its entry for 'y') is at least the size")
    assert "per state variable" not in text


def test_a_state_at_zero_everywhere_has_no_size_to_check():
    # Documented limit: atol alone sets the scale until the state grows; x(1) = 1 exactly
    # for any tolerance (x' = 1 is integrated exactly).
    sol = ds.simulate(FromRest(), **SPAN, atol=10.0)
    assert float(sol.final["x"]) == pytest.approx(1.0, rel=1e-12)


def test_fixed_steps_have_no_error_test_to_void():
    # No error test with a fixed step: the default atol is not compared with the state.
    sol = ds.simulate(Nano(), **SPAN, solver="euler", dt0=0.01)
    np.testing.assert_allclose(float(sol.final["a"]), 1e-9 * 0.99**100, rtol=1e-12)


def test_sweeps_and_configs_check_atol_against_the_state_alike():
    spec = ds.GridSweep({"sigma": jnp.array([9.0, 10.0])})
    with pytest.raises(ValueError, match=r"^atol=5\.0 is at least the size of Lorenz's state"):
        ds.sweep(ds.models.Lorenz(), spec, t0=0.0, t1=1.0, atol=5.0)
    for overrides in ({"solver.atol": 1e300}, {"solver.atol": 1.0, "model.state.x": 0.5}):
        with pytest.raises(ConfigError) as info:
            load_config(CONFIG, overrides=overrides)
        assert info.value.key == "solver.atol"
        assert "is at least the size of Lorenz's state" in str(info.value)
    # The state the config sets is the one compared: x = 10 makes atol = 1 acceptable.
    load_config(CONFIG, overrides={"solver.atol": 1.0, "model.state.x": 10.0})


HEAT = """
[model]
name = "heat"
[model.grid]
shape = [16]
[time]
t1 = 0.1
save = 3
[solver]
name = "tsit5"
atol = 1e300
[output]
path = "out.nc"
plot = false
"""


def test_a_computed_initial_state_is_checked_before_the_run_starts(tmp_path, capsys):
    # Heat computes its field in initial_state(): checking the config does not build the
    # model (nor start JAX's backend), so the run checks atol before any work.
    config = tmp_path / "heat.toml"
    config.write_text(HEAT)
    assert main(["check", str(config)]) == 0
    capsys.readouterr()
    assert main(["run", str(config)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"difsim: error: {config}: [solver] atol: atol=1e+300 is at least")
    u0 = load_config(config).model.build().initial_state()["u"]  # sin-shaped, on 16 points
    size = f"{float(np.max(np.abs(u0))):.3g}"
    assert f"the size of Heat's state (its largest initial value is {size}, of 'u')" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["heat.toml"]  # nothing written
