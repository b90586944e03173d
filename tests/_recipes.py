"""Recipe scripts loaded as modules by file path (recipes/ is no package and no sys.path entry).

Code that several recipes or the tests share lives in the package (e.g. :mod:`pate_stab.repro`);
what a test needs from one recipe's own functions it reaches through :func:`load_recipe`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
CONFIGS = RECIPES / "configs"


def load_recipe(relative: str) -> ModuleType:
    """The script ``recipes/<relative>`` run as a module (its ``main`` guard not taken); loaded once."""
    path = RECIPES / relative
    name = "recipe_" + relative.removesuffix(".py").replace("/", "_")
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    return module
