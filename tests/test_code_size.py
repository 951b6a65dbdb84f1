"""The layout rules of issue 10 stay kept: no function body over 60 lines (docstring aside)
and no module over 400 lines in `src/`, `models/` and `solvers/` (STYLE.md: files that fit
in a head)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted(p for d in ("src", "models", "solvers") for p in (ROOT / d).rglob("*.py"))


def _body_length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        if isinstance(first.value.value, str):  # the docstring does not count
            if len(body) == 1:
                return 0
            first = body[1]
    return node.end_lineno - first.lineno + 1


def test_no_module_over_400_lines():
    assert len(FILES) > 50
    long = {
        str(p.relative_to(ROOT)): n for p in FILES if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, long


def test_no_function_body_over_60_lines():
    long = {}
    for path in FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (n := _body_length(node)) > 60:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert not long, long
