"""The other code of README.md and docs/*.md holds too, without running anything long: every
```toml block parses, every config among them passes the checks of `difsim check`, and every
`difsim ...` command line (in bash, console and text blocks, and in inline code) names a
subcommand, options and config files that exist. (The ```python blocks run in test_docs*.py.)

A ```toml block is the TOML a reader would paste: `--8<-- "experiments/x.toml"` lines (the
site's snippet includes) are replaced by the file. One that has a `[model]` table is checked
as a config sitting in `experiments/`, as the shipped ones do: its relative paths (`../data`,
`../runs`) resolve against that folder, a model file it names is either there or defined by
a ```python block of the same page (written out next to it), and a config showing only
`[model]` is completed with `[time] t1 = 1`. A deliberate fragment (a model file of the
reader's own) is marked `<!-- skip -->` before its fence: it must still parse.
"""

import argparse
import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from difsim._app._cli import _parser
from difsim._config import load_config, parse_override

from .test_docs import DOCS, ROOT, Block, markdown_blocks

MAX_SKIPPED_TOML = 2  # fragments naming a reader's own model file
SHELL = ("bash", "console", "text")
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"\s*$', flags=re.M)
_INLINE = re.compile(r"(?<!`)`(difsim [^`]+)`(?!`)")
_DIFSIM = re.compile(r"(?:^|[\s'\"/])difsim(?:\s|$)")  # the command, not "difsim:" or "difsim_x"
_SHIPPED = re.compile(r"^# (experiments/\w+\.toml)\b")  # a copy of a shipped config
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def expand_snippets(code: str) -> str:
    """`code` with each `--8<-- "path"` line replaced by that file (from the repository
    root, as mkdocs.yml's pymdownx.snippets does)."""
    return _SNIPPET.sub(lambda m: (ROOT / m[1]).read_text(), code)


def _name(block: Block) -> str:
    return f"{block.path}:{block.line}"


def _blocks(langs: tuple[str, ...]) -> list[Block]:
    out = []
    for path in DOCS:
        name = str(path.relative_to(ROOT))
        out += [b for b in markdown_blocks(path.read_text(), name) if b.lang in langs]
    return out


TOML = _blocks(("toml",))


# --- ```toml blocks ------------------------------------------------------------------------


@pytest.mark.parametrize("block", TOML, ids=_name)
def test_every_toml_block_parses(block):
    try:
        tomllib.loads(expand_snippets(block.code))
    except tomllib.TOMLDecodeError as e:
        pytest.fail(f"{_name(block)}: invalid TOML: {e}")


def _table(block: Block) -> dict:
    """The block's TOML ({} if it does not parse: the test above says why)."""
    try:
        return tomllib.loads(expand_snippets(block.code))
    except tomllib.TOMLDecodeError:
        return {}


CONFIGS = [b for b in TOML if "model" in _table(b)]


def test_configs_are_checked_and_fragments_few():
    skipped = [_name(b) for b in TOML if b.skip]
    assert len(skipped) <= MAX_SKIPPED_TOML, f"too many skipped toml blocks: {skipped}"
    # Every shipped config is in the gallery, and a few more are written out in the pages.
    assert len([b for b in CONFIGS if not b.skip]) >= 28


def _model_file(block: Block, name: str, folder: Path) -> None:
    """Put the model file a config names (`"file.py:Class"`) into `folder`: the repository's
    experiments/ file, else the page's ```python block that defines the class."""
    file, _, cls = name.rpartition(":")
    if (ROOT / "experiments" / file).is_file():
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).symlink_to(ROOT / "experiments" / file)
        return
    page = markdown_blocks((ROOT / block.path).read_text(), block.path)
    defining = [b for b in page if b.lang == "python" and f"\nclass {cls}(" in f"\n{b.code}"]
    assert defining, (
        f"{_name(block)} names the model file {file!r}, which is neither in experiments/ nor "
        "defined by a python block of the page (a reader's own file: mark the block "
        "<!-- skip -->)"
    )
    (folder / file).parent.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text(defining[0].code)


@pytest.mark.parametrize("block", [b for b in CONFIGS if not b.skip], ids=_name)
def test_every_config_block_passes_the_checks(block, tmp_path):
    text = expand_snippets(block.code)
    raw = tomllib.loads(text)
    if "time" not in raw and "fit" not in raw:  # a [model] example: any time span will do
        text += "\n[time]\nt1 = 1.0\n"
    folder = tmp_path / "experiments"  # laid out like the repository: ../data, ../runs
    folder.mkdir()
    (tmp_path / "data").symlink_to(ROOT / "data", target_is_directory=True)
    name = raw["model"].get("name", "")
    if ".py:" in name:
        _model_file(block, name, folder)
    config = folder / "docs_block.toml"
    config.write_text(text)
    load_config(config)  # ConfigError names the key


def _agrees(shown, shipped, key=""):
    """The keys of `shown` that differ from (or are missing in) `shipped`."""
    if not isinstance(shown, dict):
        return [] if shown == shipped else [key]
    if not isinstance(shipped, dict):
        return [key]
    return [d for k, v in shown.items() for d in _agrees(v, shipped.get(k), f"{key}.{k}")]


@pytest.mark.parametrize("block", [b for b in TOML if _SHIPPED.match(b.code)], ids=_name)
def test_a_shipped_config_shown_in_the_docs_agrees_with_the_file(block):
    # `# experiments/x.toml` (or "(excerpt)") atop a block: what it shows is in the file.
    path = ROOT / _SHIPPED.match(block.code)[1]
    assert path.is_file(), f"{_name(block)}: {path.relative_to(ROOT)} does not exist"
    differ = _agrees(_table(block), tomllib.loads(path.read_text()))
    assert not differ, f"{_name(block)} differs from {path.relative_to(ROOT)} at {differ}"


# --- `difsim ...` command lines ------------------------------------------------------------


def _logical_lines(block: Block) -> list[str]:
    """The command lines of a shell block: backslash continuations joined; in a console
    block only the `$ ` lines (the rest is output); in a text block, a line that starts
    with `[` continues the synopsis above it."""
    lines: list[str] = []
    for raw in block.code.replace("\\\n", " ").splitlines():
        if block.lang == "console":
            if raw.startswith("$ "):
                lines.append(raw[2:])
        elif block.lang == "text" and raw.strip().startswith("[") and lines:
            lines[-1] += " " + raw.strip()
        else:
            lines.append(raw)
    return lines


def difsim_commands(line: str) -> list[list[str]]:
    """The argument lists of every `difsim` command in one shell line: after `difsim`,
    `python -m difsim` or `path/to/difsim`, behind environment assignments, `srun`, or
    inside a quoted `bash -c '...'`; two commands side by side are two."""
    if not _DIFSIM.search(line):
        return []
    commands: list[list[str]] = []
    current: list[str] | None = None
    for token in shlex.split(line, comments=True):
        if token == "difsim" or token.endswith("/difsim"):
            current = []
            commands.append(current)
        elif " " in token and _DIFSIM.search(token):
            commands += difsim_commands(token)
            current = None
        elif current is not None:
            current.append(token)
    return commands


def _shell_commands() -> list[tuple[str, list[str]]]:
    out = []
    for block in _blocks(SHELL):
        for line in _logical_lines(block):
            out += [(_name(block), args) for args in difsim_commands(line)]
    return out


def _inline_commands() -> list[tuple[str, list[str]]]:
    out = []
    for path in DOCS:
        name = str(path.relative_to(ROOT))
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            for match in _INLINE.finditer(text):
                out += [(f"{name}:{number}", args) for args in difsim_commands(match[1])]
    return out


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


PARSER = _parser()
SHELL_COMMANDS = _shell_commands()
INLINE_COMMANDS = _inline_commands()


def _placeholder(token: str) -> bool:
    """A word of a synopsis: `CONFIG`, `[--set`, `...]`, `|`, `<config>` (not a `--set`
    value such as `time.save=[0.0, 1.0]`)."""
    return (
        token in ("|", "...")
        or token.startswith("[")
        or token.endswith(("...]", "]]"))
        or "<" in token
        or re.fullmatch(r"[A-Z][A-Z_]*\]?", token) is not None
    )


def _is_synopsis(args: list[str]) -> bool:
    return any(_placeholder(a) for a in args)


def _check_names(where: str, args: list[str]) -> None:
    """A synopsis or a mention (`difsim run --overwrite`): the subcommand and every option
    exist, and a config under experiments/ it names is there."""
    commands = _subcommands(PARSER)
    words = [a for a in args if not a.startswith(("-", "["))]
    sub = commands.get(words[0]) if words and not _placeholder(words[0]) else None
    if words and words[0].isidentifier():
        assert sub is not None, f"{where}: difsim has no subcommand {words[0]!r}"
    known = set(PARSER._option_string_actions) | set(sub._option_string_actions if sub else ())
    for option in (o for a in args for o in _OPTION.findall(a)):
        assert option in known, f"{where}: difsim {' '.join(args)}: no option {option!r}"
    configs = [a for a in args if a.startswith("experiments/") and a.endswith(".toml")]
    for path in (a for a in configs if not _placeholder(a)):  # not experiments/<x>.toml
        assert (ROOT / path).is_file(), f"{where}: {path} does not exist"


def _parse(where: str, args: list[str]) -> argparse.Namespace | None:
    """The parsed command line (None for --help/--version), failing with argparse's own
    message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return PARSER.parse_args(args)
    except SystemExit as e:
        if e.code:
            pytest.fail(f"{where}: difsim {shlex.join(args)}: {err.getvalue().strip()}")
        return None


@pytest.mark.parametrize(
    "where, args", SHELL_COMMANDS, ids=[f"{w} {' '.join(a)}" for w, a in SHELL_COMMANDS]
)
def test_every_command_line_names_what_exists(where, args):
    if _is_synopsis(args):
        _check_names(where, args)
        return
    parsed = _parse(where, args)
    if parsed is None or parsed.command not in ("run", "check"):
        return
    config = ROOT / parsed.config  # the docs' commands are typed at the repository root
    assert config.is_file(), f"{where}: {parsed.config} does not exist"
    overrides = dict(parse_override(text) for text in parsed.overrides)
    if getattr(parsed, "overwrite", False):
        overrides["output.overwrite"] = True
    load_config(config, overrides=overrides)  # the --set keys and values are valid


def test_inline_commands_name_what_exists():
    assert len(INLINE_COMMANDS) >= 50
    for where, args in INLINE_COMMANDS:
        _check_names(where, args)


def test_commands_are_found_in_shell_lines():
    assert len(SHELL_COMMANDS) >= 10
    line = "mpirun -n 4 bash -c 'A=$B difsim run x.toml --set a.b=1'  # difsim run y.toml"
    assert difsim_commands(line) == [["run", "x.toml", "--set", "a.b=1"]]
    assert difsim_commands("difsim run a.toml  difsim run b.toml") == [
        ["run", "a.toml"],
        ["run", "b.toml"],
    ]
    assert difsim_commands("python -m difsim models") == [["models"]]
    assert difsim_commands("difsim: error: lorenz.toml: [time] t1: invalid") == []
    block = Block("x.md", 1, "console", "$ difsim run a.toml \\\n  --no-plot\n  model  x\n", False)
    assert _logical_lines(block) == ["difsim run a.toml    --no-plot"]
    synopsis = Block("x.md", 1, "text", "difsim run CONFIG [--set K=V]\n   [-q/--quiet]\n", False)
    (args,) = difsim_commands(_logical_lines(synopsis)[0])
    assert _is_synopsis(args) and args[-1] == "[-q/--quiet]"
    with pytest.raises(AssertionError, match="no option '--colour'"):
        _check_names("x.md:1", ["run", "CONFIG", "[--colour]"])
    assert not _is_synopsis(["run", "x.toml", "--set", "time.save=[0.0, 1.0]"])
    assert _agrees({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3, "d": 4}}) == [".a.c"]
    with pytest.raises(AssertionError, match="no subcommand 'sweep'"):
        _check_names("x.md:1", ["sweep", "CONFIG"])
