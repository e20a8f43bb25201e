"""Atomic file writes: a temporary file beside the target, fsync, rename, fsync the directory.

A reader never sees a half-written file: either the old one or the complete new one. The
temporary is hidden and named after the target (``.NAME.XXXXXXXX.tmp``, ``temporary_pattern``),
so what an interrupted writer left is found by name and nothing else is.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TEMPORARY_SUFFIX = ".tmp"
# tempfile.mkstemp names: prefix, eight characters of its alphabet, suffix.
_TEMPORARY_RANDOM = "[a-z0-9_]{8}"


class TemporaryFileError(OSError):
    """The temporary file could not be created beside the target (no such or no writable
    directory): nothing was written."""


def temporary_pattern(path: Path) -> re.Pattern[str]:
    """The names of the temporaries of writes to ``path``."""
    prefix = re.escape(f".{path.name}.")
    return re.compile(prefix + _TEMPORARY_RANDOM + re.escape(TEMPORARY_SUFFIX))


def atomic_write(path: str | os.PathLike[str], write: Callable[[BinaryIO], None]) -> Path:
    """Write the file ``write(handle)`` produces to ``path`` atomically, creating missing parent
    directories.

    Raises:
        TemporaryFileError: the temporary could not be created.
        OSError: the write, the sync or the rename failed; the old file (if any) stands.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=TEMPORARY_SUFFIX, dir=target.parent
        )
    except OSError as err:
        raise TemporaryFileError(err.errno, err.strerror, err.filename) from err
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write(path, lambda handle: handle.write(data))


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
