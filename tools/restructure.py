#!/usr/bin/env python3
"""Issue 36, items 5 and 7: the mechanical moves of the package layout, and every reference to them.

What it does, in the git work tree it is run in (the repository root: ``python tools/restructure.py``):

1. checks the tree first and changes nothing if a module it would have to place is not in the
   mapping below (a new ``pate_stab/privacy/*.py`` or ``pate_stab/cli_*.py``: add it to
   :data:`PRIVACY_MAP` / :data:`MOVES` and run again), or if a module exists at both its old and
   its new path;
2. moves each file with ``git mv`` (history follows): ``pate_stab/privacy/`` into the sub-packages
   ``noise/ mechanisms/ accounting/ pate/ ledger/``; ``cli.py``, ``cli_config.py``, ``cli_output.py``
   into the package ``pate_stab/cli/`` (``__init__`` keeps ``main`` and ``build_parser``, so the
   console script ``pate_stab.cli:main`` and ``python -m pate_stab.cli`` — a new ``__main__.py`` —
   keep working); ``_validation.py`` to ``_checks.py`` (and ``tests/test_validation.py`` to
   ``tests/test_checks.py``); ``run/votes_file.py`` to ``data/``; ``run/plan.py`` to ``aggregation/``;
3. writes the new packages' ``__init__.py`` (only where none exists). Where a sub-package takes the
   name of the module it replaces (``privacy.noise``, ``privacy.accounting``, ``privacy.ledger``,
   ``cli``), its ``__init__`` re-exports that module's ``__all__``: ``from pate_stab.privacy.ledger
   import PrivacyLedger`` keeps working. ``privacy/__init__.py`` lists the sub-packages;
4. rewrites every reference in the tracked text files (``*.py``, ``*.md``, ``*.toml``, ``*.yaml``,
   ``*.txt``, ``.ci/*``): dotted names anywhere (imports, monkeypatch and ``mock.patch`` targets,
   ``:mod:`` references, strings), ``from pkg import module`` statements, relative imports that reach
   a moved module, file paths (``pate_stab/privacy/noise.py``), and bare file names of moved modules
   in backticks; and keeps ``docs/algorithms.md``'s module index (one table per folder) complete.

It runs nothing else (no formatter, no tests). Afterwards run::

    ruff check --fix --select I . && ruff format .     # import order and line lengths of the edited files
    ruff check . && ruff format --check . && mypy && pytest

A second run finds nothing to move and nothing to rewrite (a no-op). ``--dry-run`` prints the plan.

Names. A dotted name whose old module became a package of the same name (``pate_stab.cli``,
``pate_stab.privacy.noise`` / ``.accounting`` / ``.ledger``) is ambiguous once the move is done. It is
rewritten to the module (``pate_stab.privacy.ledger.PrivacyLedger`` →
``pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger``) when an attribute follows that is not a module of
the new package (so a rerun leaves it alone), and, bare, only in the run that moves it; the console
script ``pate_stab.cli:main`` and ``-m pate_stab.cli`` stay as they are.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

# ---------------------------------------------------------------------------------------------
# The mapping.
# ---------------------------------------------------------------------------------------------

# privacy/<stem>.py → privacy/<sub-package>/<new stem>.py. Decided by what each module is:
#   noise/        samplers: what draws the noise, nothing about what it protects;
#   mechanisms/   one mechanism family per module (diffprivlib's layout) and the stability
#                 releasers' calibration (λ, w and the δ split of the mechanisms beside it);
#   accounting/   the one vocabulary of spends (events) and their composition (PLD);
#   pate/         PATE's analysis (PAE+17, PSM+18): per-query data-dependent RDP, smooth
#                 sensitivity / GNSS, a run's data-dependent ε, and its accountant if it moves here;
#   ledger/       the persistent ledger and the run folder's private files.
PRIVACY_MAP: dict[str, tuple[str, str]] = {
    "noise": ("noise", "seeded"),  # float64 Laplace / exponential / Gaussian / l2-Laplace from a torch.Generator
    "secure_noise": ("noise", "secure"),  # exact discrete Laplace, snapping, from the OS's CSPRNG
    "discrete_noise": ("noise", "discrete"),  # CKS20 discrete Laplace / Gaussian from random bits
    "lattice_noise": ("noise", "lattice"),  # exact vector noise: discrete Laplace on a 2^e lattice
    "sparse_vector": ("mechanisms", "sparse_vector"),  # BTT18 Alg 1, InteractiveAboveThreshold
    "stability": ("mechanisms", "stability"),  # distance to instability (BTT18 Alg 2), online release (Alg 3)
    "calibration": ("mechanisms", "calibration"),  # the stability releasers' λ, w and δ split
    "noise_reduction": ("mechanisms", "noise_reduction"),  # gradual release (Ligett et al. 2017 Alg 1)
    "exponential": ("mechanisms", "exponential"),  # exponential mechanism (issue 36 item 6)
    "randomized_response": ("mechanisms", "randomized_response"),  # RR-with-prior (issue 37)
    "alibi": ("mechanisms", "alibi"),  # ALIBI's label release: exact discrete Laplace on the one-hot label
    "events": ("accounting", "events"),  # what a mechanism did, with its pessimistic PLD
    "accounting": ("accounting", "composition"),  # composition of events: ε(δ), δ(ε), closed forms
    "pate_rdp": ("pate", "rdp"),  # data-dependent RDP of one LNMax / GNMax / threshold query
    "smooth_sensitivity": ("pate", "smooth_sensitivity"),  # smooth sensitivity of that RDP, GNSS
    "pate_analysis": ("pate", "data_dependent"),  # a run's data-dependent RDP and its sanitised release
    "pate_accounting": ("pate", "accounting"),  # PATE's aggregators' accountant, if moved under privacy/
    "ledger": ("ledger", "privacy_ledger"),  # the persistent, append-only privacy ledger
    "ledger_file": ("ledger", "file"),  # opening, locking and verifying a ledger file
    "ledger_format": ("ledger", "format"),  # what a ledger line holds
    "private_files": ("ledger", "private_files"),  # run folder secret key, keyed digests, 0600 files
}

# The sub-packages of privacy/, in import order (a module imports only from its own sub-package and
# from the ones before it; ``mechanisms`` and ``pate`` sit beside each other), with the line that
# opens each ``__init__``'s docstring.
SUBPACKAGES: dict[str, str] = {
    "noise": "Noise samplers: float64 from a torch.Generator, exact discrete noise from the OS's CSPRNG.",
    "accounting": "The accounting vocabulary: events (what a mechanism did) and their composition.",
    "mechanisms": "Privacy mechanisms, one family per module, and the stability releasers' calibration.",
    "pate": "PATE's privacy analysis (PAE+17, PSM+18): data-dependent RDP, smooth sensitivity, GNSS.",
    "ledger": "The persistent privacy ledger of a run and the run folder's private files.",
}

# Other moves, old path → new path (relative to the repository root).
MOVES: dict[str, str] = {
    "pate_stab/cli.py": "pate_stab/cli/commands.py",
    "pate_stab/cli_config.py": "pate_stab/cli/config.py",
    "pate_stab/cli_output.py": "pate_stab/cli/output.py",
    "pate_stab/_validation.py": "pate_stab/_checks.py",
    "tests/test_validation.py": "tests/test_checks.py",
    "pate_stab/run/votes_file.py": "pate_stab/data/votes_file.py",
    "pate_stab/run/plan.py": "pate_stab/aggregation/plan.py",
}
MOVES.update(
    {f"pate_stab/privacy/{old}.py": f"pate_stab/privacy/{sub}/{new}.py" for old, (sub, new) in PRIVACY_MAP.items()}
)

# New modules written by this script (only where absent). The package ``__init__``s of the privacy
# sub-packages and of cli/ are generated from the mapping; ``__main__`` is fixed text.
CLI_DOC = "The ``pate-stab`` command: its parser and subcommands, configuration flags and printed report."
CLI_MAIN = '''"""``python -m pate_stab.cli``: the ``pate-stab`` command."""

import sys

from pate_stab.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
'''

# Top-level flat files whose family is moved as a whole: an unmapped one stops the run.
FAMILIES = {"pate_stab/privacy": "*.py", "pate_stab": "cli*.py"}

SELF = "tools/restructure.py"  # this script: never rewritten (its tables name the old paths)
LINE_LENGTH = 120  # pyproject's [tool.ruff] line-length: ruff format does not wrap docstrings or comments
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".cfg", ".ini", ".rst"}
TEXT_DIRS_ANY_SUFFIX = (".ci/",)

IDENT = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"(?<![\w.]){IDENT}(?:\.{IDENT})+")
PATH = re.compile(r"(?<![\w./-])(?:pate_stab|tests)/(?:[\w.-]+/)*[\w-]+\.py\b")
FROM_IMPORT = re.compile(
    rf"^(?P<indent>[ \t]*)from[ \t]+(?P<dots>\.*)(?P<module>{IDENT}(?:\.{IDENT})*)?[ \t]+import[ \t]+"
    r"(?P<names>\([^)]*\)|[^\n]*)",
    re.M,
)


def module_of(path: str) -> str:
    """Dotted module name of a repository path (``a/b/__init__.py`` → ``a.b``)."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Plan:
    root: Path
    todo: dict[str, str]  # old path → new path, moved in this run
    done: dict[str, str]  # already moved (a rerun)
    module_map: dict[str, str]  # old dotted module → new dotted module (every known move)
    ambiguous: set[str]  # old modules whose new package has the old module's name
    moving_now: set[str]  # old dotted modules moved in this run
    new_modules: set[str]  # every module of the tree after the moves
    bare_names: dict[str, str]  # unique old basename → new path (moves of this run)


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def tracked_files(root: Path) -> list[str]:
    return [line for line in git(root, "ls-files").splitlines() if line]


def make_plan(root: Path) -> Plan:
    files = set(tracked_files(root))
    existing = {p for p in files if (root / p).is_file()}

    unknown = []
    for folder, pattern in FAMILIES.items():
        for path in sorted((root / folder).glob(pattern)):
            rel = path.relative_to(root).as_posix()
            if path.name != "__init__.py" and rel not in MOVES:
                unknown.append(rel)
    if unknown:
        sys.exit(
            "restructure: these modules are not in the mapping; place each in PRIVACY_MAP (privacy/) or MOVES "
            "of tools/restructure.py, then run again (nothing was changed):\n  " + "\n  ".join(unknown)
        )

    todo, done, conflicts = {}, {}, []
    for old, new in MOVES.items():
        old_here, new_here = (root / old).exists(), (root / new).exists()
        if old_here and new_here:
            conflicts.append(f"{old} and {new}")
        elif old_here:
            if old not in files:
                conflicts.append(f"{old} is not tracked by git (commit or remove it first)")
            todo[old] = new
        elif new_here:
            done[old] = new
    if conflicts:
        sys.exit("restructure: cannot move (nothing was changed):\n  " + "\n  ".join(conflicts))

    after = (existing - set(todo)) | set(todo.values())
    new_modules = {module_of(p) for p in after if p.endswith(".py") and p.startswith("pate_stab/")}
    for p in list(new_modules):  # every parent package (new ones get an __init__)
        parts = p.split(".")
        new_modules.update(".".join(parts[:i]) for i in range(1, len(parts)))

    module_map = {module_of(o): module_of(n) for o, n in MOVES.items() if o.startswith("pate_stab/")}
    # An old module is ambiguous when its name is now a package (privacy.noise, cli, ...).
    ambiguous = {o for o in module_map if any(m.startswith(o + ".") for m in new_modules)}
    moving_now = {module_of(o) for o in todo if o.startswith("pate_stab/")}

    basenames: dict[str, int] = {}
    for p in files:
        basenames[Path(p).name] = basenames.get(Path(p).name, 0) + 1
    bare_names = {Path(o).name: n for o, n in todo.items() if basenames.get(Path(o).name) == 1}
    return Plan(root, todo, done, module_map, ambiguous, moving_now, new_modules, bare_names)


# ---------------------------------------------------------------------------------------------
# Rewriting.
# ---------------------------------------------------------------------------------------------


def rewrite_dotted(name: str, plan: Plan, before: str, after: str) -> str:
    """The new spelling of one dotted name (unchanged when it names nothing moved)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        head = ".".join(parts[:cut])
        if head in plan.module_map:
            break
    else:
        return name
    new = plan.module_map[head]
    rest = parts[cut:]
    if head in plan.ambiguous:
        if rest:
            if f"{head}.{rest[0]}" in plan.new_modules:  # already a module of the new package
                return name
        else:
            if head not in plan.moving_now:
                return name  # bare: names the package now
            if re.search(r"-m(?:\s+|[\"']\s*,\s*[\"'])$", before) or re.match(rf":{IDENT}", after):
                return name  # `-m pate_stab.cli`, the console script `pate_stab.cli:main`
    return ".".join([new, *rest])


def sub_dotted(text: str, plan: Plan) -> tuple[str, int]:
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        old = m.group(0)
        if not old.startswith("pate_stab."):
            return old
        new = rewrite_dotted(old, plan, text[max(0, m.start() - 12) : m.start()], text[m.end() : m.end() + 40])
        count += new != old
        return new

    return DOTTED.sub(repl, text), count


def sub_paths(text: str, plan: Plan) -> tuple[str, int]:
    count = 0
    moves = {**plan.done, **plan.todo}

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        new = moves.get(m.group(0), m.group(0))
        count += new != m.group(0)
        return new

    return PATH.sub(repl, text), count


def sub_bare_names(text: str, plan: Plan) -> tuple[str, int]:
    """```plan.py``` → ```pate_stab/aggregation/plan.py``` for unique basenames moved in this run."""
    if not plan.bare_names:
        return text, 0
    names = "|".join(re.escape(n) for n in sorted(plan.bare_names, key=len, reverse=True))
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return m.group(1) + plan.bare_names[m.group(2)]

    return re.sub(rf"(`+)({names})(?=`)", repl, text), count


def absolute_base(module: str, is_package: bool, dots: str, target: str | None) -> str:
    package = module if is_package else module.rpartition(".")[0]
    parts = package.split(".")
    if len(dots) > 1:
        parts = parts[: -(len(dots) - 1)]
    return ".".join(parts + ([target] if target else []))


def parse_names(names: str) -> list[tuple[str, str | None]] | None:
    """``a, b as c`` → [(a, None), (b, c)]; None when a comment or a star makes it unsafe to rebuild."""
    body = names.strip()
    if body.startswith("("):
        body = body[1:-1]
    if "#" in body or "*" in body or "\\" in body:
        return None
    out: list[tuple[str, str | None]] = []
    for item in body.replace("\n", " ").split(","):
        item = item.strip()
        if not item:
            continue
        bits = item.split()
        if len(bits) == 1:
            out.append((bits[0], None))
        elif len(bits) == 3 and bits[1] == "as":
            out.append((bits[0], bits[2]))
        else:
            return None
    return out


def moves_name(module: str, plan: Plan) -> bool:
    """Whether the old module ``module``, imported by name from its package, is rewritten."""
    return rewrite_dotted(module, plan, "", "") != module


def sub_from_imports(text: str, path: str, plan: Plan, warnings: list[str]) -> tuple[str, int]:
    """``from pkg import module, …`` where ``pkg.module`` moved: split by the modules' new parents.

    ``from pate_stab.privacy import pate_rdp`` → ``from pate_stab.privacy.pate import rdp as pate_rdp``
    (the name bound in the importing module does not change).
    """
    count = 0

    def repl(m: re.Match[str]) -> str:
        nonlocal count
        base = m.group("module") or ""
        if m.group("dots") or not base.startswith("pate_stab"):
            return m.group(0)
        names_text, comment = m.group("names"), ""
        if not names_text.startswith("(") and "#" in names_text:
            names_text, _, comment = names_text.partition("#")
            names_text, comment = names_text.rstrip(), "  # " + comment.strip()
        names = parse_names(names_text)
        if names is None:
            if any(f"{base}.{w}" in plan.module_map for w in re.findall(IDENT, names_text)):
                warnings.append(f"{path}: check `{m.group(0).strip()[:90]}` by hand (comment or star in it)")
            return m.group(0)
        if base in plan.ambiguous and names and not any(f"{base}.{n}" in plan.new_modules for n, _ in names):
            # ``from pate_stab.privacy.ledger import PrivacyLedger`` written against the old module (a
            # branch merged after the move): the names come from the module, not from the package.
            count += 1
            return m.group(0).replace(f"from {base} import", f"from {plan.module_map[base]} import", 1)
        if not any(f"{base}.{n}" in plan.module_map and moves_name(f"{base}.{n}", plan) for n, _ in names):
            return m.group(0)
        indent = m.group("indent")
        kept: list[str] = []
        moved: dict[str, list[str]] = {}
        for name, alias in names:
            full = f"{base}.{name}"
            if full in plan.module_map and moves_name(full, plan):
                parent, _, leaf = plan.module_map[full].rpartition(".")
                bound = alias or name
                moved.setdefault(parent, []).append(leaf if leaf == bound else f"{leaf} as {bound}")
            else:
                kept.append(name if alias is None else f"{name} as {alias}")
        lines = []
        if kept:
            lines.append(f"{indent}from {base} import {', '.join(kept)}")
        for parent in sorted(moved):
            lines.append(f"{indent}from {parent} import {', '.join(sorted(moved[parent], key=str.lower))}")
        count += 1
        return "\n".join(lines) + comment

    return FROM_IMPORT.sub(repl, text), count


def absolutize(text: str, path: str, plan: Plan) -> str:
    """Relative ``from`` imports made absolute (resolved at the module's old place) where the module
    moves or the import reaches a moved module; the others are left as they are."""
    module, is_package = module_of(path), path.endswith("__init__.py")

    def repl(m: re.Match[str]) -> str:
        if not m.group("dots"):
            return m.group(0)
        base = absolute_base(module, is_package, m.group("dots"), m.group("module"))
        names = [n for n, _ in parse_names(m.group("names")) or []]
        targets = {base, *(f"{base}.{n}" for n in names)}
        reaches = any(t == o or t.startswith(o + ".") for o in plan.module_map for t in targets)
        if path not in plan.todo and not reaches:
            return m.group(0)
        return f"{m.group('indent')}from {base} import {m.group('names')}"

    return FROM_IMPORT.sub(repl, text)


def is_text(path: str) -> bool:
    return Path(path).suffix in TEXT_SUFFIXES or path.startswith(TEXT_DIRS_ANY_SUFFIX)


def rewrite_file(root: Path, path: str, plan: Plan, warnings: list[str], stats: dict[str, int]) -> bool:
    file = root / path
    try:
        text = file.read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
        return False
    new = text
    if path.endswith(".py"):
        new, n = sub_from_imports(new, path, plan, warnings)
        stats["from-import statements"] += n
    new, n = sub_dotted(new, plan)
    stats["dotted names"] += n
    new, n = sub_paths(new, plan)
    stats["file paths"] += n
    new, n = sub_bare_names(new, plan)
    stats["bare file names"] += n
    if new != text:
        old_lines = set(text.splitlines())
        for number, line in enumerate(new.splitlines(), 1):
            if path.endswith(".py") and len(line) > LINE_LENGTH and line not in old_lines:
                warnings.append(f"{path}:{number}: longer than {LINE_LENGTH} characters after the rewrite: wrap it")
        file.write_text(new, encoding="utf-8")
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Generated files.
# ---------------------------------------------------------------------------------------------


def first_line(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line."""
    doc = (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").strip()
    return " ".join(doc.split("\n\n")[0].split())


def public_names(path: Path) -> list[str]:
    """A module's ``__all__`` (literal list or tuple), or [] when it has none."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            value = ast.literal_eval(node.value)
            return [str(v) for v in value]
    return []


def isort_key(name: str) -> tuple[int, str]:
    """ruff's isort order within a ``from`` import (order-by-type): CONSTANTS, Classes, functions."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower() if kind == 2 else name


def reexport(module: str, names: list[str]) -> str:
    if not names:
        return ""
    ordered = sorted(names, key=isort_key)
    one = f"from {module} import {', '.join(ordered)}"
    if len(one) <= 120:
        imp = one
    else:
        imp = f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"
    all_one = "__all__ = [" + ", ".join(f'"{n}"' for n in names) + "]"
    if len(all_one) > 120:
        all_one = "__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]"
    return f"\n{imp}\n\n{all_one}\n"


def docstring(title: str, items: list[tuple[str, str]], closing: str = "") -> str:
    lines = [title, ""]
    if closing:
        lines += textwrap.wrap(closing, 100) + [""]
    lines.append("Modules:")
    lines.append("")
    for name, what in items:
        lines += textwrap.wrap(f"- ``{name}``: {what}", 100, subsequent_indent="  ", break_on_hyphens=False)
    return '"""' + "\n".join(lines) + '\n"""\n'


def package_init(root: Path, package_dir: str, title: str, namesake: str | None, closing: str = "") -> str:
    folder = root / package_dir
    mods = sorted(p for p in folder.glob("*.py") if not p.name.startswith("__"))
    text = docstring(title, [(p.stem, first_line(p)) for p in mods], closing)
    if namesake:
        path = folder / f"{namesake}.py"
        text += reexport(module_of(f"{package_dir}/{namesake}.py"), public_names(path))
    return text


def write_new(root: Path, path: str, text: str, created: list[str]) -> None:
    file = root / path
    if file.exists():
        return
    file.write_text(text, encoding="utf-8")
    git(root, "add", path)
    created.append(path)


def privacy_init(root: Path) -> str | None:
    """The new ``privacy/__init__.py``, or None when it already lists the sub-packages."""
    path = root / "pate_stab/privacy/__init__.py"
    subs = [s for s in SUBPACKAGES if (root / "pate_stab/privacy" / s).is_dir()]
    if set(public_names(path)) == set(subs):
        return None
    lines = [
        "Pure privacy mechanisms and privacy math.",
        "",
        "This subpackage imports neither Lightning nor any model code (a test checks it). Its sub-packages,",
        "each importing only from itself and the ones listed before it (``mechanisms`` and ``pate`` sit",
        "beside each other):",
        "",
    ]
    for s in subs:
        mods = sorted(p.stem for p in (root / "pate_stab/privacy" / s).glob("*.py") if not p.name.startswith("__"))
        line = f"- ``{s}`` ({', '.join(f'``{m}``' for m in mods)}): {SUBPACKAGES[s]}"
        lines += textwrap.wrap(line, 100, subsequent_indent="  ", break_on_hyphens=False)
    body = '"""' + "\n".join(lines) + '\n"""\n\n__all__ = [' + ", ".join(f'"{s}"' for s in subs) + "]\n"
    return body


# ---------------------------------------------------------------------------------------------
# docs/algorithms.md's module index.
# ---------------------------------------------------------------------------------------------

ROW = re.compile(r"^\| `(pate_stab/[\w/]+\.py)` \| (.*) \|$")


def module_index(root: Path, index: str) -> str | None:
    """The module index section rebuilt: every module file, grouped by folder, rows kept as written."""
    start = re.search(r"^## Module index\n", index, re.M)
    if not start:
        return None
    end = re.search(r"^## ", index[start.end() :], re.M)
    stop = start.end() + end.start() if end else len(index)
    section = index[start.end() : stop]
    first_heading = re.search(r"^### ", section, re.M)
    if not first_heading:
        return None
    intro = section[: first_heading.start()]
    rows = {m.group(1): m.group(2) for m in map(ROW.match, section.splitlines()) if m}
    files = sorted(p.relative_to(root).as_posix() for p in (root / "pate_stab").rglob("*.py"))
    folders: dict[str, list[str]] = {}
    for f in files:
        folders.setdefault(f.rpartition("/")[0] + "/", []).append(f)
    out = [intro.rstrip("\n") + "\n"]
    for folder in sorted(folders):
        out.append(f"\n### `{folder}`\n\n| module | what |\n|---|---|\n")
        for f in folders[folder]:
            what = rows.get(f) or first_line(root / f).replace("``", "`") or "—"
            out.append(f"| `{f}` | {what} |\n")
    rebuilt = "".join(out)
    tail = index[stop:]
    return index[: start.end()] + rebuilt + ("\n" + tail if tail else "")


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=".", help="the repository's root (default: .)")
    parser.add_argument("--dry-run", action="store_true", help="print the moves and change nothing")
    args = parser.parse_args(argv)
    root = Path(git(Path(args.root), "rev-parse", "--show-toplevel").strip())

    plan = make_plan(root)
    if args.dry_run:
        for old, new in plan.todo.items():
            print(f"git mv {old} {new}")
        print(f"({len(plan.done)} already moved)")
        return 0

    # Relative imports resolve against the old places: made absolute before anything moves.
    warnings: list[str] = []
    stats = dict.fromkeys(["from-import statements", "dotted names", "file paths", "bare file names"], 0)
    for path in tracked_files(root):
        if path.endswith(".py") and path.startswith("pate_stab/") and (root / path).is_file():
            text = (root / path).read_text(encoding="utf-8")
            new = absolutize(text, path, plan)
            if new != text:
                (root / path).write_text(new, encoding="utf-8")
                stats["relative imports made absolute"] = stats.get("relative imports made absolute", 0) + 1

    for old, new in plan.todo.items():
        (root / new).parent.mkdir(parents=True, exist_ok=True)
        git(root, "mv", old, new)
        print(f"moved   {old} → {new}")

    itself = Path(__file__).resolve()
    changed = [
        p
        for p in tracked_files(root)
        if is_text(p) and p != SELF and (root / p).resolve() != itself and rewrite_file(root, p, plan, warnings, stats)
    ]

    created: list[str] = []
    for sub in SUBPACKAGES:
        folder = f"pate_stab/privacy/{sub}"
        if (root / folder).is_dir():
            namesake = next((n for o, (s, n) in PRIVACY_MAP.items() if s == sub and o == sub), None)
            if namesake and not (root / folder / f"{namesake}.py").exists():
                namesake = None
            write_new(root, f"{folder}/__init__.py", package_init(root, folder, SUBPACKAGES[sub], namesake), created)
    if (root / "pate_stab/cli").is_dir():
        write_new(root, "pate_stab/cli/__init__.py", package_init(root, "pate_stab/cli", CLI_DOC, "commands"), created)
        write_new(root, "pate_stab/cli/__main__.py", CLI_MAIN, created)
    if (root / "pate_stab/privacy/noise").is_dir():
        text = privacy_init(root)
        if text is not None:
            (root / "pate_stab/privacy/__init__.py").write_text(text, encoding="utf-8")
            changed.append("pate_stab/privacy/__init__.py")

    index_path = root / "docs/algorithms.md"
    if index_path.is_file():
        text = index_path.read_text(encoding="utf-8")
        new = module_index(root, text)
        if new is None:
            warnings.append("docs/algorithms.md: no '## Module index' section with '### ' tables: index not updated")
        elif new != text:
            index_path.write_text(new, encoding="utf-8")
            changed.append("docs/algorithms.md (module index)")

    for path in created:
        print(f"created {path}")
    for path in sorted(set(changed)):
        print(f"edited  {path}")
    print("rewrote: " + ", ".join(f"{n} {k}" for k, n in stats.items()))
    for w in warnings:
        print(f"WARNING {w}", file=sys.stderr)
    if plan.todo or changed or created:
        print("next: ruff check --fix --select I . && ruff format .  (then ruff check, mypy, pytest)")
    else:
        print("nothing to do: the tree is already restructured")
    return 1 if warnings else 0


if __name__ == "__main__":
    sys.exit(main())
