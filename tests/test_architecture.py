"""docs/architecture.md says what the tree is (issue 32): every module of the installed
package is listed under its folder and every file the page names exists, the import
diagram is pyproject's layers contract, and the table of function-level imports (with its
counts) is what an AST walk of the code finds."""

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text()
PACKAGE = ROOT / "src" / "difsim"
# The folders of the installed package (src/difsim/models and src/difsim/solvers are links
# to the top-level folders), by the name the page gives them.
FOLDERS = {"src/difsim/": PACKAGE, "solvers/": ROOT / "solvers", "models/": ROOT / "models"}
FOLDERS |= {
    f"src/difsim/{p.name}/": p for p in PACKAGE.glob("_*") if p.is_dir() and p.name != "__pycache__"
}
# Not listed module by module, with the reason the page gives:
# - every subpackage's `__init__.py`: "its face", said once on the page;
# - `models/`: one module per model of the zoo, each described in docs/zoo.md.
UNLISTED = {"models/"}


def _sections() -> dict[str, str]:
    """`### \\`folder/\\`: …` headings of "The modules" → the text under each."""
    modules = PAGE.split("## The modules, folder by folder", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### `([\w/]+/)`.*$", modules, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def _listed(text: str) -> list[str]:
    """The modules each bullet describes: the names before the colon of each of its
    `;`-separated clauses (`- _a.py, _b.py: …; _c.py: …`, names in backticks)."""
    bullets = [" ".join(b.split()) for b in re.findall(r"^- (.*?)(?=^- |\Z)", text, re.M | re.S)]
    clauses = [c.split(":", 1)[0] for b in bullets for c in b.split("; ") if ":" in c]
    return [n for c in clauses for n in re.findall(r"`(\w+\.py)`", c)]


def _on_disk(folder: Path, top_level: bool) -> set[str]:
    names = {p.name for p in folder.glob("*.py")}
    return names if top_level else names - {"__init__.py"}


def test_every_folder_of_the_package_has_a_section():
    assert set(_sections()) == set(FOLDERS)


def test_every_module_is_listed_once_under_its_folder_and_only_modules_that_exist():
    for name, text in _sections().items():
        listed = _listed(text)
        if name in UNLISTED:
            assert not listed and "zoo.md" in text, name
            continue
        assert len(listed) == len(set(listed)), f"{name}: listed twice: {listed}"
        on_disk = _on_disk(FOLDERS[name], top_level=name == "src/difsim/")
        missing, stale = sorted(on_disk - set(listed)), sorted(set(listed) - on_disk)
        assert not missing, f"docs/architecture.md, {name}: modules not listed: {missing}"
        assert not stale, f"docs/architecture.md, {name}: no such modules: {stale}"


def test_every_path_the_page_names_exists():
    paths = set(re.findall(r"`((?:src/difsim/|solvers/|models/|_\w+/)[\w/]*\.py)`", PAGE))
    assert len(paths) > 20
    missing = sorted(
        p for p in paths if not (ROOT / p).is_file() and not (PACKAGE / p).is_file()
    )  # fmt: skip
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_the_diagram_is_the_layers_contract():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    layers = [
        [m.strip().removeprefix("difsim.") for m in row.split("|")] for row in contract["layers"]
    ]
    label = lambda m: m if m.startswith("_") else f"difsim.{m}"  # noqa: E731
    pairs = zip(layers, layers[1:])
    wanted = {(label(a), label(b)) for above, below in pairs for a in above for b in below}
    diagram = PAGE.split("```mermaid", 1)[1].split("```", 1)[0]
    labels = dict(re.findall(r"(\w+)\[([\w.]+)\]", diagram))
    edges = {
        (labels[a], labels[b]) for a, b in re.findall(r"(\w+)(?:\[[\w.]+\])? --> (\w+)", diagram)
    }
    assert edges == wanted, (
        f"diagram - contract: {edges - wanted}; contract - diagram: {wanted - edges}"
    )


def _function_level_imports() -> dict[str, list[list[str]]]:
    """Module (relative to src/difsim, as the page writes it) → the names of each import
    statement inside a function (one inside nested functions counted once)."""
    out: dict[str, list[list[str]]] = {}
    for folder in (PACKAGE, ROOT / "models", ROOT / "solvers"):
        for path in sorted(folder.rglob("*.py")):
            name = str(path.relative_to(folder if folder == PACKAGE else ROOT))
            inside = {}
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    imports = (
                        n for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)
                    )
                    inside |= {id(n): n for n in imports}
            for node in sorted(inside.values(), key=lambda n: n.lineno):
                names = (
                    [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                )
                out.setdefault(name, []).append(names)
    return out


def test_the_function_level_imports_are_those_the_page_lists():
    found = _function_level_imports()
    short = lambda n: n if n.startswith("difsim.") else n.split(".")[0]  # noqa: E731
    imported = {m: {short(n) for names in imports for n in names} for m, imports in found.items()}
    section = PAGE.split("### Function-level imports", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (`_.*?) \| (.*?) \|", section, flags=re.M)
    listed = {}
    for modules, names in rows:
        for module in re.findall(r"`([\w/]+\.py)`", modules):
            listed[module] = set(re.findall(r"`([\w.]+)`", names))
    differ = {m: (listed.get(m), imported.get(m)) for m in {*listed, *imported}}
    differ = {m: pair for m, pair in sorted(differ.items()) if pair[0] != pair[1]}
    assert not differ, (
        f"docs/architecture.md, 'Function-level imports': module: (page, code) differ: {differ}"
    )
    count = sum(len(imports) for imports in found.values())
    stated = re.search(r"There are (\d+) function-level imports, in (\d+) modules", section)
    assert stated, "the page states how many function-level imports there are"
    assert (int(stated[1]), int(stated[2])) == (count, len(found))
