"""Issue 12, point 9: paths inside a config (output, plot, data, checkpoint, model file)
are relative to the config file, whatever the working directory; paths typed on the command
line (`--set`, `--output`) are relative to the working directory."""

import os
import tomllib
from pathlib import Path

import pytest

from difsim._config import load_config

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
FIT = """
[model]
name = "lotka_volterra"
[fit]
data = "data/lynx_hare.nc"
checkpoint = "state/fit.ckpt"
[fit.free]
alpha = "positive"
[fit.observe]
hare = "prey"
lynx = "predator"
[output]
path = "out/fit.nc"
plot = "figures/fit.png"
"""


@pytest.fixture
def project(tmp_path):
    """A config in `project/configs/`, its data in `project/configs/data/`."""
    folder = tmp_path / "project" / "configs"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "lynx_hare.nc").write_bytes((ROOT / "data" / "lynx_hare.nc").read_bytes())
    (folder / "fit.toml").write_text(FIT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return folder, elsewhere


def test_paths_in_the_file_are_relative_to_its_folder(project, monkeypatch):
    folder, elsewhere = project
    monkeypatch.chdir(elsewhere)
    for config in (folder / "fit.toml", os.path.relpath(folder / "fit.toml", elsewhere)):
        experiment = load_config(config)
        assert experiment.fit.data == str(folder / "data" / "lynx_hare.nc")
        assert experiment.fit.checkpoint == str(folder / "state" / "fit.ckpt")
        assert experiment.output.paths() == (folder / "out/fit.nc", folder / "figures/fit.png")
    # The checked config records absolute paths: reloaded anywhere, it means the same.
    again = load_config(tomllib.loads(experiment.to_toml()))
    assert again == experiment


def test_paths_typed_on_the_command_line_are_relative_to_the_working_directory(
    project, monkeypatch
):
    folder, elsewhere = project
    monkeypatch.chdir(elsewhere)
    (elsewhere / "mine.nc").write_bytes((folder / "data" / "lynx_hare.nc").read_bytes())
    overrides = {"fit.data": "mine.nc", "output.path": "~/x.nc", "fit.checkpoint": "/abs/c"}
    experiment = load_config(folder / "fit.toml", overrides=overrides)
    assert experiment.fit.data == str(elsewhere / "mine.nc")
    assert experiment.output.path == str(Path.home() / "x.nc")  # `~` expanded
    assert experiment.fit.checkpoint == "/abs/c"  # absolute paths are kept
    # The PNG path still comes from the file, and so stays relative to it.
    assert experiment.output.paths()[1] == folder / "figures" / "fit.png"


def test_a_dict_config_has_no_folder_its_paths_stay_relative_to_the_working_directory():
    experiment = load_config(
        {"model": {"name": "lorenz"}, "time": {"t1": 1.0}, "output": {"path": "runs/a.nc"}}
    )
    assert experiment.output.path == "runs/a.nc"


def test_a_missing_data_file_says_where_it_was_looked_for(project):
    folder, _ = project
    (folder / "data" / "lynx_hare.nc").unlink()
    with pytest.raises(ValueError) as info:
        load_config(folder / "fit.toml")
    message = str(info.value)
    assert f"data file '{folder / 'data' / 'lynx_hare.nc'}' does not exist" in message
    assert "relative to the config file's folder" in message


@pytest.mark.parametrize("config", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_configs_write_to_runs_and_read_data_at_the_repository_root(config, tmp_path):
    # From any working directory, as `make run` documents: runs/lorenz.nc at the root.
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        experiment = load_config(config)
    finally:
        os.chdir(cwd)
    nc = Path(experiment.output.path)
    assert nc.parent == ROOT / "runs" and nc.name == f"{config.stem}.nc"
    if experiment.fit is not None:
        assert Path(experiment.fit.data).parent == ROOT / "data"


def test_a_sweep_store_path_is_relative_to_the_config_and_a_url_is_kept(tmp_path, monkeypatch):
    folder = tmp_path / "configs"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    sweep = '[model]\nname = "lorenz"\n[time]\nt0 = 0.0\nt1 = 1.0\nsave = "final"\n'
    sweep += '[sweep]\nrho = { linspace = [0.0, 1.0, 4] }\n[output]\npath = "out/s.nc"\n'
    for store, expected in (("work/s.zarr", str(folder / "work" / "s.zarr")),
                            ("memory://bucket/s.zarr", "memory://bucket/s.zarr")):  # fmt: skip
        (folder / "s.toml").write_text(sweep + f'store = "{store}"\n')
        assert load_config(folder / "s.toml").output.store == expected
