"""Every command the README and docs/ show still parses, and every recipe file they name exists.

The commands are read from README.md and every markdown file under docs/: lines of fenced code
blocks (a trailing ``\\`` continues a line) and inline code spans. Each ``pate-stab …`` command is
parsed by :func:`pate_stab.cli.build_parser` (``parse_args`` only: nothing runs, nothing is
spent). A ``--config recipes/X.yaml`` it names must exist and load into
:class:`~pate_stab.run.config.TransferConfig` the way ``pate_stab.cli_config`` reads it (the
``compare:`` block aside). Every ``python recipes/X.py`` named must exist. Commands holding a
placeholder (``…``, ``<run>``) cannot parse; they are counted and listed, and the list is pinned
so that a new placeholder is a deliberate change. recipes/README.md must have a row for every
file in recipes/.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from pate_stab.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Text that marks a command as a template rather than a command (it cannot parse as written).
PLACEHOLDERS = ("…", "...", "<")
# Ends of a command on the shell line: what follows is another command, a pipe or a redirection.
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>&1"}

_FENCE = re.compile(r"^```.*?$(.*?)^```", re.M | re.S)
_INLINE = re.compile(r"`([^`]+)`")


def _doc_snippets(path: Path) -> list[str]:
    """Code lines (continuations joined) and inline code spans of one markdown file."""
    text = path.read_text()
    snippets: list[str] = []
    for block in _FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        snippets.extend(joined.splitlines())
    prose = _FENCE.sub("", text)
    snippets.extend(re.sub(r"\s+", " ", span) for span in _INLINE.findall(prose))
    return snippets


def _commands(program: str) -> list[tuple[str, str]]:
    """(file, command text from ``program`` on) for every mention of ``program`` in the docs."""
    found = []
    for path in DOCS:
        for snippet in _doc_snippets(path):
            for match in re.finditer(rf"(?:^|\s){re.escape(program)}\s", snippet):
                found.append((str(path.relative_to(ROOT)), snippet[match.start() :].strip()))
    return found


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    for i, word in enumerate(words):
        if word in SHELL_ENDS:
            return words[:i]
    return words


def _cli_commands() -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    parsed, skipped = [], []
    for where, command in _commands("pate-stab"):
        if any(mark in command for mark in PLACEHOLDERS):
            skipped.append((where, command))
            continue
        parsed.append((where, _argv(command)[1:]))
    return parsed, skipped


CLI, SKIPPED = _cli_commands()

# The commands with a placeholder, pinned (file, start of the command). Add to it only a template
# that a reader must fill in; a real command belongs in CLI and must parse.
EXPECTED_SKIPS: list[tuple[str, str]] = [
    ("README.md", "pate-stab compare --config recipes/<data>_stab.yaml --run-na"),
    ("README.md", "pate-stab transfer --config … --aggregator dpsgd-linear"),
    ("README.md", "pate-stab transfer … --finish-from-ledger"),
]


def test_docs_show_commands():
    assert len(CLI) >= 20, f"found only {len(CLI)} pate-stab commands: is the extraction broken?"


def test_placeholder_commands_are_the_known_ones():
    got = sorted((where, command[:60]) for where, command in SKIPPED)
    assert got == sorted(EXPECTED_SKIPS), "\n".join(f"{w}: {c}" for w, c in got)


@pytest.mark.parametrize(("where", "argv"), CLI, ids=[f"{w}:{' '.join(a)[:50]}" for w, a in CLI])
def test_doc_command_parses(where, argv):
    parser = build_parser()
    try:
        parser.parse_args(argv)
    except SystemExit as exc:  # argparse reports a bad command by exiting with status 2
        if exc.code not in (0, None):
            pytest.fail(f"{where}: `pate-stab {' '.join(argv)}` does not parse")


def _config_paths() -> list[str]:
    paths = set()
    for path in DOCS:
        paths.update(re.findall(r"--config\s+(recipes/[\w./-]+\.yaml)", path.read_text()))
    return sorted(paths)


def _load_config(path: Path):
    """Read a config as ``pate_stab.cli_config`` does, then build the TransferConfig (no run)."""
    from pate_stab.run.config import TransferConfig

    data = yaml.safe_load(path.read_text()) or {}
    assert isinstance(data, dict), f"{path} must hold a mapping of configuration keys"
    data.pop("compare", None)
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels", "classes", "image_shape"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    return TransferConfig.from_dict(data)


@pytest.mark.parametrize("name", _config_paths())
def test_doc_config_exists_and_loads(name):
    path = ROOT / name
    assert path.is_file(), f"{name} is named in the docs but does not exist"
    _load_config(path)


def test_every_recipe_config_loads():
    for path in sorted((ROOT / "recipes").rglob("*.yaml")):
        _load_config(path)


def test_doc_recipe_scripts_exist():
    names = set()
    for path in DOCS:
        names.update(re.findall(r"python3?\s+(recipes/[\w./-]+\.py)", path.read_text()))
    assert names, "no `python recipes/X.py` found in the docs: is the extraction broken?"
    missing = sorted(n for n in names if not (ROOT / n).is_file())
    assert not missing, f"scripts named in the docs but missing: {missing}"


def test_recipes_readme_lists_every_file():
    readme = (ROOT / "recipes" / "README.md").read_text()
    listed = set(re.findall(r"`([\w.-]+\.\w+)`", readme))
    files = {p.name for p in (ROOT / "recipes").iterdir() if p.is_file() and p.name != "README.md"}
    missing = sorted(files - listed)
    assert not missing, f"recipes/README.md has no row for: {missing}"
