"""The import graph of pate_stab: no cycles (function-level imports included) and the layering of DESIGN.md.

Every module of the package is parsed with :mod:`ast`; every ``import`` / ``from … import`` in it
counts, wherever it sits (module level, inside a function or class, under ``if TYPE_CHECKING``),
since a function-level import only postpones a cycle, it does not remove it. Relative imports
are resolved against the importing module's package; ``from pkg import name`` is an edge to the
submodule ``pkg.name`` when that is a module, and to ``pkg`` (its ``__init__``) otherwise. A
module's own parent packages are not edges (Python runs them first, whatever the module imports).

The runtime check that importing ``pate_stab.privacy`` loads no training code is in
``tests/privacy/test_imports.py``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "pate_stab"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# DESIGN.md: pate_stab.privacy imports nothing of the rest of the package but these.
PRIVACY_MAY_IMPORT = ("pate_stab._checks", "pate_stab.errors", "pate_stab.rng", "pate_stab.vocabulary")
# DESIGN.md: Lightning appears only where training happens.
LIGHTNING_PACKAGES = ("lightning", "pytorch_lightning")
# Import edges that close a cycle in modules this branch leaves to their owners (the pate_stab/testing*.py
# modules move to pate_stab/audit/ elsewhere): testing_erm._case imports MechanismCase from testing_audit
# (line 234), while testing_audit imports erm_mechanism_cases (line 216) and erm_mutation_cases (line 317)
# from testing_erm inside functions. test_no_import_cycles checks the graph without these edges;
# test_no_import_cycles_at_all checks it whole and is expected to fail until the cycle is removed.
LIGHTNING_ALLOWED = tuple(
    f"{PACKAGE}.{name}" for name in ("models", "teachers", "student", "run", "features", "audit", "cli")
)


def _module_names() -> dict[str, Path]:
    """Dotted name → file for every module of the package (``__init__`` is the package itself)."""
    out: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _module_names()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _imports(module: str) -> Iterator[tuple[str, int]]:
    """(imported dotted name, line) for every import statement of ``module``, at any depth.

    ``from a import b`` yields ``a.b`` when that is a module of the package, else ``a``;
    relative imports are made absolute.
    """
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"), filename=str(MODULES[module]))
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                if node.level > 1:
                    base_parts = base_parts[: -(node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield (candidate if candidate in MODULES else base), node.lineno


def _resolve(name: str) -> str | None:
    """The module of the package that importing ``name`` runs last (longest known prefix), or None."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in MODULES:
            return candidate
        parts.pop()
    return None


def _ancestors(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _graph() -> dict[str, dict[str, int]]:
    """module → {imported module of the package: first line of such an import}."""
    graph: dict[str, dict[str, int]] = {m: {} for m in MODULES}
    for module in MODULES:
        for name, line in _imports(module):
            target = _resolve(name) if name.split(".")[0] == PACKAGE else None
            if target is None or target == module or target in _ancestors(module):
                continue
            graph[module].setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (``[a, b, …, a]``) per strongly connected component that has one (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)

    cycles = []
    for component in components:
        members = set(component)
        start = component[0]
        # Shortest path back to start inside the component (breadth first).
        parent: dict[str, str] = {}
        frontier = [start]
        found = None
        while frontier and found is None:
            nxt = []
            for node in frontier:
                for succ in sorted(graph[node]):
                    if succ not in members:
                        continue
                    if succ == start:
                        found = node
                        break
                    if succ not in parent:
                        parent[succ] = node
                        nxt.append(succ)
                if found is not None:
                    break
            frontier = nxt
        path = [start]
        node = found
        while node is not None and node != start:
            path.append(node)
            node = parent.get(node)
        cycles.append([start, *reversed(path[1:]), start])
    return cycles


def _describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    """The cycle with the line of each import, then every import edge among its strongly connected modules."""
    members = set(cycle)
    path = " → ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False))
    edges = [
        f"    {a} → {b} (line {line})" for a in sorted(members) for b, line in sorted(graph[a].items()) if b in members
    ]
    return f"{path} → {cycle[-1]}\n" + "\n".join(edges)


def test_graph_sees_every_kind_of_import() -> None:
    """The parser finds nested, relative and package-level imports (self-check on known edges)."""
    graph = _graph()
    assert "pate_stab.privacy.accounting.events" in graph["pate_stab.privacy.ledger.privacy_ledger"]
    assert "pate_stab.privacy.accounting.composition" in graph["pate_stab.privacy.ledger.privacy_ledger"]
    assert "pate_stab.privacy.accounting.events" in graph["pate_stab.privacy.accounting.composition"]
    # A function-level import (teachers.training imports lightning's ModelCheckpoint inside a method).
    assert any(name.startswith("lightning.") for name, _ in _imports("pate_stab.teachers.training"))
    # The cycle finder reports a planted cycle.
    planted = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _cycles(planted) == [["a", "b", "c", "a"]]


def _assert_acyclic(graph: dict[str, dict[str, int]]) -> None:
    cycles = _cycles(graph)
    assert not cycles, "import cycles in pate_stab:\n" + "\n".join(_describe(c, graph) for c in cycles)


def test_no_import_cycles() -> None:
    _assert_acyclic(_graph())


def test_events_accounting_ledger_import_one_way() -> None:
    graph = _graph()
    # the events import nothing else of the privacy core: the single mechanisms' events nothing at all
    events = ("pate_stab.privacy.accounting.events", "pate_stab.privacy.accounting.mechanism_events")
    assert not [m for m in graph[events[1]] if m.startswith("pate_stab.privacy")]
    assert [m for m in graph[events[0]] if m.startswith("pate_stab.privacy")] == [events[1]]
    assert "pate_stab.privacy.ledger.privacy_ledger" not in graph["pate_stab.privacy.accounting.composition"]


def test_privacy_imports_only_the_shared_basics() -> None:
    graph = _graph()
    bad = [
        f"{module} imports {target} (line {line})"
        for module, targets in graph.items()
        if module == "pate_stab.privacy" or module.startswith("pate_stab.privacy.")
        for target, line in targets.items()
        if not (target == "pate_stab.privacy" or target.startswith("pate_stab.privacy."))
        and target not in PRIVACY_MAY_IMPORT
    ]
    assert not bad, "pate_stab.privacy reaches outside its layer:\n" + "\n".join(bad)


def test_lightning_only_where_training_happens() -> None:
    bad = [
        f"{module} (line {line}): {name}"
        for module in sorted(MODULES)
        if not any(module == p or module.startswith(p + ".") for p in LIGHTNING_ALLOWED)
        for name, line in _imports(module)
        if name.split(".")[0] in LIGHTNING_PACKAGES
    ]
    assert not bad, "Lightning imported outside models/teachers/student/run/features/audit/cli:\n" + "\n".join(bad)


def test_nothing_in_the_library_imports_the_reproductions() -> None:
    """pate_stab.repro (paper protocols, some not private) is a leaf: only its own modules import it."""
    graph = _graph()
    bad = [
        f"{module} imports {target} (line {line})"
        for module, targets in graph.items()
        if not (module == "pate_stab.repro" or module.startswith("pate_stab.repro."))
        for target, line in targets.items()
        if target == "pate_stab.repro" or target.startswith("pate_stab.repro.")
    ]
    assert not bad, "the library reaches into pate_stab.repro:\n" + "\n".join(bad)


# DESIGN.md "Layout (target)": imports flow one way, privacy → aggregation / erm → models → features /
# teachers / student → run → cli and recipes, audit beside run. Each room of the package (the first name
# below ``pate_stab``; "" is ``pate_stab/__init__.py``, the public API) has a rank; a module may import from
# a lower rank and from its own room. Rooms of one rank import each other only where the rank allows it
# (True) and the pair is not in SIDEWAYS_FORBIDDEN: audit and repro sit beside run and import neither it
# nor each other, aggregation and erm neither each other, teachers and student neither each other (the
# model code both use is pate_stab.models, below them).
LAYERS: list[tuple[str, tuple[str, ...], bool]] = [
    ("shared basics", ("_checks", "_lazy", "errors", "rng", "vocabulary"), True),
    ("privacy: mechanisms and privacy math", ("privacy",), False),
    ("formulas", ("theory",), False),
    ("algorithms on votes and on data", ("aggregation", "erm"), False),
    ("model code of the teachers and the students", ("models",), False),
    ("the pipeline's parts", ("data", "features", "teachers", "student", "selection", "direct"), True),
    ("the pipeline, and beside it", ("run", "audit", "repro"), False),
    ("front doors", ("cli", ""), True),
]
# Imports that break the order today, each with the module and line, to be removed, not added to.
# test_layer_order fails on any other; test_known_layer_violations_still_exist on a stale entry.
KNOWN_LAYER_VIOLATIONS: set[tuple[str, str]] = set()
# (room, room) pairs of one rank that may not import each other although the rank allows sideways imports.
SIDEWAYS_FORBIDDEN: set[tuple[str, str]] = {("teachers", "student"), ("student", "teachers")}


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _rank(room: str) -> tuple[int, bool]:
    for rank, (_, rooms, among) in enumerate(LAYERS):
        if room in rooms:
            return rank, among
    raise AssertionError(f"pate_stab.{room} has no place in LAYERS (tests/test_import_graph.py): add it")


def _layer_violations(graph: dict[str, dict[str, int]] | None = None) -> set[tuple[str, str]]:
    """(module, imported module) for every import that runs up the order or sideways between rooms."""
    bad = set()
    for module, targets in (_graph() if graph is None else graph).items():
        room = _room(module)
        rank, among = _rank(room)
        for target in targets:
            other = _room(target)
            other_rank, _ = _rank(other)
            sideways_allowed = among and (room, other) not in SIDEWAYS_FORBIDDEN
            if other == room or other_rank < rank or (other_rank == rank and sideways_allowed):
                continue
            bad.add((module, target))
    return bad


def test_layer_order() -> None:
    graph = _graph()
    new = sorted(_layer_violations() - KNOWN_LAYER_VIOLATIONS)
    assert not new, "imports against DESIGN's layer order:\n" + "\n".join(
        f"    {m} (line {graph[m][t]}) → {t}" for m, t in new
    )


def test_known_layer_violations_still_exist() -> None:
    stale = sorted(KNOWN_LAYER_VIOLATIONS - _layer_violations())
    assert not stale, f"fixed: remove from KNOWN_LAYER_VIOLATIONS: {stale}"


def test_layer_rule_on_planted_imports() -> None:
    """The rank table places every room, and the rule flags imports up and sideways (self-check)."""
    for room in {_room(m) for m in MODULES}:
        _rank(room)  # every room of the package has a place
    planted = {
        "pate_stab.privacy.a": {"pate_stab.run.b": 1, "pate_stab.rng": 2},  # up; down
        "pate_stab.audit.a": {"pate_stab.run.b": 3, "pate_stab.teachers.c": 4},  # sideways; down
        "pate_stab.student.a": {"pate_stab.teachers.b": 5},  # sideways, a forbidden pair
        "pate_stab.teachers.a": {"pate_stab.student.b": 6, "pate_stab.features.c": 7},  # forbidden; among the parts
        "pate_stab.erm.a": {"pate_stab.aggregation.b": 8},  # sideways
        "pate_stab.models.a": {"pate_stab.teachers.b": 9, "pate_stab.erm.b": 10},  # up; down
    }
    assert _layer_violations(planted) == {
        ("pate_stab.privacy.a", "pate_stab.run.b"),
        ("pate_stab.audit.a", "pate_stab.run.b"),
        ("pate_stab.student.a", "pate_stab.teachers.b"),
        ("pate_stab.teachers.a", "pate_stab.student.b"),
        ("pate_stab.erm.a", "pate_stab.aggregation.b"),
        ("pate_stab.models.a", "pate_stab.teachers.b"),
    }


# Inside privacy/ (once it has sub-packages): noise → accounting → mechanisms / pate → ledger.
PRIVACY_ROOMS: list[tuple[str, ...]] = [("noise",), ("accounting",), ("mechanisms", "pate"), ("ledger",)]


def test_privacy_sub_packages_import_one_way() -> None:
    subs = {m.split(".")[2] for m in MODULES if m.count(".") >= 2 and m.startswith("pate_stab.privacy.")}
    packages = {s for s in subs if _is_package(f"pate_stab.privacy.{s}")}
    rank = {room: i for i, rooms in enumerate(PRIVACY_ROOMS) for room in rooms}
    assert packages == set(rank), f"privacy's sub-packages {sorted(packages)} are not PRIVACY_ROOMS"
    loose = sorted(s for s in subs - packages)
    assert not loose, f"modules directly under pate_stab/privacy/: {loose}: place each in a sub-package"
    graph = _graph()
    bad = []
    for module, targets in graph.items():
        if not module.startswith("pate_stab.privacy.") or module.count(".") < 2:
            continue
        room = module.split(".")[2]
        for target, line in targets.items():
            if target.startswith("pate_stab.privacy.") and target.count(".") >= 2:
                other = target.split(".")[2]
                if other != room and rank[other] >= rank[room]:
                    bad.append(f"{module} (line {line}) → {target}")
    assert not bad, "privacy's sub-packages import against noise → accounting → mechanisms / pate → ledger:\n" + (
        "\n".join(bad)
    )


# What the run's configuration (pate_stab/run/config/) may import besides its own modules: each module with the
# names taken from it. All of it is data or an argument check; no algorithm (selection, direct, teachers,
# student, features, erm, models, the releasers) is among it, so that the config depends on no algorithm.
CONFIG_MAY_IMPORT: dict[str, set[str]] = {
    # argument checks, and the vocabularies the config shares with the pipeline's parts below it
    "pate_stab._checks": {"check_label_relation", "check_pca_dim"},
    "pate_stab.vocabulary": {
        "BOTTOM_POLICIES", "BottomPolicy", "QUERY_SELECTIONS", "QuerySelection", "REPRESENTATIVE_CHOICES",
        "SelectionRepresentatives", "check_query_selection", "check_representatives", "GRAPH_ALPHA",
        "GRAPH_NEIGHBORS", "GRAPH_PCA_DIM", "GRAPH_POWER", "GRAPH_STEPS", "SELECTION_COVERAGE",
        "SELECTION_REPRESENTATIVES", "SELECTION_ROUND_SIZE", "CALIBRATIONS", "Calibration",
    },
    # the privacy core's vocabularies: the relation, the privacy unit, the noise source (data: Literal + tuple)
    "pate_stab.privacy.ledger.format": {"NEIGHBOURING_RELATIONS", "PRIVACY_UNITS", "Neighbouring", "PrivacyUnit"},
    "pate_stab.privacy.noise.secure": {"NOISE_MODES", "NoiseMode"},
    # the settings every aggregator is built from (a frozen dataclass; TransferConfig.aggregator_settings)
    "pate_stab.aggregation.registry": {"AggregatorSettings"},
    # a user's CSV schema file, read for its declared id column (the partition key's default)
    "pate_stab.data.table_schema": {"TabularSchema"},
}  # fmt: skip


def _is_config(module: str) -> bool:
    # run/config_*.py: where the configuration lived before it was one package
    return module == "pate_stab.run.config" or module.startswith(("pate_stab.run.config.", "pate_stab.run.config_"))


def _imported_names(module: str) -> Iterator[tuple[str, str, int]]:
    """(module of the package, name imported from it or "" for ``import module``, line) of ``module``'s imports."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if _is_package(module) else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join((parts[: -(node.level - 1)] if node.level > 1 else parts) + ([base] if base else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    yield f"{base}.{alias.name}", "", node.lineno
                else:
                    yield base, alias.name, node.lineno


def test_the_config_imports_no_algorithm() -> None:
    """No module of pate_stab/run/config/ imports an algorithm: only its own modules and CONFIG_MAY_IMPORT's names;
    pate_stab.vocabulary, which it shares with the algorithms below it, imports nothing of the package."""
    config = sorted(m for m in MODULES if _is_config(m))
    bad = [
        f"{module} (line {line}) imports {target}{'.' + name if name else ''}"
        for module in config
        for target, name, line in _imported_names(module)
        if target.split(".")[0] == PACKAGE
        and not _is_config(target)
        and not (target in CONFIG_MAY_IMPORT and name in CONFIG_MAY_IMPORT[target])
    ]
    assert not bad, "the configuration imports outside its allowed data and checks:\n" + "\n".join(bad)
    assert {"pate_stab.run.config", "pate_stab.run.config.names", "pate_stab.run.config.sections"} <= set(config)
    assert set(CONFIG_MAY_IMPORT) <= set(MODULES), sorted(set(CONFIG_MAY_IMPORT) - set(MODULES))
    vocabulary = [
        (t, n, line) for t, n, line in _imported_names("pate_stab.vocabulary") if t not in ("typing", "__future__")
    ]
    assert not vocabulary, f"pate_stab.vocabulary must import only typing: {vocabulary}"


def _in_room(module: str, *rooms: str) -> bool:
    return any(module == f"{PACKAGE}.{room}" or module.startswith(f"{PACKAGE}.{room}.") for room in rooms)


def test_teachers_and_student_share_models_and_never_import_each_other() -> None:
    """DESIGN.md "Layout (target)": pate_stab.models holds the model code that teachers/ and student/ both use;
    no module of teachers/ imports student/ or the other way round, and models/ imports neither of them, nor
    the pipeline (run/) or the command (cli/). Function-level and ``TYPE_CHECKING`` imports count."""
    graph = _graph()
    rules = [
        (("teachers",), ("student",)),
        (("student",), ("teachers",)),
        (("models",), ("teachers", "student", "run", "cli")),
    ]
    bad = [
        f"{module} (line {line}) → {target}"
        for rooms, banned in rules
        for module, targets in sorted(graph.items())
        if _in_room(module, *rooms)
        for target, line in sorted(targets.items())
        if _in_room(target, *banned)
    ]
    assert not bad, "imports between teachers/ and student/, or from models/ upwards:\n" + "\n".join(bad)
    assert f"{PACKAGE}.models" in MODULES and _is_package(f"{PACKAGE}.models"), "pate_stab/models/ is missing"


# No private name crosses a package (DESIGN.md, "Layout"): a package is a top-level sub-package of pate_stab
# (a top-level module is its own). A helper that another package needs is public in its home module, or
# lives where it is used.
PRIVATE_NAMES_ACROSS_PACKAGES_PENDING: set[tuple[str, str, str]] = set()


def _top_package(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else module


def _private_names_across_packages(
    sources: dict[str, tuple[str, bool]] | None = None,
) -> set[tuple[str, str, str]]:
    """(importing module, home module, name) for every private name (``_x``, not ``__x__``) a module of
    one package takes from another package: ``from home import _x``, or ``home._x`` on a module it
    imported (a private *module* such as ``pate_stab._checks`` is not a name). ``sources``: module →
    (source, is a package); default the package's own files."""
    if sources is None:
        sources = {m: (MODULES[m].read_text(encoding="utf-8"), _is_package(m)) for m in MODULES}
    found: set[tuple[str, str, str]] = set()

    def private(name: str) -> bool:
        return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))

    for module, (source, is_package) in sources.items():
        package = module if is_package else module.rpartition(".")[0]
        tree = ast.parse(source)
        aliases: dict[str, str] = {}  # local name → module of the package it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([node.module] if node.module else []))
                if base.split(".")[0] != PACKAGE:
                    continue
                for alias in node.names:
                    is_module = (
                        f"{base}.{alias.name}" in MODULES
                    )  # a module, not a name (``from pate_stab import _checks``)
                    if private(alias.name) and not is_module and _top_package(base) != _top_package(module):
                        found.add((module, base, alias.name))
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == PACKAGE:
                        aliases[alias.asname or alias.name.split(".")[0]] = alias.asname and alias.name or PACKAGE
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and private(node.attr):
                home = aliases.get(ast.unparse(node.value)) or ast.unparse(node.value)
                if home.split(".")[0] == PACKAGE and home.count(".") >= 1:
                    if _top_package(home) != _top_package(module):
                        found.add((module, home, node.attr))
    return found


def test_no_private_name_crosses_a_package() -> None:
    new = sorted(_private_names_across_packages() - PRIVATE_NAMES_ACROSS_PACKAGES_PENDING)
    assert not new, "private names imported across packages (make them public in their home module):\n" + "\n".join(
        f"    {module} takes {name} from {home}" for module, home, name in new
    )
    stale = sorted(PRIVATE_NAMES_ACROSS_PACKAGES_PENDING - _private_names_across_packages())
    assert not stale, f"no longer imported: remove from PRIVATE_NAMES_ACROSS_PACKAGES_PENDING: {stale}"


def test_private_name_rule_on_planted_modules() -> None:
    """The rule flags from-imports and attribute reads of private names across packages, and nothing else."""
    planted = {
        "pate_stab.run.a": ("from pate_stab.teachers.b import _helper, public\n", False),
        "pate_stab.run.b": ("from pate_stab.run.c import _same_package\nfrom .c import _relative\n", False),
        "pate_stab.audit": ("from ..privacy.ledger import _digest\n", True),
        "pate_stab.cli.a": ("import pate_stab.data.own as own\nown._read_arrays('x')\nown.__name__\n", False),
        "pate_stab.cli.b": ("from pate_stab.data import own\nown._subfolders\n", False),
        "pate_stab.cli.c": ("import pate_stab.rng\npate_stab.rng._private\nfrom pate_stab import _checks\n", False),
    }
    assert _private_names_across_packages(planted) == {
        ("pate_stab.run.a", "pate_stab.teachers.b", "_helper"),
        ("pate_stab.audit", "pate_stab.privacy.ledger", "_digest"),
        ("pate_stab.cli.a", "pate_stab.data.own", "_read_arrays"),
        ("pate_stab.cli.b", "pate_stab.data.own", "_subfolders"),
        ("pate_stab.cli.c", "pate_stab.rng", "_private"),
    }


def test_run_holds_at_most_twenty_modules() -> None:
    """DESIGN.md's layout: run/ is the pipeline only, at most 20 modules (a sub-package counts as one; config.py,
    config_names.py and config_sections.py count as the one package run/config/ they become)."""
    run = ROOT / "run"
    rooms = {p.stem for p in run.glob("*.py") if p.stem != "__init__"}
    rooms |= {p.name for p in run.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    rooms = {"config" if r.startswith("config") else r for r in rooms}
    assert len(rooms) <= 20, f"pate_stab/run/ holds {len(rooms)} modules: {sorted(rooms)}"
