"""The one atomic writer (maps, PNGs, Nav2 files): all or nothing, its temporaries found by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from gp_mapper.mapping.atomic import (
    TemporaryFileError,
    atomic_write,
    atomic_write_text,
    temporary_pattern,
)


def test_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.txt"  # missing parents are created
    atomic_write_text(path, "first")
    atomic_write_text(path, "second")
    assert path.read_text() == "second"
    assert [p.name for p in path.parent.iterdir()] == ["out.txt"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    atomic_write_text(path, "old")
    seen: list[str] = []

    def half(handle) -> None:
        handle.write(b"half")
        seen.extend(p.name for p in tmp_path.iterdir() if p.name != "out.txt")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, half)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    # The temporary it wrote into was named as the pattern says, and nothing else would be.
    assert len(seen) == 1 and temporary_pattern(path).fullmatch(seen[0])
    assert not temporary_pattern(path).fullmatch(".other.txt.abcd1234.tmp")


def test_an_uncreatable_temporary_is_its_own_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(TemporaryFileError):
        atomic_write_text(blocker / "out.txt", "x")
