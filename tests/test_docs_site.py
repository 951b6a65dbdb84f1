"""The docs site and project files agree with the code: every public name has an API entry,
every page is in the navigation, every shipped config is in the gallery, and the licence,
citation and changelog say what pyproject.toml says. (`make docs` builds the site itself,
strictly; these checks are the ones a build cannot make.)"""

import re
import tomllib
from pathlib import Path

import yaml

from .test_public_api import DIFSIM, FD, MODELS, SOLVERS, SPECTRAL

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


class _Loader(yaml.SafeLoader):
    """mkdocs.yml names Python objects (`!!python/name:...`); read them as plain strings."""


_Loader.add_multi_constructor(
    "tag:yaml.org,2002:python/", lambda loader, suffix, node: f"python/{suffix}"
)


def _nav_pages(nav) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def _api_entries() -> set[str]:
    text = "\n".join(p.read_text() for p in (DOCS / "api").glob("*.md"))
    return set(re.findall(r"^::: ([\w.]+)\s*$", text, flags=re.M))


def test_every_public_name_has_an_api_entry():
    entries = _api_entries()
    wanted = {f"difsim.{n}" for n in DIFSIM}
    wanted |= {f"difsim.models.{n}" for n in MODELS} | {f"difsim.solvers.{n}" for n in SOLVERS}
    wanted |= {f"difsim.fd.{n}" for n in FD} | {f"difsim.spectral.{n}" for n in SPECTRAL}
    missing = sorted(wanted - entries)
    assert not missing, f"public names without a '::: name' entry in docs/api/*.md: {missing}"
    stray = sorted(entries - wanted)
    assert not stray, f"docs/api/*.md documents names that are not public: {stray}"


def test_navigation_lists_every_page_and_only_pages_that_exist():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    pages = _nav_pages(config["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(pages) == on_disk
    assert len(pages) == len(set(pages)), "a page is listed twice"


def test_gallery_includes_every_shipped_config():
    gallery = (DOCS / "examples.md").read_text()
    included = set(re.findall(r'--8<-- "experiments/([\w]+)\.toml"', gallery))
    shipped = {p.stem for p in (ROOT / "experiments").glob("*.toml")}
    assert included == shipped
    sections = dict(re.findall(r"^### (\w+)\n(.*?)(?=^##|\Z)", gallery, flags=re.M | re.S))
    assert set(sections) == shipped
    for image in re.findall(r"\]\((img/[^)]+)\)", gallery):
        assert (DOCS / image).is_file(), image
    # Every shipped config writes a PNG when run, so every example shows its figure
    # (experiments/make_gallery.py makes a missing one from the config).
    writes_png = {
        n for n in shipped if tomllib.loads((ROOT / "experiments" / f"{n}.toml").read_text())
        .get("output", {}).get("plot", True) is not False
    }  # fmt: skip
    without = sorted(n for n in writes_png if not re.search(r"!\[[^\]]*\]\(img/", sections[n]))
    assert not without, f"gallery examples without a figure: {without}"


def test_licence_is_apache_2_everywhere():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    assert not any(c.startswith("License ::") for c in PYPROJECT["project"]["classifiers"])


def test_citation_is_cff_1_2_and_matches_pyproject():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by the CFF 1.2.0 schema
        assert cff[key], key
    assert all("name" in a or "family-names" in a for a in cff["authors"])
    assert cff["version"] == PYPROJECT["project"]["version"]
    assert cff["license"] == PYPROJECT["project"]["license"]
    assert cff["repository-code"] == PYPROJECT["project"]["urls"]["Repository"]


def test_changelog_follows_keep_a_changelog():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert releases and releases[0] == "Unreleased"
    kinds = set(re.findall(r"^### (.+)$", text, flags=re.M))
    assert kinds <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, kinds
    assert "docs/architecture.md" in text  # the layered redesign is recorded


def test_docs_extra_is_part_of_dev():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert {re.split(r"[<>=\[]", r)[0] for r in extras["docs"]} >= {"mkdocs", "mkdocs-material"}
    assert "difsim[docs]" in extras["dev"]


def test_make_test_builds_the_docs_and_ci_runs_the_readme_commands():
    # README: `make run` and `make test` set up and check a fresh clone. `make test` runs
    # the tests, then builds the site strictly; CI runs both commands, the docs once.
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test: .*\n((?:\t.*\n)+)", makefile, flags=re.M)[1].split("\n")
    assert recipe[0] == "\t$(PY) -m pytest" and "docs" in recipe[1]
    assert "--strict" in re.search(r"^docs: .*\n\t(.*)\n", makefile, flags=re.M)[1]
    readme = (ROOT / "README.md").read_text()
    assert "make run " in readme and "make test " in readme
    ci = [line.split() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    steps = [w[w.index("make") + 1] for w in ci if "make" in w and not w[0].startswith("#")]
    assert steps == ["run", "test", "wheel-check", "lint"]
