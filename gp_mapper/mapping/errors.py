"""Exceptions raised by the mapping pipeline."""

from __future__ import annotations


class MappingError(Exception):
    """Base class of every error the mapping layer raises on purpose."""


class MapFileError(MappingError):
    """A map file cannot be written or read; the message names the path and the fault."""


class ConfigError(MappingError, ValueError):
    """A parameter value is out of range or of the wrong type; the message names it."""
