"""`difsim models NAME` (`difsim._app._model_info`): one zoo model in full."""

import re

from difsim._app._cli import main
from difsim.models import MODELS


def _row(out: str, name: str) -> list[str]:
    """The cells of the table row that starts with `name` (two or more spaces apart)."""
    line = next(ln for ln in out.splitlines() if ln.strip().split(" ")[0] == name)
    return re.split(r"\s{2,}", line.strip())


def test_sir_parameters_state_and_equations(capsys):
    assert main(["models", "sir"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sir (SIR)\n")
    # The literature defaults of the 1978 boarding-school fit: beta 1.66/day, 1/gamma 2.2 days.
    assert _row(out, "beta") == ["beta", "1.66", "1/day", "transmission rate"]
    assert _row(out, "gamma") == ["gamma", f"{1 / 2.2:.6g}", "1/day", "recovery rate"]
    assert _row(out, "S") == ["S", "762", "count", "susceptible people"]
    assert _row(out, "I") == ["I", "1", "count", "infectious people"]
    assert "Time units: day" in out
    assert "Ṡ = -β (S I)/N" in out  # the docstring's equation, LaTeX as Unicode
    # The source paragraph, not only the first (wrapped to the terminal's width: compare words).
    assert "W. O. Kermack and A. G. McKendrick" in " ".join(out.split())


def test_model_observables_and_grid(capsys):
    assert main(["models", "gray_scott"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "v_contrast")[:2] == ["v_contrast", "1"]
    assert _row(out, "grid")[:2] == ["grid", "Grid 256 x 256"]
    assert _row(out, "u")[:2] == ["u", "(derived)"]  # set from the grid when unset


def test_every_zoo_model_lists_every_parameter_and_variable(capsys):
    for name, cls in MODELS.items():
        assert main(["models", name]) == 0
        out = capsys.readouterr().out
        state = cls.__dataclass_fields__["state"].default
        for p in (*cls.parameter_names(), *state.names):
            assert _row(out, p)[0] == p, (name, p)


def test_unknown_model_names_the_known_ones(capsys):
    assert main(["models", "lorentz"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no model 'lorentz'" in captured.err and ", lorenz, " in captured.err
    assert all(name in captured.err for name in MODELS)
