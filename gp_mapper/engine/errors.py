"""Exceptions raised by the engine."""

from __future__ import annotations


class EngineError(Exception):
    """Base class of every engine error."""


class NumericalError(EngineError):
    """A matrix stayed non-positive-definite after the jitter ladder, or a value is not finite."""


class StateError(EngineError):
    """An engine state (``state_dict``) is malformed, incomplete or incompatible."""


class NotSupportedError(EngineError):
    """The model has no such capability (e.g. the field vector of a scalar map)."""
