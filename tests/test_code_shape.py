"""The shape of the code (issue 46, DESIGN.md "Layout"): no function over 80 lines, no module over 600.

A function's length runs from its ``def`` (or first decorator) to its last line, its docstring left
out: what a reader reads as its steps. Nested functions count on their own and inside their parent.
The allow-lists are short and named: argparse builders and data tables, which read as lists, and
the functions and modules being split elsewhere or still to split (each with its measured length,
so that a list entry that has been fixed, or has grown, is noticed).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "pate_stab"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600

# argparse builders and data tables: they read as lists
LONG_BY_NATURE = {
    "cli/commands.py::build_parser",  # argparse builder
}
# being split now in other branches of issue 46 (none at present)
BEING_SPLIT_MODULES: set[str] = set()
# still to split (issue 46, point 5), with their length today
TO_SPLIT_FUNCTIONS: dict[str, int] = {}
TO_SPLIT_MODULES: dict[str, int] = {}


def function_lengths(source: str) -> dict[str, int]:
    """``qualified name → lines`` of every function and method, each docstring left out."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                first = child.body[0]
                doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                doc = doc and isinstance(first.value.value, str)  # type: ignore[attr-defined]
                skipped = first.end_lineno - first.lineno + 1 if doc else 0  # type: ignore[operator]
                lengths[prefix + child.name] = child.end_lineno - start + 1 - skipped  # type: ignore[operator]
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(ast.parse(source), "")
    return lengths


def _files() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in sorted(ROOT.rglob("*.py"))}


def _long_functions() -> dict[str, int]:
    return {
        f"{path}::{name}": n
        for path, source in _files().items()
        if path not in BEING_SPLIT_MODULES
        for name, n in function_lengths(source).items()
        if n > MAX_FUNCTION_LINES
    }


def _long_modules() -> dict[str, int]:
    return {
        path: n
        for path, source in _files().items()
        if path not in BEING_SPLIT_MODULES and (n := len(source.splitlines())) > MAX_MODULE_LINES
    }


def test_no_function_over_80_lines() -> None:
    long = _long_functions()
    new = {k: n for k, n in long.items() if k not in LONG_BY_NATURE and TO_SPLIT_FUNCTIONS.get(k, 0) < n}
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines (split them into their steps): {new}"
    fixed = sorted(set(TO_SPLIT_FUNCTIONS) - set(long)) + sorted(LONG_BY_NATURE - set(long))
    assert not fixed, f"no longer over {MAX_FUNCTION_LINES} lines: remove from the allow-lists: {fixed}"


def test_no_module_over_600_lines() -> None:
    long = _long_modules()
    new = {k: n for k, n in long.items() if TO_SPLIT_MODULES.get(k, 0) < n}
    assert not new, f"modules over {MAX_MODULE_LINES} lines: {new}"
    fixed = sorted(set(TO_SPLIT_MODULES) - set(long))
    assert not fixed, f"no longer over {MAX_MODULE_LINES} lines: remove from TO_SPLIT_MODULES: {fixed}"


def test_function_lengths_leave_out_docstrings_and_count_decorators() -> None:
    source = '''
@decorator
def f(x):
    """Two
    lines."""
    def g():
        return 1
    return g


class C:
    def m(self):
        pass
'''
    assert function_lengths(source) == {"f": 5, "f.g": 2, "C.m": 2}


# the names a TransferConfig goes by in the package (pate_stab/run/config/transfer_config.py)
CONFIG_NAMES = {"cfg", "config", "prep.config", "self.prep.config", "prepared.config"}


def flat_setting_reads(source: str, flat_names: set[str]) -> list[tuple[int, str]]:
    """``(line, text)`` of every read of a setting by its flat name off a configuration (``config.epsilon``);
    inside a function whose ``config`` is annotated as another type (a ``StudentConfig``) none is counted."""
    tree = ast.parse(source)
    other: set[int] = set()  # lines of functions whose ``config`` is not a TransferConfig
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            hint = next((ast.unparse(a.annotation) for a in args if a.arg == "config" and a.annotation), None)
            if hint is not None and "TransferConfig" not in hint and hint != "Any":
                other.update(range(fn.lineno, (fn.end_lineno or fn.lineno) + 1))
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in flat_names and isinstance(node.ctx, ast.Load):
            if ast.unparse(node.value) in CONFIG_NAMES and node.lineno not in other:
                reads.append((node.lineno, ast.unparse(node)))
    return reads


def test_the_package_reads_every_setting_by_its_section() -> None:
    """Flat names are the YAML's and the command line's; the code reads ``config.<section>.<setting>``
    (the test suite also turns a flat read's DeprecationWarning into an error inside the package)."""
    from pate_stab.run.config.sections import SECTION_OF

    flat = set(SECTION_OF)
    reads = [
        f"{path.relative_to(ROOT)}:{line}: {text}"
        for path in sorted(ROOT.rglob("*.py"))
        for line, text in flat_setting_reads(path.read_text(), flat)
    ]
    assert not reads, "read these settings by their section (config.<section>.<name>):\n" + "\n".join(reads)
    assert flat_setting_reads("x = config.epsilon + config.release.epsilon\n", flat) == [(1, "config.epsilon")]
    other = "def f(config: StudentConfig):\n    return config.pseudo_label_rounds\n"
    assert flat_setting_reads(other, flat) == []
    typed = other.replace("StudentConfig", "TransferConfig")
    assert flat_setting_reads(typed, flat) == [(2, "config.pseudo_label_rounds")]
