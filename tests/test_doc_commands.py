"""Every command the README and docs/ show still parses, and every recipe file they name exists.

The commands are read from README.md and every markdown file under docs/: lines of fenced code
blocks (a trailing ``\\`` continues a line) and inline code spans. Each ``pate-stab …`` command is
parsed by :func:`pate_stab.cli.commands.build_parser` (``parse_args`` only: nothing runs, nothing is
spent). A ``--config recipes/configs/X.yaml`` it names must exist and load into
:class:`~pate_stab.run.config.TransferConfig` the way ``pate_stab.cli.config`` reads it (the
``compare:`` block aside). Every ``python recipes/<folder>/X.py`` named must exist. Commands holding a
placeholder (``…``, ``<run>``) cannot parse; they are counted and listed, and the list is pinned
so that a new placeholder is a deliberate change. recipes/README.md must have a row for every
file under recipes/ (named by its path below recipes/, e.g. ``configs/mnist_quick.yaml``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from pate_stab.cli.commands import build_parser

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
    ("README.md", "pate-stab transfer … --finish-from-ledger"),
    ("docs/direct.md", "pate-stab compare --config recipes/configs/<data>_stab.yaml "),
    ("docs/direct.md", "pate-stab transfer --config … --aggregator dpsgd-linear"),
    ("docs/privacy.md", "pate-stab transfer … --finish-from-ledger"),
]


def test_docs_show_commands():
    assert len(CLI) >= 20, f"found only {len(CLI)} pate-stab commands: is the extraction broken?"


def test_docs_pages_are_read_and_their_commands_checked():
    """Every page under docs/ is read, and the topic pages' commands are among those parsed."""
    pages = {str(p.relative_to(ROOT)) for p in DOCS}
    assert {str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")} <= pages
    sources = {where for where, _ in CLI}
    for page in ("docs/plan.md", "docs/selection.md", "docs/release_votes.md", "docs/own_data.md"):
        assert page in sources, f"no pate-stab command parsed from {page}: is the extraction broken?"


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
    """Read a config as ``pate_stab.cli.config`` does, then build the TransferConfig (no run)."""
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
    paths = sorted((ROOT / "recipes" / "configs").glob("*.yaml"))
    assert paths, "no YAML in recipes/configs/"
    for path in paths:
        _load_config(path)


def test_doc_recipe_scripts_exist():
    names = set()
    for path in DOCS:
        names.update(re.findall(r"python3?\s+(recipes/[\w./-]+\.py)", path.read_text()))
    assert names, "no `python recipes/X.py` found in the docs: is the extraction broken?"
    missing = sorted(n for n in names if not (ROOT / n).is_file())
    assert not missing, f"scripts named in the docs but missing: {missing}"


def _recipe_files() -> set[str]:
    """Every file under recipes/ (caches aside) by its path below recipes/."""
    root = ROOT / "recipes"
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and p.name != "README.md" and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_recipes_readme_lists_every_file():
    readme = (ROOT / "recipes" / "README.md").read_text()
    rows = set(re.findall(r"^\| `([\w./-]+)` \|", readme, re.M))
    files = _recipe_files()
    missing = sorted(files - rows)
    assert not missing, f"recipes/README.md has no row for: {missing}"
    stale = sorted(rows - files)
    assert not stale, f"recipes/README.md has a row for a file that is not there: {stale}"


def test_recipes_are_sorted_into_their_folders():
    """recipes/ holds only its README and the four folders; YAML and JSON sit in configs/."""
    top = {p.name for p in (ROOT / "recipes").iterdir() if p.name != "__pycache__"}
    assert top == {"README.md", "configs", "repro", "bench", "diagnostics"}, sorted(top)
    misplaced = sorted(f for f in _recipe_files() if f.endswith((".yaml", ".json")) and not f.startswith("configs/"))
    assert not misplaced, f"configuration files outside recipes/configs/: {misplaced}"


def test_recipes_edit_no_import_path():
    """Code the recipes share lives in the package: no recipe edits sys.path or imports a sibling recipe."""
    root = ROOT / "recipes"
    stems = {p.stem for p in root.rglob("*.py")}
    bad = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        if "sys.path" in text:
            bad.append(f"{path.relative_to(ROOT)}: edits sys.path")
        for name in re.findall(r"^\s*(?:from|import)\s+(\w+)", text, re.M):
            if name in stems:
                bad.append(f"{path.relative_to(ROOT)}: imports the recipe {name}")
    assert not bad, "\n".join(bad)


# The README stays a front door: at most about 250 lines, the rest in docs/ pages it links.
README_MAX_LINES = 260


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move a topic to a docs/ page"


def test_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]*)?\)", readme))
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    missing = sorted(pages - linked)
    assert not missing, f"README.md links no page {missing}"
    broken = sorted(link for link in linked if not (ROOT / link).is_file())
    assert not broken, f"README.md links pages that do not exist: {broken}"


def _readme_layout() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"^## Layout\n(.*?)(?=^## )", text, re.M | re.S)
    assert match, "README.md has no '## Layout' section"
    return match.group(1)


def test_every_module_is_named_in_the_layout_or_the_algorithms_index():
    """Each module file of pate_stab is named by its path in README's layout or in docs/algorithms.md."""
    named = _readme_layout() + (ROOT / "docs" / "algorithms.md").read_text()
    modules = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "pate_stab").rglob("*.py"))
    missing = [m for m in modules if f"`{m}`" not in named]
    assert not missing, f"modules named neither in README's layout nor in docs/algorithms.md: {missing}"
