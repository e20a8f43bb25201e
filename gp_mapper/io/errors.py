"""Exceptions raised by the IO layer; each message names the file and the fault."""

from __future__ import annotations


class IoLayerError(Exception):
    """Base class of every gp_mapper.io error."""


class DatasetError(IoLayerError):
    """A data set on disk is missing, incomplete or malformed (names what and where)."""


class BagError(IoLayerError):
    """A rosbag2 bag is missing, corrupt, lacks a topic, or cannot be written (names what)."""


class ExportError(IoLayerError):
    """A map product (PNG, Nav2 map, npz) cannot be written from the given arrays."""
