"""Every setting of every model, declared once: name, default, type, range, unit, which models.

This table is the one source of the engine's defaults and ranges. ``EngineSpec`` takes its
defaults from it and the node's parameter table (``gp_mapper.mapping.config.PARAMETERS``) is
built from it, so a value the node accepts is a value the engine accepts. The shared settings
are ``common_settings``; those of one model live in its package (``vips/settings.py``,
``acgp/settings.py``), read here in the model table's order, whose models' own code reads
its package's table only. The table follows the model table: a model registered later
(``register_model``) brings its settings.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .common_settings import COMMON_SETTINGS
from .model_table import model_names, model_packages, table_version
from .setting import Setting, SettingTable

__all__ = [
    "COMMON_SETTINGS",
    "Setting",
    "check",
    "default",
    "engine_settings",
    "model_settings",
    "node_settings",
    "setting_by_name",
    "settings_markdown",
    "streaming_models",
]


def _package_settings(package: str) -> tuple[Setting, ...]:
    """A model package's ``settings.SETTINGS``; () for a package without settings of its own."""
    name = f"{package}.settings"
    try:
        module = import_module(name)
    except ModuleNotFoundError as err:
        if err.name != name:
            raise
        return ()
    return tuple(getattr(module, "SETTINGS", ()))


_table: tuple[int, SettingTable] | None = None


def setting_by_name() -> SettingTable:
    """The shared settings, then each model package's, in the model table's order (read again
    when a model has been registered since).

    Raises:
        ValueError: two packages declare a setting of one name.
    """
    global _table
    if _table is None or _table[0] != table_version():
        version = table_version()
        rows = COMMON_SETTINGS + tuple(
            s for package in model_packages() for s in _package_settings(package)
        )
        _table = (version, SettingTable(rows))
    return _table[1]


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
