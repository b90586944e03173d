"""pate_stab.privacy imports neither Lightning nor model code (STYLE convention 1)."""

import subprocess
import sys

FORBIDDEN = (
    "lightning",
    "pytorch_lightning",
    "torchvision",
    "pate_stab.teachers",
    "pate_stab.student",
    "pate_stab.aggregation",
)


def test_privacy_core_imports_no_training_code():
    code = (
        "import sys, importlib, pkgutil, pate_stab.privacy as p\n"
        "for m in pkgutil.iter_modules(p.__path__): importlib.import_module('pate_stab.privacy.' + m.name)\n"
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m in {FORBIDDEN!r}]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"privacy core imported: {out.stdout}"
