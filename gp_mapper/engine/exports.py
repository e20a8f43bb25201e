"""Lazy package exports (PEP 562): a model package names what it exports and from which of its
modules, and a name's module is imported on first use.

Why: a model's package holds its settings, and the engine's settings table reads every model's
settings module when it is first imported. An eager ``__init__`` would import the model's code
first, which itself reads the settings table: a cycle. With lazy exports, importing
``gp_mapper.engine.acgp.settings`` imports nothing else of the package.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``table`` maps each exported name to the
    package's module (relative, e.g. ``".model"``) that defines it."""

    def module_getattr(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module, package), name)

    return module_getattr
