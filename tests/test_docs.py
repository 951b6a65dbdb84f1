"""Every ```python block of README.md and docs/*.md runs, and the numbers they state are right.

The blocks of one Markdown file run in order in one namespace, as a reader would paste them,
in a scratch folder that holds links to the repository's `data/` and `experiments/` (the
paths the snippets use) and empty `runs/` and `docs/img/` (what they write, so a test run
never overwrites the shipped figures). A deliberate fragment is marked by the line
`<!-- skip -->` right before its fence; the rendered page does not show the comment.

The numeric checks compare against independent references: closed forms, the zoo's own
models, finite differences, published estimates.
"""

import dataclasses
import os
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from .helpers import central_difference

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SKIP = "<!-- skip -->"
MAX_SKIPPED = 2  # deliberate fragments stay few: everything else must run
_FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w+-]*)\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block: `line` is the 1-based line of its opening fence."""

    path: str
    line: int
    lang: str
    code: str
    skip: bool


def markdown_blocks(text: str, path: str = "<md>") -> list[Block]:
    """The fenced code blocks of a Markdown text, dedented by their fence's indentation (a
    block inside a list item is indented with it)."""
    lines, blocks, i = text.splitlines(), [], 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match or not match["lang"]:
            i += 1
            continue
        indent, start = match["indent"], i
        body = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        previous = next((s.strip() for s in reversed(lines[:start]) if s.strip()), "")
        code = "\n".join(body) + "\n"
        blocks.append(Block(path, start + 1, match["lang"], code, previous == SKIP))
        i += 1
    return blocks


def python_blocks(path: Path) -> list[Block]:
    name = str(path.relative_to(ROOT))
    return [b for b in markdown_blocks(path.read_text(), name) if b.lang == "python"]


RUNNABLE = [p for p in DOCS if any(not b.skip for b in python_blocks(p))]
# This file runs the docs whose compiled fits overlap (README's lynx-hare fit is
# fitting.md's, so the second compiles nothing); test_docs_guides.py runs the others in a
# second process (pytest-xdist keeps a file in one worker).
HERE = ["README.md", "docs/fitting.md"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder laid out like the repository root, for the snippets' relative paths."""
    path = tmp_path_factory.mktemp("docs")
    for name in ("data", "experiments"):
        (path / name).symlink_to(ROOT / name, target_is_directory=True)
    (path / "runs").mkdir()
    (path / "docs" / "img").mkdir(parents=True)
    return path


_namespaces: dict[str, dict] = {}


@pytest.fixture(scope="module")
def run_doc(workdir):
    """`run_doc("docs/x.md")` -> the namespace after running its blocks (once per module)."""

    def run(name: str) -> dict:
        if name not in _namespaces:
            namespace: dict = {"__name__": "__doc_snippet__"}
            cwd = os.getcwd()
            os.chdir(workdir)
            try:
                for block in python_blocks(ROOT / name):
                    if not block.skip:
                        code = compile(block.code, f"{block.path}:{block.line}", "exec")
                        exec(code, namespace)
            finally:
                os.chdir(cwd)
            _namespaces[name] = namespace
        return _namespaces[name]

    return run


def test_markdown_blocks_finds_indented_and_skipped_blocks():
    text = (
        "Intro\n\n```python\nx = 1\n```\n\n- item\n\n  ```python\n  y = x + 1\n"
        "      z = 2\n  ```\n\n<!-- skip -->\n```python\nfragment(\n```\n\n```toml\na = 1\n```\n"
        "```\nplain\n```\n"
    )
    blocks = markdown_blocks(text)
    assert [(b.line, b.lang, b.code, b.skip) for b in blocks] == [
        (3, "python", "x = 1\n", False),
        (9, "python", "y = x + 1\n    z = 2\n", False),
        (15, "python", "fragment(\n", True),
        (19, "toml", "a = 1\n", False),
    ]


def test_fragments_are_few_and_every_doc_with_code_runs():
    blocks = [b for p in DOCS for b in python_blocks(p)]
    skipped = [f"{b.path}:{b.line}" for b in blocks if b.skip]
    assert len(skipped) <= MAX_SKIPPED, f"too many skipped blocks: {skipped}"
    assert len(blocks) - len(skipped) >= 20  # the extractor still finds the docs' code
    from .test_docs_events import HERE as EVENTS
    from .test_docs_guides import HERE as GUIDES
    from .test_docs_learning import HERE as LEARNING
    from .test_docs_stochastic import HERE as STOCHASTIC

    covered = sorted(HERE + GUIDES + STOCHASTIC + EVENTS + LEARNING)
    assert covered == sorted(str(p.relative_to(ROOT)) for p in RUNNABLE), covered


@pytest.mark.parametrize("name", HERE)
def test_every_python_block_runs(run_doc, name):
    assert "ds" in run_doc(name)  # every runnable doc imports difsim as ds


# --- README.md -----------------------------------------------------------------------------


def test_readme_quickstart(run_doc):
    readme = run_doc("README.md")
    ds = readme["ds"]
    assert int(readme["sol"].status) == ds.Status.SUCCESS
    assert readme["sol"].to_xarray().x.dims == ("time",)
    assert readme["finals"]["x"].shape == (1000,)
    # At rho = 0, y and z stay 0 and x = exp(-sigma t): exp(-10) at t = 1.
    np.testing.assert_allclose(float(readme["finals"]["x"][0]), np.exp(-10.0), atol=1e-6)


def test_readme_gradient_matches_finite_difference(run_doc):
    readme = run_doc("README.md")
    ds, Lorenz = readme["ds"], readme["Lorenz"]

    def final_x(rho):
        sol = ds.simulate(Lorenz(rho=rho), t0=0.0, t1=1.0, save="final", rtol=1e-10, atol=1e-10)
        return float(sol.final["x"])

    fd = central_difference(final_x, 28.0, h=1e-5)
    np.testing.assert_allclose(float(readme["dxdrho"]), fd, rtol=1e-4)


def test_readme_fit_agrees_with_published_estimates(run_doc):
    # B. Carpenter, "Predator-Prey Population Dynamics: the Lotka-Volterra model in Stan"
    # (2018): posterior means alpha 0.55, beta 0.028, gamma 0.80, delta 0.024 for the same
    # data and noise model. A maximum-likelihood fit must agree within its standard errors.
    fit = run_doc("README.md")["fit"]
    published = dict(alpha=0.55, beta=0.028, gamma=0.80, delta=0.024)
    for name, value in published.items():
        assert abs(fit.parameters[name] - value) < fit.stderr[name], name


def test_readme_gray_scott_matches_the_zoo_model(run_doc):
    # The zoo's GrayScott (its own tests: Pearson's patterns) without initial noise starts
    # from the same square on the same grid; both solved to the default tolerances.
    readme = run_doc("README.md")
    ds, patterns = readme["ds"], readme["patterns"]
    grid = ds.Grid.periodic(shape=(128, 128), extent=(1.25, 1.25))
    zoo = ds.models.GrayScott(grid=grid, noise=0.0, square=0.2)
    ref = ds.simulate(zoo, t=jnp.linspace(0.0, 200.0, 5), solver="tsit5", controller="pid")
    assert patterns.v.dims == ("time", "x", "y")
    assert float(patterns.v[-1].max()) > 0.1  # the square has not died out
    np.testing.assert_allclose(patterns.v.values, np.asarray(ref.ys["v"]), atol=1e-4)


# --- docs/fitting.md -----------------------------------------------------------------------


def test_fitting_optimizers_and_starts_agree_on_the_optimum(run_doc):
    fitting = run_doc("docs/fitting.md")
    fit, adam, many = fitting["fit"], fitting["adam"], fitting["many"]
    np.testing.assert_allclose(adam.loss, fit.loss, rtol=1e-9)
    np.testing.assert_allclose(many.loss, fit.loss, rtol=1e-9)
    assert many.start_losses[many.best_start] == min(many.start_losses)
    for name in fit.parameters:
        np.testing.assert_allclose(adam.parameters[name], fit.parameters[name], rtol=1e-5)


def test_fitting_influenza_matches_published_rates(run_doc):
    # Keeling & Rohani (2008), Box 2.1, fit the same outbreak: beta = 1.66/day, 1/gamma = 2.2 days.
    flu = run_doc("docs/fitting.md")["flu"]
    assert abs(flu.parameters["beta"] - 1.66) < 3 * flu.stderr["beta"]
    assert abs(flu.parameters["gamma"] - 1 / 2.2) < 3 * flu.stderr["gamma"]


def test_fitting_steady_state_gradient_and_estimates(run_doc):
    fitting = run_doc("docs/fitting.md")
    ss = fitting["ss"]
    for name, truth in dict(vmax=2.0, K=0.8, n=2.5).items():
        assert abs(ss.parameters[name] - truth) < 3 * ss.stderr[name], name
    # dp*/dK of p* = (vmax/d) u^n / (K^n + u^n) at u = 1, K = 0.8, n = 2.5, vmax = 2, d = 0.1.
    u, K, n, vmax, d = 1.0, 0.8, 2.5, 2.0, 0.1
    exact = -(vmax / d) * n * K ** (n - 1) * u**n / (K**n + u**n) ** 2
    grad = jax.grad(lambda m: fitting["ds"].steady_state(m).p)(fitting["truth"]).K
    np.testing.assert_allclose(float(grad), exact, rtol=1e-8)
