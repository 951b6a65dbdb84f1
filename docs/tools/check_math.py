"""Check that every formula of a built docs site typesets with the bundled MathJax
(`make docs` runs it after `mkdocs build`).

    python docs/tools/check_math.py build/site

The formulas are those pymdownx.arithmatex put on the pages (`\\(…\\)`, `\\[…\\]`); Node
typesets each with the TeX input and SVG output of the pinned MathJax (`typeset.cjs`),
which are the components of the site's `tex-svg.js`. Fails (exit status 1, one line per
formula naming its page) on a TeX error, an undefined macro, or a macro from a TeX
package the bundle does not hold (the site would show it in red, or not at all).
"""

import html
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path.insert(0, str(TOOLS))
from vendor import CACHE, MATHJAX, fetch  # noqa: E402  (this folder is not a package)

FORMULA = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)


def formulas(site: Path) -> list[tuple[str, str, bool]]:
    """`(page, tex, display)` of every formula of the site, in page order."""
    found = []
    for page in sorted(site.rglob("*.html")):
        for match in FORMULA.finditer(page.read_text(encoding="utf-8")):
            tex = html.unescape(match[2]).strip()  # "\(x\)" or "\[x\]"
            found.append((str(page.relative_to(site)), tex[2:-2], tex.startswith("\\[")))
    return found


def mathjax_es5() -> Path:
    """The `es5/` folder of the pinned MathJax, unpacked once next to its checked tarball."""
    folder = CACHE / f"{MATHJAX.name}-{MATHJAX.version}"
    if not (folder / "es5" / "node-main.js").is_file():
        tarball = fetch(MATHJAX)
        shutil.rmtree(folder, ignore_errors=True)
        with tarfile.open(tarball) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/es5/")]
            for member in members:
                member.name = member.name.removeprefix("package/")
            tar.extractall(folder, members=members, filter="data")
    return folder / "es5"


def check(site: Path) -> list[str]:
    """Every formula of the site at `site` that does not typeset, as `<page>: <problem>`."""
    found = formulas(site)
    if not found:
        return []
    if shutil.which("node") is None:
        return ["node is not installed: the formulas cannot be checked"]
    run = subprocess.run(
        ["node", str(TOOLS / "typeset.cjs"), str(mathjax_es5())],
        input=json.dumps([[tex, display] for _, tex, display in found]),
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        return [f"MathJax did not start in node:\n{run.stderr.strip()}"]
    return [f"{found[i][0]}: {why}: {found[i][1]!r}" for i, why in json.loads(run.stdout)]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    problems = check(Path(argv[0]))
    for line in problems:
        print(line, file=sys.stderr)
    count = len(formulas(Path(argv[0])))
    print(f"math check: {count} formulas, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
