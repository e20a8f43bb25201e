"""A model's own settings as one typed, frozen class, namespaced as ROS plugin parameters.

A model package declares its settings once, as the fields of a ``ModelSettings`` subclass
(``acgp/settings.py``: ``AcgpSettings``), each with its default, type, range and help given
by :func:`setting`. The class is the model's typed view (``spec.section(AcgpSettings)
.block_size``) and its rows of the settings table (``AcgpSettings.rows()``: the names
``acgp.block_size`` ..., as a Nav2 plugin declares ``plugin_name.param``), which the node's
parameters, ``gp-mapper fit --help`` and the generated docs read.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from .setting import Setting, SettingValue

_ROW = "setting"


def setting(
    default: SettingValue, type: str, description: str, *, legacy: str = "", **row: Any
) -> Any:
    """A field of a ``ModelSettings`` class: its default, type (``setting.SETTING_TYPES``),
    description with its unit, and the rest of its row (``min``, ``max``, ``choices``,
    ``pattern``, ``read_only``, ``models``, ``rule``); ``legacy``: its flat name of an earlier
    release, still read with a deprecation warning."""
    meta = {"type": type, "description": description, "legacy": legacy, **row}
    return dataclasses.field(default=default, metadata={_ROW: meta})


@dataclasses.dataclass(frozen=True)
class ModelSettings:
    """Base of a model package's settings class (a frozen dataclass of :func:`setting`
    fields). ``NAMESPACE``: the prefix of its parameter names, the package's model name;
    ``MODELS``: the models that read a field unless its row names others.

    Raises:
        ValueError: a value outside its row's range or of the wrong type (naming it).
    """

    NAMESPACE: ClassVar[str] = ""
    MODELS: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for row, f in zip(self.rows(), dataclasses.fields(self), strict=True):
            # Stores the canonical type (5 -> 5.0); the error names the setting.
            object.__setattr__(self, f.name, row.check(getattr(self, f.name)))

    @classmethod
    def rows(cls) -> tuple[Setting, ...]:
        """The class's rows of the settings table, named ``NAMESPACE.field`` (built once)."""
        return _rows(cls)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Self:
        """The settings from ``values`` by full name (``acgp.block_size``); the others keep
        their defaults, names of other namespaces are not read."""
        prefix = f"{cls.NAMESPACE}."
        return cls(**{k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)})

    def values(self) -> dict[str, Any]:
        """Every setting by full name."""
        return {
            f"{self.NAMESPACE}.{f.name}": getattr(self, f.name) for f in dataclasses.fields(self)
        }


@functools.cache
def _rows(cls: type[ModelSettings]) -> tuple[Setting, ...]:
    out = []
    for f in dataclasses.fields(cls):
        meta = dict(f.metadata[_ROW])
        meta.setdefault("models", cls.MODELS)
        out.append(
            Setting(
                f"{cls.NAMESPACE}.{f.name}", f.default, meta.pop("type"),
                meta.pop("description"), **meta,
            )
        )  # fmt: skip
    return tuple(out)
