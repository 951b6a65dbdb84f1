"""Figures follow the conventions the model declares: log time for kinetics, wrapped angles,
phase portraits (equal aspect for orbits), invariant drift, units on every axis; sweep
panels name the time of the state; fit figures show estimates ± standard errors, residuals
and a prediction band. Checked on the matplotlib objects, not on pixels."""

import re
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
import pytest

import difsim as ds
from difsim._app._cli import main
from difsim._io import plain_text
from difsim.models import MODELS, DampedDrivenPendulum, Kepler, Lorenz, Robertson

UNITS = re.compile(r"\[[^\]]+\]$")


def _labelled_axes(fig):
    """Every (label text) on the figure's axes that is drawn, for the units check."""
    for ax in fig.axes:
        if not ax.axison:
            continue
        for text in (ax.get_xlabel(), ax.get_ylabel()):
            if text:
                yield text


def _units_everywhere(fig) -> list[str]:
    return [text for text in _labelled_axes(fig) if not UNITS.search(text)]


class Kinetics(ds.Model):
    """First-order kinetics over five decades of time, drawn on a log time axis."""

    k: float = ds.param(1.0, units="1/s", description="rate constant")
    state = ds.State(a=ds.Var(1.0, units="mol/L", description="reactant"))
    time_units: ClassVar[str] = "s"
    plot_time_scale: ClassVar[str] = "log"

    def rhs(self, t, s):
        return dict(a=-self.k * s.a)


def test_kinetics_on_a_log_time_axis():
    # The zoo's stiff kinetics declare it; Robertson's own figure is checked where its
    # (implicit, costly to compile) solve already is: tests/test_models.py.
    assert Robertson.plot_time_scale == "log"
    ts = jnp.concatenate([jnp.zeros(1), jnp.logspace(-3, 1, 9)])
    fig = ds.plot(ds.simulate(Kinetics(), t=ts, rtol=1e-10, atol=1e-12))  # a Solution
    (ax,) = fig.axes
    assert ax.get_xscale() == "log" and _units_everywhere(fig) == []
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("time [s]", "a [mol/L]")
    (line,) = ax.lines
    np.testing.assert_array_equal(line.get_xdata(), np.asarray(ts[1:]))  # t = 0 left out
    np.testing.assert_allclose(line.get_ydata(), np.exp(-np.asarray(ts[1:])), rtol=1e-5)


@pytest.fixture(scope="module")
def kepler_figure():
    sol = ds.simulate(Kepler(), t=jnp.linspace(0.0, 2 * np.pi, 60), rtol=1e-9, atol=1e-9)
    return sol, sol.plot()  # the model's phase, without naming it


def test_an_orbit_has_equal_aspect_and_an_invariant_drift_panel(kepler_figure):
    sol, fig = kepler_figure
    (phase,) = [ax for ax in fig.axes if ax.get_title() == "phase portrait"]
    assert phase.get_aspect() == 1.0
    assert (phase.get_xlabel(), phase.get_ylabel()) == ("q1 [1]", "q2 [1]")
    (drift,) = [ax for ax in fig.axes if ax.get_title().startswith("invariants")]
    assert drift.get_yscale() == "log" and _units_everywhere(fig) == []
    # The plotted drift is the running maximum of |H(t) - H(0)| / |H(0)| of the saved
    # states, from the closed form of H.
    q1, q2, p1, p2 = (np.asarray(sol.ys[k]) for k in ("q1", "q2", "p1", "p2"))
    energy = 0.5 * (p1**2 + p2**2) - 1 / np.hypot(q1, q2)
    expected = np.maximum.accumulate(np.abs(energy - energy[0]) / abs(energy[0]))
    line = next(li for li in drift.lines if li.get_label() == "total energy H")
    shown = expected > 0
    # (H is recomputed here in another order of operations: round-off of ~1e-16 apart.)
    np.testing.assert_allclose(line.get_ydata(), expected[shown], rtol=1e-6, atol=1e-15)


def test_angles_are_wrapped_into_one_turn():
    sol = ds.simulate(DampedDrivenPendulum(), t=jnp.linspace(0.0, 60.0, 600))
    theta = np.asarray(sol.ys["theta"])
    assert np.ptp(theta) > 2 * np.pi  # it does go over the top
    fig = ds.plot(sol.to_xarray())
    (line,) = fig.axes[0].lines
    shown = line.get_ydata()
    finite = np.isfinite(shown)
    assert np.all(np.abs(shown[finite]) <= np.pi)
    # Wrapped, not changed: each shown value is the angle modulo a full turn.
    np.testing.assert_allclose(np.cos(shown[finite]), np.cos(theta[finite]), atol=1e-12)
    assert np.isnan(shown).sum() >= 1  # the line breaks where it wraps
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["−π", "−π/2", "0", "π/2", "π"]
    assert fig.axes[-1].get_xlabel() == "theta [rad]"  # the model's phase portrait


@pytest.fixture(scope="module")
def lorenz_solution():
    return ds.simulate(Lorenz(), t=jnp.linspace(0.0, 1.0, 11))


def _phase_axes(fig):
    (ax,) = [ax for ax in fig.axes if ax.get_title() == "phase portrait"]
    return ax


def test_plotting_a_solution_draws_its_models_phase_portrait(lorenz_solution):
    # `ds.plot(solution)`, not only its Dataset (an AttributeError once): Lorenz declares
    # phase = ("x", "z"), drawn from the solution's own values, starting point marked.
    sol = lorenz_solution
    for fig in (ds.plot(sol), sol.plot()):
        ax = _phase_axes(fig)
        assert (ax.get_xlabel(), ax.get_ylabel()) == ("x [1]", "z [1]")
        orbit, start = ax.lines
        np.testing.assert_array_equal(orbit.get_xdata(), np.asarray(sol.ys["x"]))
        np.testing.assert_array_equal(orbit.get_ydata(), np.asarray(sol.ys["z"]))
        assert (start.get_xdata()[0], start.get_ydata()[0]) == (1.0, 0.0)  # Lorenz's state
        assert [a.get_ylabel() for a in fig.axes if a is not ax] == ["x [1]", "y [1]", "z [1]"]


def test_phase_given_or_declared_and_checked(lorenz_solution):
    data = lorenz_solution.to_xarray()
    declared = ds.plot(data)
    assert declared.axes[-1].get_xlabel() == "x [1]" and declared.axes[-1].get_ylabel() == "z [1]"
    chosen = ds.plot(data, phase=("y", "z"))
    assert chosen.axes[-1].get_xlabel() == "y [1]"
    with pytest.raises(ValueError, match="phase: no variable 'w'"):
        ds.plot(data, phase=("w", "z"))
    with pytest.raises(TypeError, match="xarray.Dataset or a difsim result"):
        ds.plot([1, 2, 3])


def test_sweep_panels_say_at_which_time():
    spec = ds.GridSweep({"rho": np.linspace(1.0, 21.0, 5)})
    out = ds.sweep(Lorenz(), spec, t0=0.0, t1=0.5, rtol=1e-6, atol=1e-6, progress=False)
    fig = ds.plot(out)
    assert [ax.get_ylabel() for ax in fig.axes] == [f"{v} at t = 0.5 [1]" for v in "xyz"]
    assert fig._suptitle.get_text().endswith("; state at t = 0.5")
    assert _units_everywhere(fig) == []


@pytest.mark.parametrize("columns", [80, 160])
def test_models_listing_is_plain_text_and_never_cut(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))  # what shutil.get_terminal_size reads first
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "$" not in out and "\\" not in out
    assert max(len(line) for line in out.splitlines()) <= columns
    flat = " ".join(out.split())
    for cls in MODELS.values():
        assert " ".join(plain_text(cls.__doc__).split()) in flat


def test_plain_text_of_latex():
    doc = r"""Decay $\dot y = -k\,y$ with $\tfrac{1}{2}\lVert p\rVert^2$
    and [`R0`][] ≈ $\beta/\gamma$.

    More text that is not the first paragraph."""
    assert plain_text(doc) == "Decay ẏ = -k y with 1/2‖ p‖² and R0 ≈ β/γ."
