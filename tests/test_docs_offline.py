"""The docs site works offline (issue 32): `docs/tools/check_offline.py` finds every load
from another host, every missing local file and every page without its bundled renderer
(on small sites made here), and `docs/tools/vendor.py` copies the renderers only from a
tarball whose sha512 is the pinned one. `make docs` runs the check on the real site."""

import base64
import hashlib
import html
import importlib.util
import io
import shutil
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / "docs" / "tools"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # check_offline imports vendor by this name
    spec.loader.exec_module(module)
    return module


vendor = _load("vendor")
check_offline = _load("check_offline")
MATH = vendor.SCRIPTS["mathjax"]


def _site(tmp_path: Path, pages: dict[str, str], files=(MATH, "style.css")) -> Path:
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("/* a local file */")
    for name, body in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"<!doctype html><html><head>{body}</head></html>")
    return tmp_path


def test_a_site_that_loads_only_its_own_files_passes(tmp_path):
    site = _site(tmp_path, {
        "index.html": f'<script src="{MATH}"></script><link rel="stylesheet" href="style.css">'
        '<link rel="canonical" href="https://example.org/"><a href="https://example.org/">x</a>'
        '<img src="data:image/png;base64,AAAA"><span class="arithmatex">\\(x\\)</span>',
        "guide/index.html": f'<script src="../{MATH}"></script><a href="#top">top</a>'
        '<span class="arithmatex">\\(y\\)</span><img src="../style.css#frag">',
    })  # fmt: skip
    assert check_offline.check(site) == []
    assert check_offline.main([str(site)]) == 0


@pytest.mark.parametrize(
    "tag, url",
    [
        ('<script src="https://unpkg.com/mathjax@3/es5/tex-mml-chtml.js"></script>', "unpkg"),
        ('<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">', "fonts"),
        ('<link rel="preconnect" href="https://fonts.gstatic.com">', "gstatic"),
        ('<img srcset="style.css 1x, //cdn.example.org/b.png 2x" src="style.css">', "cdn"),
        ("<div style=\"background: url('http://img.example.org/bg.png')\"></div>", "img."),
        ("<style>@import 'https://css.example.org/x.css';</style>", "css."),
    ],
)
def test_every_kind_of_remote_load_is_reported_with_its_url(tmp_path, tag, url):
    site = _site(tmp_path, {"index.html": tag})
    problems = check_offline.check(site)
    assert len(problems) == 1 and problems[0].startswith("index.html: loads ")
    assert url in problems[0] and "from another host" in problems[0]
    assert check_offline.main([str(site)]) == 1


def test_remote_fonts_in_a_stylesheet_and_missing_local_files_are_reported(tmp_path):
    site = _site(tmp_path, {"index.html": '<script src="js/gone.js"></script>'})
    (site / "style.css").write_text("@font-face { src: url(https://fonts.gstatic.com/r.woff2) }")
    assert check_offline.check(site) == [
        "index.html: loads js/gone.js, which is not a file of the site",
        "style.css: loads https://fonts.gstatic.com/r.woff2 from another host",
    ]


def test_a_page_with_math_must_load_the_bundled_renderer_that_the_site_has(tmp_path):
    page = '<span class="arithmatex">\\(x\\)</span>'
    assert check_offline.check(_site(tmp_path / "a", {"index.html": page})) == [
        f'index.html: has class="arithmatex" but does not load the bundled {MATH}'
    ]
    missing = _site(tmp_path / "b", {"index.html": f'<script src="{MATH}"></script>'}, files=())
    assert check_offline.check(missing) == [
        f"index.html: loads {MATH}, which is not a file of the site"
    ]


def test_mkdocs_loads_the_bundled_renderers_and_nothing_remote():
    config = (ROOT / "mkdocs.yml").read_text()
    config = yaml.load(config.replace("!!python/name:", ""), Loader=yaml.SafeLoader)
    scripts = config["extra_javascript"]
    assert set(vendor.SCRIPTS.values()) <= set(scripts)
    assert scripts.index("javascripts/mathjax.js") < scripts.index(MATH)  # settings first
    assert not [s for s in scripts + config.get("extra_css", []) if "//" in s]
    assert config["theme"]["font"] is False  # no Google Fonts
    assert config["hooks"] == ["docs/tools/vendor.py"]


def _tarball(path: Path, files: dict[str, bytes]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def test_the_hook_copies_from_a_checked_tarball_and_deletes_a_wrong_one(tmp_path, monkeypatch):
    monkeypatch.setattr(vendor, "CACHE", tmp_path / "cache")
    (tmp_path / "cache").mkdir()
    package = vendor.Package("renderer", "1.0.0", "", "es5/render.js")
    files = {"es5/render.js": b"window.render = 1;", "LICENSE": b"MIT"}
    pinned = _tarball(package.tarball, files)
    package = vendor.Package("renderer", "1.0.0", pinned, "es5/render.js")
    target = vendor.install(package, tmp_path / "site")
    assert target == tmp_path / "site" / "vendor" / "renderer" / "render.js"
    assert target.read_bytes() == files["es5/render.js"]
    assert (target.parent / "LICENSE").read_bytes() == b"MIT"

    _tarball(package.tarball, {**files, "es5/render.js": b"window.render = 'changed';"})
    with pytest.raises(RuntimeError, match=r"renderer-1\.0\.0\.tgz is not renderer@1\.0\.0"):
        vendor.fetch(package)
    assert not package.tarball.exists()  # fetched again by the next build


def test_the_pinned_packages_are_npm_integrity_strings():
    for package in vendor.PACKAGES:
        assert package.integrity.startswith("sha512-"), package.name
        assert len(base64.b64decode(package.integrity.removeprefix("sha512-"))) == 64


check_math = _load("check_math")


def test_the_math_check_finds_formulas_that_the_bundled_mathjax_cannot_typeset(tmp_path):
    if shutil.which("node") is None or not vendor.MATHJAX.tarball.is_file():
        pytest.skip("needs node and the MathJax tarball of `make docs` (build/vendor/)")
    formulas = [r"\(\dot x = -k\,x\)", r"\[\frac{a}{b} \le \tfrac12\]", r"\(\frac{a\)",
                r"\(\foo x\)", r"\(\boldsymbol{x}\)"]  # fmt: skip
    spans = "".join(f'<span class="arithmatex">{html.escape(f)}</span>' for f in formulas)
    site = _site(tmp_path, {"index.html": spans})
    assert [tex for _, tex, _ in check_math.formulas(site)][:2] == [
        r"\dot x = -k\,x",
        r"\frac{a}{b} \le \tfrac12",
    ]
    assert check_math.check(site) == [
        r"index.html: Missing close brace: '\\frac{a'",
        r"index.html: undefined control sequence: '\\foo x'",
        r"index.html: needs a TeX extension that tex-svg.js does not bundle: '\\boldsymbol{x}'",
    ]
