"""pate_stab.privacy imports neither Lightning nor model code (STYLE convention 1).

Run in a fresh interpreter: importing every module of ``pate_stab.privacy`` must load no training
code, and nothing of ``pate_stab`` beyond the privacy package and the shared basics that DESIGN.md
allows it (``_checks``, ``errors``, ``rng``, and ``vocabulary``, the shared ``Literal`` vocabularies, which
imports only ``typing``). The static import graph, function-level imports
included, is checked in ``tests/test_import_graph.py``.
"""

import subprocess
import sys
from pathlib import Path

FORBIDDEN = (
    "lightning",
    "pytorch_lightning",
    "torchvision",
    "pate_stab.teachers",
    "pate_stab.student",
    "pate_stab.aggregation",
)
# pate_stab._lazy: the package's own lazy exports (pate_stab/__init__.py), importlib only, nothing of pate_stab;
# pate_stab.vocabulary: the relation, unit, noise source and layouts written once (typing only)
ALLOWED_PATE_STAB = (
    "pate_stab",
    "pate_stab._checks",
    "pate_stab._lazy",
    "pate_stab.errors",
    "pate_stab.rng",
    "pate_stab.vocabulary",
)


def _loaded_after_importing_privacy() -> list[str]:
    code = (
        "import sys, importlib, pkgutil, pate_stab.privacy as p\n"
        "for m in pkgutil.walk_packages(p.__path__, 'pate_stab.privacy.'): importlib.import_module(m.name)\n"
        "print(','.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip().split(",")


def test_privacy_core_imports_no_training_code():
    loaded = _loaded_after_importing_privacy()
    bad = [m for m in loaded if m.split(".")[0] in FORBIDDEN or m in FORBIDDEN or m.startswith(FORBIDDEN)]
    assert bad == [], f"privacy core imported: {bad}"


def test_privacy_core_imports_only_the_shared_basics():
    loaded = _loaded_after_importing_privacy()
    # The walk imported every module file of the package, those in sub-packages included.
    root = Path(__file__).resolve().parents[2]
    files = (root / "pate_stab" / "privacy").rglob("*.py")
    modules = {".".join(f.relative_to(root).with_suffix("").parts).removesuffix(".__init__") for f in files}
    assert modules <= set(loaded), sorted(modules - set(loaded))
    bad = [
        m
        for m in loaded
        if m.split(".")[0] == "pate_stab"
        and m not in ALLOWED_PATE_STAB
        and not (m == "pate_stab.privacy" or m.startswith("pate_stab.privacy."))
    ]
    assert bad == [], f"privacy core imported other parts of pate_stab: {bad}"
