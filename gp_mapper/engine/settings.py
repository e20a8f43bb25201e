"""Every setting of every model, declared once: name, default, type, range, unit, which models.

This table is the one source of the engine's defaults and ranges. ``EngineSpec`` takes its
defaults from it and the node's parameter table (``gp_mapper.mapping.config.PARAMETERS``) is
built from it, so a value the node accepts is a value the engine accepts. The shared settings
are ``common_settings``; those of one model are the fields of its package's settings class
(``acgp/settings.py``: ``AcgpSettings``, named ``acgp.block_size`` ...), read here in the model
table's order, whose models' own code reads its package's table only. The table follows the
model table: a model registered later (``register_model``) brings its settings.
"""

from __future__ import annotations

import re
import warnings
from importlib import import_module
from typing import Any

from .common_settings import COMMON_SETTINGS
from .model_settings import ModelSettings
from .model_table import MODEL_NAME_PATTERN, model_names, model_packages, table_version
from .setting import Setting, SettingTable

__all__ = [
    "COMMON_SETTINGS",
    "Setting",
    "check",
    "default",
    "engine_settings",
    "model_settings",
    "name_of",
    "node_settings",
    "sections",
    "setting_by_name",
    "settings_markdown",
    "streaming_models",
]


def _package_section(package: str) -> type[ModelSettings] | None:
    """A model package's settings class (``settings.SECTION``); None for a package without
    settings of its own.

    Raises:
        TypeError: ``SECTION`` is not a ``ModelSettings`` class with a namespace.
    """
    name = f"{package}.settings"
    try:
        module = import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return None
    section = getattr(module, "SECTION", None)
    if section is None:
        return None
    if not (isinstance(section, type) and issubclass(section, ModelSettings)) or not re.fullmatch(
        MODEL_NAME_PATTERN, section.NAMESPACE
    ):
        raise TypeError(f"{name}.SECTION must be a ModelSettings class with a NAMESPACE")
    return section


_table: tuple[int, SettingTable, tuple[type[ModelSettings], ...]] | None = None


def _read() -> tuple[SettingTable, tuple[type[ModelSettings], ...]]:
    global _table
    if _table is None or _table[0] != table_version():
        version = table_version()
        sections: list[type[ModelSettings]] = []
        for package in model_packages():
            section = _package_section(package)
            if section is not None and section not in sections:
                sections.append(section)
        rows = COMMON_SETTINGS + tuple(s for section in sections for s in section.rows())
        _table = (version, SettingTable(rows), tuple(sections))
    return _table[1], _table[2]


def setting_by_name() -> SettingTable:
    """The shared settings, then each model package's, in the model table's order (read again
    when a model has been registered since).

    Raises:
        ValueError: two packages declare a setting of one name.
    """
    return _read()[0]


def sections() -> tuple[type[ModelSettings], ...]:
    """Every registered model package's settings class, in the model table's order."""
    return _read()[1]


def name_of(name: str) -> str:
    """The setting's name for ``name``: a flat name of an earlier release (``delta``) gives
    its namespaced name (``vips.delta``) with a ``FutureWarning`` (shown to a command's user,
    where a ``DeprecationWarning`` would not be); others pass as they are."""
    new, message = setting_by_name().name_of(name)
    if message is not None:
        warnings.warn(message, FutureWarning, stacklevel=3)
    return new


def engine_settings() -> tuple[Setting, ...]:
    """Every setting, in the table's order."""
    return tuple(setting_by_name().values())


def default(name: str) -> Any:
    """The default of a setting (``EngineSpec`` uses this)."""
    return setting_by_name().default(name)


def check(name: str, value: Any) -> Any:
    """``value`` if the setting ``name`` allows it, else ValueError naming both."""
    return setting_by_name().check(name, value)


def streaming_models() -> tuple[str, ...]:
    """The models the node runs (their kinds are the model table's)."""
    return model_names("streaming")


def node_settings() -> tuple[Setting, ...]:
    """The settings the node declares: the shared ones and those of its streaming models."""
    streaming = streaming_models()
    out = []
    for s in engine_settings():
        if s.name == "model":  # the node runs a streaming model; batch ones are for `fit`
            out.append(s._replace(choices=streaming, pattern=None, rule=""))
        elif not s.models or any(m in streaming for m in s.models):
            out.append(s)
    return tuple(out)


def model_settings(model: str) -> tuple[Setting, ...]:
    """The settings of one model's own (not the shared ones every model reads)."""
    return tuple(s for s in engine_settings() if s.models and model in s.models)


def settings_markdown() -> str:
    """Every setting of every registered model as Markdown, as docs/engine.md shows it."""
    lines = [
        "| setting | default | type | allowed | models | description |",
        "|---|---|---|---|---|---|",
    ]
    for s in engine_settings():
        default = "[]" if s.default is None else repr(s.default)
        models = ", ".join(s.models) if s.models else "all"
        lines.append(
            f"| `{s.name}` | `{default}` | {s.type} | {s.allowed()} | {models} | {s.description} |"
        )
    return "\n".join(lines)
