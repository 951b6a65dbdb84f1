"""Issue 14, point 11: what model code a config may run. A model file named in a config is
found relative to the config; a module is never imported from the working directory."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import difsim as ds
from difsim._app._cli import main
from difsim._config import ConfigError, load_config

DECAY = textwrap.dedent(
    """
    import difsim as ds

    class Decay(ds.Model):
        k: float = 0.5
        state = ds.State(x=1.0)

        def rhs(self, t, s):
            return dict(x=-self.k * s.x)

    NOT_A_MODEL = 3
    """
)


def _config(folder: Path, name: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "experiment.toml"
    path.write_text(f'[model]\nname = "{name}"\n[time]\nt1 = 1.0\nsave = "final"\n{extra}')
    return path


def _evil_module(folder: Path, name: str = "evil") -> Path:
    """A module whose top-level code leaves a marker file when it runs."""
    marker = folder / f"{name}_ran"
    (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return marker


def test_module_in_the_working_directory_is_never_imported(tmp_path, monkeypatch, capsys):
    # What `python -m difsim check` does: the working directory first on sys.path.
    marker = _evil_module(tmp_path)
    config = _config(tmp_path / "exp", "evil:Nope")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    assert main(["check", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[model] name: module 'evil' would be imported" in err
    assert f'name = "{tmp_path / "evil.py"}:Nope"' in err  # the way to name it explicitly
    assert not marker.exists() and "evil" not in sys.modules


def test_python_m_difsim_check_runs_nothing_from_the_working_directory(tmp_path):
    marker = _evil_module(tmp_path)
    config = _config(tmp_path / "exp", "evil:Nope")
    env = {**os.environ, "PYTHONPATH": str(Path(ds.__file__).parents[1])}
    run = subprocess.run(
        [sys.executable, "-m", "difsim", "check", str(config)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2, run.stderr
    assert "would be imported from the current directory" in run.stderr
    assert not marker.exists()


def test_an_installed_module_is_imported_and_one_shadowing_it_is_refused(tmp_path, monkeypatch):
    site, work = tmp_path / "site", tmp_path / "work"
    site.mkdir()
    work.mkdir()
    (site / "difsim_test_pkg_models.py").write_text(DECAY)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.chdir(work)
    config = _config(tmp_path / "exp", "difsim_test_pkg_models:Decay")
    assert load_config(config).model.cls.__name__ == "Decay"
    # A module of the same name in the working directory, first on sys.path, would win.
    sys.modules.pop("difsim_test_pkg_models")
    marker = _evil_module(work, "difsim_test_pkg_models")
    monkeypatch.setattr(sys, "path", [str(work), *sys.path])
    with pytest.raises(ConfigError, match="would be imported from the current directory"):
        load_config(config)
    assert not marker.exists()


def test_model_file_is_relative_to_the_config_and_runs(tmp_path, monkeypatch):
    folder = tmp_path / "project" / "experiments"
    (folder / "models").mkdir(parents=True)
    (folder / "models" / "decay.py").write_text(DECAY)
    config = _config(folder, "models/decay.py:Decay", "[model.parameters]\nk = 2.0\n")
    monkeypatch.chdir(tmp_path)  # anywhere else: the path is the config's
    experiment = load_config(config)
    assert experiment.model.name == f"{folder / 'models' / 'decay.py'}:Decay"
    cls = experiment.model.cls
    assert issubclass(cls, ds.Model) and cls.__module__.startswith("difsim_model_decay_")
    assert load_config(config).model.cls is cls  # run once per process
    tight = {"solver.dtype": "float64", "solver.rtol": 1e-10, "solver.atol": 1e-12}
    result = ds.run_config(config, overrides=tight)
    np.testing.assert_allclose(float(result.x.squeeze()), np.exp(-2.0), rtol=1e-8)


def test_a_file_named_like_a_module_does_not_replace_it(tmp_path):
    (tmp_path / "json.py").write_text(DECAY)
    config = _config(tmp_path, "json.py:Decay")
    assert load_config(config).model.cls.__name__ == "Decay"
    import json

    assert hasattr(json, "dumps")  # the standard library's, untouched


@pytest.mark.parametrize(
    "name, source, fragment",
    [
        ("missing.py:Decay", None, "model file '{folder}/missing.py' does not exist"),
        ("broken.py:Decay", "raise RuntimeError('boom')", "(RuntimeError: boom)"),
        ("exits.py:Decay", "raise SystemExit(3)", "(SystemExit: 3)"),
        ("decay.py:Nope", DECAY, "model file '{folder}/decay.py' has no attribute 'Nope'"),
        (
            "decay.py:NOT_A_MODEL",
            DECAY,
            "decay.py:NOT_A_MODEL' is not a difsim.Model subclass (got 3)",
        ),
    ],
)
def test_model_file_problems_name_the_key(tmp_path, name, source, fragment):
    if source is not None:
        (tmp_path / name.partition(":")[0]).write_text(source)
    with pytest.raises(ConfigError) as info:
        load_config(_config(tmp_path, name))
    assert info.value.key == "model.name"
    assert fragment.format(folder=tmp_path) in str(info.value)
