"""Packaging guardrails: every package folder is in the wheel, and the `package-dir` mapping
(`models/` → `difsim.models`, `solvers/` → `difsim.solvers`) resolves as intended."""

import importlib
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setuptools_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _packages_on_disk() -> set[str]:
    """Dotted names of every folder holding an `__init__.py`, through the package-dir map."""
    found = set()
    for package, folder in _setuptools_config()["package-dir"].items():
        base = ROOT / folder
        for init in base.rglob("__init__.py"):
            relative = init.parent.relative_to(base).parts
            if "__pycache__" in relative:
                continue
            found.add(".".join((package, *relative)))
    return found


def test_package_dirs_exist():
    for package, folder in _setuptools_config()["package-dir"].items():
        assert (ROOT / folder / "__init__.py").is_file(), (package, folder)


def test_every_package_folder_is_listed_and_vice_versa():
    listed = set(_setuptools_config()["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), "package folders missing from [tool.setuptools] packages"
    assert listed - on_disk == set(), "listed packages with no folder (or no __init__.py)"


def test_models_and_solvers_resolve_to_the_top_level_folders():
    import difsim

    models = importlib.import_module("difsim.models")
    solvers = importlib.import_module("difsim.solvers")
    assert difsim.models is models and difsim.solvers is solvers
    package = Path(difsim.__file__).resolve().parent
    if package == ROOT / "src" / "difsim":  # editable install: the repository's folders
        assert Path(models.__file__).resolve() == ROOT / "models" / "__init__.py"
        assert Path(solvers.__file__).resolve() == ROOT / "solvers" / "__init__.py"
    else:  # an installed wheel: subpackages inside the installed difsim
        assert Path(models.__file__).resolve() == package / "models" / "__init__.py"
        assert Path(solvers.__file__).resolve() == package / "solvers" / "__init__.py"
    # Not a stray top-level `models`/`solvers` shadowing them (pytest runs in importlib mode).
    assert models.__name__ == "difsim.models" and solvers.__name__ == "difsim.solvers"
    with pytest.raises(AttributeError, match=r"no attribute 'nonexistent'"):
        difsim.nonexistent


@pytest.mark.slow
def test_wheel_contains_models_and_solvers(tmp_path):
    # Build from a copy of the sources: setuptools writes build/ and *.egg-info next to them.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    folders = {folder.split("/")[0] for folder in _setuptools_config()["package-dir"].values()}
    for folder in folders:
        shutil.copytree(
            ROOT / folder,
            source / folder,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
    # No build isolation: the venv's setuptools builds it, and no network is needed.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("difsim-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "difsim/__init__.py",
        "difsim/models/_lorenz.py",
        "difsim/solvers/_registry.py",
        "difsim/models/__init__.py",
    ):
        assert required in names, required
    for package in _packages_on_disk():
        assert package.replace(".", "/") + "/__init__.py" in names, package
    assert not any(name.startswith(("models/", "solvers/", "src/")) for name in names)


def test_import_linter_sees_models_and_solvers_inside_the_package():
    # import-linter reads difsim from src/difsim: the links there must reach the top-level
    # folders, or the layer contracts would silently stop checking the zoo and the solvers.
    for name in ("models", "solvers"):
        link = ROOT / "src" / "difsim" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link
