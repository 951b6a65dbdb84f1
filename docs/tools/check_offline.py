"""Check that a built docs site works offline (`make docs` runs it after `mkdocs build`).

    python docs/tools/check_offline.py build/site

Fails (exit status 1, one line per problem naming the page) where a page loads anything
from another host: a script, a stylesheet or other `<link>` resource, an image, a frame,
a media source, or a `url()`/`@import` in its styles or in the site's CSS files; where it
loads a local file the site does not have; or where a page with math (`arithmatex`) or a
diagram (`mermaid`) does not load the bundled renderer (docs/tools/vendor.py). Links a
reader follows (`<a href>`) are not loads and may point anywhere.
"""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vendor import SCRIPTS  # noqa: E402  (this folder is not a package)

# The attributes through which a page loads something, by tag.
LOADS = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "source": ("src", "srcset"),
    "iframe": ("src",),
    "audio": ("src",),
    "video": ("src", "poster"),
    "track": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
}
# `<link rel=...>` kinds that point somewhere without loading it.
LINK_NOT_LOADED = {"canonical", "alternate", "author", "license", "help", "next", "prev", "me"}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)['"]?\s*\)|@import\s+['"]([^'"]+)['"]""")
# What marks a page that needs a renderer, by the renderer's package name.
NEEDS = {"mathjax": 'class="arithmatex"', "mermaid": 'class="mermaid"'}


class _Loads(HTMLParser):
    """The URLs a page loads, from its tags, `style` attributes and `<style>` blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        names = LOADS.get(tag, ())
        if tag == "link" and not set((attrs.get("rel") or "").lower().split()) <= LINK_NOT_LOADED:
            names = ("href", "imagesrcset")
        for name in names:
            value = attrs.get(name)
            if value and name.endswith("srcset"):
                self.urls += [part.split()[0] for part in value.split(",") if part.strip()]
            elif value:
                self.urls.append(value)
        self.urls += _css_urls(attrs.get("style") or "")
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.urls += _css_urls(data)


def _css_urls(css: str) -> list[str]:
    return [a or b for a, b in CSS_URL.findall(css)]


def _problem(url: str, source: Path, site: Path) -> str | None:
    """What is wrong with `source` loading `url` (None: a file of the site, or inline)."""
    parts = urlsplit(url.strip())
    if parts.scheme in ("data", "blob", "about"):
        return None
    if parts.scheme or parts.netloc:
        return f"loads {url} from another host"
    if not parts.path:
        return None  # a fragment or query on the page itself
    base = site if parts.path.startswith("/") else source.parent
    target = (base / unquote(parts.path).lstrip("/")).resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file() or site.resolve() not in target.parents:
        return f"loads {url}, which is not a file of the site"
    return None


def _page_problems(page: Path, site: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    parser = _Loads()
    parser.feed(text)
    problems = [p for url in parser.urls if (p := _problem(url, page, site))]
    loaded = {(page.parent / urlsplit(u).path).resolve() for u in parser.urls}
    for name, marker in NEEDS.items():
        if marker in text and (site / SCRIPTS[name]).resolve() not in loaded:
            problems.append(f"has {marker} but does not load the bundled {SCRIPTS[name]}")
    return problems


def check(site: Path) -> list[str]:
    """Every problem of the built site at `site`, as `<file>: <problem>` lines."""
    if not (site / "index.html").is_file():
        return [f"{site}: no index.html (build the site first: make docs)"]
    problems = []
    for page in sorted(site.rglob("*.html")):
        problems += [f"{page.relative_to(site)}: {p}" for p in _page_problems(page, site)]
    for sheet in sorted(site.rglob("*.css")):
        for url in _css_urls(sheet.read_text(encoding="utf-8")):
            if problem := _problem(url, sheet, site):
                problems.append(f"{sheet.relative_to(site)}: {problem}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    site = Path(argv[0])
    problems = check(site)
    for line in problems:
        print(line, file=sys.stderr)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(f"offline check: {pages} pages, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
