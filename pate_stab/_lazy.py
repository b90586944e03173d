"""Lazy package exports: a package names where each public name lives, and the module is imported on first use
(PEP 562), so that importing the package (e.g. for the command line's input checks) loads neither torch nor
Lightning until a name that needs them is read."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], table: Mapping[str, str], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for a package whose globals are ``namespace``: ``table`` maps a public name to
    the module that defines it; a name read once is kept in ``namespace``. ``names``: the package's ``__all__``."""
    package = namespace["__name__"]

    def getattr_(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(set(namespace) | set(names))

    return getattr_, dir_
