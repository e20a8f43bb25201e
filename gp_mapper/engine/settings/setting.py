"""One engine setting: its name, default, type, range, unit and the models that read it."""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

SettingValue = bool | int | float | str
SETTING_TYPES = ("bool", "int", "float", "str")


class Setting(NamedTuple):
    """One engine setting.

    Attributes:
        name: the setting's name (an ``EngineSpec`` field and a node parameter).
        default: the default value.
        type: "bool", "int", "float" or "str".
        description: what it sets, with its unit in square brackets.
        min, max: inclusive range of a number, or None.
        choices: the allowed values, or () for any.
        pattern: a regular expression a string must match in whole, or None.
        read_only: fixed once a node has started (what the map holds, the device).
        models: the models that use it; () for every model.
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

    def used_by(self, model: str) -> bool:
        """Whether ``model`` reads this setting."""
        return not self.models or model in self.models

    def allowed(self) -> str:
        """A one-line statement of the allowed values ("" if any value of the type will do)."""
        if self.choices:
            return "one of: " + ", ".join(str(c) for c in self.choices)
        if self.pattern is not None:
            return f"matches {self.pattern}"
        if self.min is not None and self.max is not None:
            return f"in [{self.min:g}, {self.max:g}]"
        return ""

    def check(self, value: Any) -> SettingValue:
        """The value in its canonical type if it is allowed.

        Raises:
            ValueError: naming the setting, the allowed values and the value given.
        """
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
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer; got {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number; got {value!r}")
    return float(value)
