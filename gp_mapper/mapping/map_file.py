"""Saving and loading a map: one versioned `.npz`, written atomically, read without pickle.

A map file holds everything needed to resume mapping without the raw data: the engine's
`state_dict()` (keys prefixed "engine."), the config it was built with (JSON), the trajectory,
the explored box and the counters.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gp_mapper.mapping.errors import MapFileError

# Bump when the layout changes; files of another version are refused, not guessed at.
MAP_FORMAT_VERSION = 1

ENGINE_PREFIX = "engine."
_REQUIRED = (
    "format_version",
    "config_json",
    "drops_json",
    "trajectory_m",
    "explored_box",
    "num_samples",
    "stamp_ns",
)
_BOX_LENGTH = 4

PathLike = str | os.PathLike[str]


class MapData(NamedTuple):
    """The contents of a map file.

    Attributes:
        engine_state: The engine's `state_dict()`: name -> array.
        config: Flat `MapperConfig.to_dict()` of the mapper that saved it.
        trajectory_m: [K, 2] (x, y) path of the samples (m).
        explored_box: (xmin, xmax, ymin, ymax) of the training inputs (m), or None.
        num_samples: Samples the map was trained on.
        stamp_ns: Stamp of the newest sample in the map (ns), 0 if none.
        drops: Drop counts by reason at save time.
    """

    engine_state: dict[str, np.ndarray]
    config: dict[str, Any]
    trajectory_m: np.ndarray
    explored_box: tuple[float, float, float, float] | None
    num_samples: int
    stamp_ns: int
    drops: dict[str, int]


def _arrays(data: MapData, path: Path) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for key, value in data.engine_state.items():
        array = np.asarray(value)
        if array.dtype == object:
            raise MapFileError(f"{path}: engine state {key!r} is an object array (needs pickle)")
        arrays[ENGINE_PREFIX + key] = array
    box = np.full(_BOX_LENGTH, np.nan) if data.explored_box is None else data.explored_box
    arrays.update(
        format_version=np.array(MAP_FORMAT_VERSION, dtype=np.int64),
        config_json=np.array(json.dumps(data.config, sort_keys=True)),
        drops_json=np.array(json.dumps(data.drops, sort_keys=True)),
        trajectory_m=np.asarray(data.trajectory_m, dtype=np.float64).reshape(-1, 2),
        explored_box=np.asarray(box, dtype=np.float64),
        num_samples=np.array(int(data.num_samples), dtype=np.int64),
        stamp_ns=np.array(int(data.stamp_ns), dtype=np.int64),
    )
    return arrays


def save_map(path: PathLike, data: MapData) -> None:
    """Write a map file atomically: a temporary file in the same directory, fsync, rename.

    Either the complete new file is at `path` afterwards, or the old one (if any) is
    untouched. Missing parent directories are created.

    Args:
        path: Destination (".npz" by convention; written to exactly this name).
        data: What to save.

    Raises:
        MapFileError: naming the path and the fault.
    """
    path = Path(path).expanduser()
    arrays = _arrays(data, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise MapFileError(f"{path}: cannot create a file there: {err}") from err
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(err, OSError):
            raise MapFileError(f"{path}: write failed: {err}") from err
        raise
    _fsync_directory(path.parent)


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


def _read_all(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise MapFileError(f"{path}: no such map file")
    faults = (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError)
    try:
        loaded = np.load(path, allow_pickle=False)
    except faults as err:
        raise MapFileError(f"{path}: corrupt or truncated map file: {err}") from err
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise MapFileError(f"{path}: not an .npz archive")
    try:
        with loaded as archive:
            # Reading every member now surfaces truncation and CRC errors here, not later.
            return {key: archive[key] for key in archive.files}
    except faults as err:
        raise MapFileError(f"{path}: corrupt or truncated map file: {err}") from err


def _scalar(arrays: Mapping[str, np.ndarray], key: str, path: Path) -> Any:
    array = arrays[key]
    if array.shape != ():
        raise MapFileError(f"{path}: {key} must be a scalar; has shape {array.shape}")
    return array.item()


def load_map(
    path: PathLike, *, input_dims: int | None = None, target: str | None = None
) -> MapData:
    """Read and check a map file written by `save_map`.

    Args:
        path: The file.
        input_dims: If given, the map must have been built with this many input dimensions.
        target: If given, the map must map this quantity ("norm", "x", "y", "z").

    Returns:
        The map's contents.

    Raises:
        MapFileError: missing, corrupt or truncated file, another format version, missing
            entries, or a map incompatible with `input_dims` / `target`; the message names the
            path and the fault.
    """
    path = Path(path).expanduser()
    arrays = _read_all(path)
    if "format_version" not in arrays:
        raise MapFileError(f"{path}: not a gp_mapper map (no format_version)")
    version = _scalar(arrays, "format_version", path)
    if version != MAP_FORMAT_VERSION:
        raise MapFileError(f"{path}: map format {version}, expected {MAP_FORMAT_VERSION}")
    missing = [key for key in _REQUIRED if key not in arrays]
    if missing:
        raise MapFileError(f"{path}: missing {', '.join(missing)}")
    try:
        config = json.loads(str(_scalar(arrays, "config_json", path)))
        drops = json.loads(str(_scalar(arrays, "drops_json", path)))
    except json.JSONDecodeError as err:
        raise MapFileError(f"{path}: unreadable config or counters: {err}") from err
    if not isinstance(config, dict) or not isinstance(drops, dict):
        raise MapFileError(f"{path}: config and counters must be JSON objects")
    try:
        drop_counts = {str(k): int(v) for k, v in drops.items()}
        num_samples = int(_scalar(arrays, "num_samples", path))
        stamp_ns = int(_scalar(arrays, "stamp_ns", path))
    except (TypeError, ValueError) as err:
        raise MapFileError(f"{path}: unreadable counters: {err}") from err
    if input_dims is not None and config.get("input_dims") != input_dims:
        raise MapFileError(
            f"{path}: map has input_dims={config.get('input_dims')}, this mapper uses {input_dims}"
        )
    if target is not None and config.get("target") != target:
        raise MapFileError(
            f"{path}: map has target={config.get('target')!r}, this mapper maps {target!r}"
        )
    trajectory = arrays["trajectory_m"]
    if trajectory.ndim != 2 or trajectory.shape[1] != 2:
        raise MapFileError(f"{path}: trajectory_m must be [K, 2]; has shape {trajectory.shape}")
    box_array = arrays["explored_box"]
    if box_array.shape != (_BOX_LENGTH,):
        raise MapFileError(f"{path}: explored_box must have 4 values; has {box_array.shape}")
    box = None if np.isnan(box_array).any() else tuple(float(v) for v in box_array)
    engine_state = {
        key[len(ENGINE_PREFIX) :]: value
        for key, value in arrays.items()
        if key.startswith(ENGINE_PREFIX)
    }
    if not engine_state:
        raise MapFileError(f"{path}: no engine state")
    return MapData(
        engine_state=engine_state,
        config=config,
        trajectory_m=trajectory.astype(np.float64),
        explored_box=box,  # type: ignore[arg-type]
        num_samples=num_samples,
        stamp_ns=stamp_ns,
        drops=drop_counts,
    )
