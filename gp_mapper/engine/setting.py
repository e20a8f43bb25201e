"""One setting, of the engine or of the node: its name, default, type, range, unit, group and
the models that read it. The engine's table (``settings.py``) and the node's parameter table
(``gp_mapper.mapping.config.PARAMETERS``, which adds the node's and the pipeline's own) are rows
of this one record, so one rule checks a value wherever it is given."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

SettingValue = bool | int | float | str | tuple[float, ...] | None
# "float_array": a list of finite numbers, empty (None) for unset. "float_or_auto": a number,
# or "auto" for a value the map measures from its data.
SETTING_TYPES = ("bool", "int", "float", "str", "float_array", "float_or_auto")
AUTO = "auto"
# Who reads a setting: the ROS wiring (node), the pipeline (mapping) or the model (engine).
GROUPS = ("node", "mapping", "engine")


class Setting(NamedTuple):
    """One engine setting.

    Attributes:
        name: the setting's name, a node parameter: a model's own setting is namespaced by its
            package as ROS plugin parameters are (``acgp.block_size``), a shared one is not.
        default: the default value.
        type: one of ``SETTING_TYPES``.
        description: what it sets, with its unit in square brackets.
        min, max: inclusive range of a number, or None.
        choices: the allowed values, or () for any.
        pattern: a regular expression a string must match in whole, or None.
        read_only: fixed once a node has started (what the map holds, the device).
        models: the models that use it; () for every model.
        group: "engine" (an ``EngineSpec`` field), "mapping" (a ``MapperConfig`` field) or
            "node" (the ROS wiring).
        rule: the allowed values in words where they depend on each other (``bounds``).
        legacy: the flat name of an earlier release (``acgp_block_size``), still read with a
            deprecation warning; "" for none.
    """

    name: str
    default: SettingValue
    type: str
    description: str
    min: float | None = None
    max: float | None = None
    choices: tuple[str | int, ...] = ()
    pattern: str | None = None
    read_only: bool = False
    models: tuple[str, ...] = ()
    group: str = "engine"
    rule: str = ""
    legacy: str = ""

    @property
    def keyword(self) -> str:
        """The name as a Python keyword (``acgp.block_size`` -> ``acgp_block_size``)."""
        return self.name.replace(".", "_")

    def used_by(self, model: str) -> bool:
        """Whether ``model`` reads this setting."""
        return not self.models or model in self.models

    def allowed(self) -> str:
        """A one-line statement of the allowed values ("" if any value of the type will do)."""
        if self.rule:
            return self.rule
        if self.choices:
            return "one of: " + ", ".join(str(c) for c in self.choices)
        if self.pattern is not None:
            return f"matches {self.pattern}"
        if self.min is not None and self.max is not None:
            within = f"in [{self.min:g}, {self.max:g}]"
            return f"{AUTO} or a number {within}" if self.type == "float_or_auto" else within
        return ""

    def check(self, value: Any) -> SettingValue:
        """The value in its canonical type if it is allowed.

        Raises:
            ValueError: naming the setting, the allowed values and the value given.
        """
        if self.type == "float_array":
            return _float_array(self.name, value)
        value = _coerce(self, value)
        if self.choices and value not in self.choices:
            raise ValueError(f"{self.name} must be {self.allowed()}; got {value!r}")
        if self.pattern is not None and not re.fullmatch(self.pattern, str(value)):
            raise ValueError(f"{self.name} must match {self.pattern}; got {value!r}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ValueError(f"{self.name} must be finite; got {value!r}")
            low = self.min is not None and value < self.min
            high = self.max is not None and value > self.max
            if low or high:
                raise ValueError(f"{self.name} must be {self.allowed()}; got {value!r}")
        return value


class SettingTable(Mapping[str, Setting]):
    """Settings by name, with the default and the check of each: a model's code reads its own
    package's table (its rows and the shared ones), never the engine's whole table, so a model
    imports no other model.

    Raises:
        ValueError: two rows of one name.
    """

    def __init__(self, *groups: Iterable[Setting]) -> None:
        self._by_name: dict[str, Setting] = {}
        self._legacy: dict[str, str] = {}
        self._keyword: dict[str, str] = {}
        for group in groups:
            for s in group:
                if s.name in self._by_name:
                    raise ValueError(f"setting {s.name!r} is declared twice")
                self._by_name[s.name] = s
                self._keyword[s.keyword] = s.name
                if s.legacy:
                    self._legacy[s.legacy] = s.name

    def __getitem__(self, name: str) -> Setting:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def legacy_names(self) -> dict[str, str]:
        """The flat names of an earlier release -> the names that replace them."""
        return dict(self._legacy)

    def name_of(self, name: str) -> tuple[str, str | None]:
        """The setting's name for ``name``, and a deprecation message when ``name`` is the flat
        name of an earlier release (``delta`` -> ``vips.delta``); unknown names pass through."""
        if name in self._by_name or name not in self._legacy:
            return name, None
        new = self._legacy[name]
        return new, f"setting {name!r} is deprecated (removed in the next release): use {new!r}"

    def name_of_keyword(self, keyword: str) -> str | None:
        """The setting a Python keyword names (``acgp_block_size`` -> ``acgp.block_size``)."""
        return self._keyword.get(keyword)

    def default(self, name: str) -> Any:
        """The default of the setting ``name``."""
        return self._by_name[name].default

    def check(self, name: str, value: Any) -> Any:
        """``value`` if the setting ``name`` allows it, else ValueError naming both."""
        return self._by_name[name].check(value)


def _coerce(setting: Setting, value: Any) -> SettingValue:
    """Convert to the setting's type (int -> float allowed; a bool is never a number)."""
    name, kind = setting.name, setting.type
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be a bool; got {value!r}")
        return value
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string; got {value!r}")
        return value
    if kind == "float_or_auto" and isinstance(value, str):
        if value != AUTO:
            raise ValueError(f"{name} must be {AUTO!r} or a number; got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer; got {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number; got {value!r}")
    return float(value)


def _float_array(name: str, value: Any) -> tuple[float, ...] | None:
    """A list of finite numbers as a tuple; None or an empty list means unset."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a list of numbers; got {value!r}")
    if len(value) == 0:
        return None
    items = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ValueError(f"{name} must be a list of finite numbers; got {value!r}")
        items.append(float(v))
    return tuple(items)
