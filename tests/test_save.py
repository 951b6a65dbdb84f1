"""`SaveSpec`: every form of simulate's time arguments, checked once at construction."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._core import SaveSpec


class Decay(ds.Model):
    """y' = -k y, y(0) = 2: y = 2 exp(-k t)."""

    k: float = 0.7
    state = ds.State(y=2.0)

    def rhs(self, t, s):
        return dict(y=-self.k * s.y)


TIGHT = dict(rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ the forms
@pytest.mark.parametrize(
    "save, final_only, normalised, n_saved, text",
    [
        ("final", True, "final", 1, "'final'"),
        (1, True, "final", 1, "1"),
        (np.int64(5), False, 5, 5, "5"),
        (None, False, 101, 101, "101"),  # simulate's default
    ],
)
def test_save_by_name_or_count(save, final_only, normalised, n_saved, text):
    spec = SaveSpec(t0=0.5, t1=2.5, save=save)
    assert (spec.t0, spec.t1, spec.ts) == (0.5, 2.5, None)
    assert (spec.final_only, spec.save, spec.n_saved, spec.save_text) == (
        final_only,
        normalised,
        n_saved,
        text,
    )
    times = spec.save_times()
    if final_only:
        assert times is None
    else:
        np.testing.assert_allclose(times, np.linspace(0.5, 2.5, n_saved), rtol=0, atol=1e-15)


def test_save_times_are_kept_exactly_in_float64():
    # A sweep writes these as its time coordinate: float32 JAX must not round them.
    with jax.enable_x64(False):
        spec = SaveSpec(t0=0, t1=1, save=[0.1, 0.7, 1])
    assert spec.ts.dtype == np.float64
    np.testing.assert_array_equal(spec.ts, [0.1, 0.7, 1.0])
    assert (spec.final_only, spec.save, spec.n_saved, spec.save_text) == (
        False,
        None,
        3,
        "[3 times]",
    )


def test_t_gives_the_span_and_the_save_times():
    spec = SaveSpec([0.0, 1.0, 3.0])
    assert (float(spec.t0), float(spec.t1), spec.n_saved, spec.final_only) == (0.0, 3.0, 3, False)
    np.testing.assert_array_equal(spec.save_times(), [0.0, 1.0, 3.0])


def test_leaves_can_be_cast_keeping_the_static_fields():
    # How a sweep hands a checked spec to its compiled function in the state's dtype.
    spec = SaveSpec(t0=0.0, t1=1.0, save=4)
    cast = jax.tree.map(lambda x: np.asarray(x, np.float32), spec)
    assert (cast.n_saved, cast.save_text, cast.save) == (4, "4", 4)
    times = cast.save_times()
    assert times.dtype == np.float32
    np.testing.assert_allclose(times, np.linspace(0, 1, 4), rtol=1e-7)


# ------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (
            (np.linspace(0, 1, 3),),
            dict(save=5),
            r"give either t .*not t and save",
        ),
        (([0.0],), {}, r"t must be a 1-D array of at least 2 save times, got shape \(1,\)"),
        (([[0.0, 1.0]],), {}, r"t must be a 1-D array .*shape \(1, 2\)"),
        (([0.0, np.nan],), {}, r"t contains a non-finite time"),
        (([0.0, 2.0, 1.0],), {}, r"t must be strictly increasing"),
        ((), dict(t1=1.0), r"give the save times t, or both t0 and t1"),
        ((), dict(t0="a", t1=1.0), r"t0 and t1 must be numbers, got t0='a', t1=1\.0"),
        ((), dict(t0=0.0, t1=[1.0, 2.0]), r"t0 and t1 must be numbers"),
        ((), dict(t0=0.0, t1=np.inf), r"t0 and t1 must be finite, got t0=0\.0, t1=inf"),
        ((), dict(t0=1.0, t1=1.0), r"t1 must be greater than t0, got t0=1\.0, t1=1\.0"),
        ((), dict(t0=0.0, t1=1.0, save="every"), r"save must be 'final', .* got 'every'"),
        ((), dict(t0=0.0, t1=1.0, save=0), r"save must be at least 1 point, got 0"),
        ((), dict(t0=0.0, t1=1.0, save=[]), r"save times must be a 1-D array, got shape \(0,\)"),
        ((), dict(t0=0.0, t1=1.0, save=True), r"save times must be a 1-D array, got shape \(\)"),
        ((), dict(t0=0.0, t1=1.0, save=[0.2, np.nan]), r"save contains a non-finite time"),
        ((), dict(t0=0.0, t1=1.0, save=[0.5, 0.2]), r"save must be strictly increasing"),
        ((), dict(t0=0.0, t1=1.0, save=[0.5, 1.5]), r"save time 1\.5 lies outside \[t0, t1\]"),
    ],
)
def test_bad_times_name_the_culprit(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        SaveSpec(*args, **kwargs)


def test_traced_values_are_left_to_the_solver_but_shapes_are_checked():
    @jax.jit
    def times(t0, t1):
        return SaveSpec(t0=t0, t1=t1, save=4).save_times()

    np.testing.assert_allclose(times(1.0, 2.5), np.linspace(1.0, 2.5, 4), atol=1e-15)
    with pytest.raises(ValueError, match=r"at least 2 save times, got shape \(1,\)"):
        jax.jit(lambda t: SaveSpec(t).save_times())(jnp.zeros(1))


# ------------------------------------------------------------------------------ in simulate
def test_simulate_takes_a_spec_in_place_of_the_loose_arguments():
    spec = SaveSpec(t0=0.0, t1=2.0, save=5)
    sol = ds.simulate(Decay(), spec, **TIGHT)
    loose = ds.simulate(Decay(), t0=0.0, t1=2.0, save=5, **TIGHT)
    np.testing.assert_array_equal(sol.ts, loose.ts)
    np.testing.assert_array_equal(sol.y, loose.y)
    ts = np.linspace(0.0, 2.0, 5)
    np.testing.assert_allclose(sol.y, 2 * np.exp(-0.7 * ts), rtol=1e-10)
    final = ds.simulate(Decay(), SaveSpec(t0=0.0, t1=2.0, save="final"), **TIGHT)
    np.testing.assert_allclose(final.y, [2 * np.exp(-1.4)], rtol=1e-10)


def test_simulate_refuses_a_spec_with_loose_arguments():
    with pytest.raises(ValueError, match=r"t is a SaveSpec, .*: leave out save"):
        ds.simulate(Decay(), SaveSpec(t0=0.0, t1=1.0), save=5)


@pytest.mark.parametrize("dt0", [-0.1, 0.0, float("nan"), float("inf")])
def test_a_step_that_is_not_positive_is_named_before_the_solve(dt0):
    # A negative dt0 from Python reached diffrax, whose check raised ~30 lines from inside
    # the compiled solve ("Must have (t1 - t0) * dt0 >= 0, ... JitTracer ...").
    model = ds.models.Lorenz()
    with pytest.raises(ValueError, match=r"^dt0 must be a finite step > 0 .*got "):
        ds.simulate(model, t0=0.0, t1=1.0, dt0=dt0, save="final")
    with pytest.raises(ValueError, match=r"^dt0 must be a finite step > 0"):
        ds.simulate(ds.models.OrnsteinUhlenbeck(), t0=0.0, t1=1.0, dt0=dt0, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"^dt0 must be a finite step > 0"):
        ds.sweep(model, ds.GridSweep({"rho": [1.0, 2.0]}), t0=0.0, t1=1.0, dt0=dt0)
    with pytest.raises(ValueError, match=r"^dt0 must be one number"):
        ds.simulate(model, t0=0.0, t1=1.0, dt0=[0.1], save="final")
