"""Saving and loading a map: one versioned `.npz`, written atomically, read without trust.

A map file holds everything needed to resume mapping without the raw data: the engine's
`state_dict()` (keys prefixed "engine."), the config it was built with (JSON), the trajectory,
the explored box and the counters. `load_map` reads it member by member with every size
bounded before allocation, so a corrupt or hostile file raises `MapFileError` and nothing else;
`read_model` turns a file into the model it holds.
"""

from __future__ import annotations

import io
import json
import logging
import math
import os
import re
import stat
import struct
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.lib import format as npy_format

from gp_mapper.engine import StateError, model_from_state, saved_model_name
from gp_mapper.mapping.atomic import TemporaryFileError, atomic_write, temporary_pattern
from gp_mapper.mapping.errors import MapFileError

if TYPE_CHECKING:
    from gp_mapper.engine import Model

logger = logging.getLogger(__name__)

# Bump when the layout changes; files of another version are refused, not guessed at.
MAP_FORMAT_VERSION = 1

# Largest map file, and largest sum of its members' declared sizes (bytes). The engine's three
# M x M float64 factors at M = 10 000 (five times the default max_inducing) take 2.4 GB; a
# file beyond this is not a map this mapper could fit, and it must not be read into memory.
MAX_MAP_BYTES = 4 * 2**30
# Members of a map: 7 of its own plus about 30 of a model's state, per tile of a tiled map;
# 500 tiles (a 350 m square of 16 m tiles) with room to grow, and a bound on the work a forged
# central directory can ask for.
MAX_MEMBERS = 20_000
# numpy's own bound on an .npy header (`numpy.lib.format`, `max_header_size`); ours are ~128.
MAX_NPY_HEADER_BYTES = 10_000
# Largest text member (bytes; numpy stores 4 per character): the config is ~3 kB, a kernel
# spec well under 1 kB. Bounds the time and memory of the JSON parser.
MAX_TEXT_BYTES = 4 * 2**20
# Deepest JSON nesting accepted. Our config is flat and a kernel spec of sums of products is a
# few levels; Python's parser recurses per level, so a 200 000-deep list must stop here.
MAX_JSON_DEPTH = 64
# Age (s) after which a temporary of an interrupted save is removed: far longer than a save
# takes (a 54 MB map writes in well under a second), so a save in progress is never cut short.
STALE_TEMPORARY_S = 60.0

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

# .npy layout (numpy.lib.format): 6 magic bytes and 2 version bytes, then a little-endian
# header length (2 bytes in format 1.0, 4 in 2.0), then the header. np.savez writes 1.0, or
# 2.0 for a header over 64 kB; 3.0 only for field names beyond latin-1, which a map never has.
_NPY_MAGIC = npy_format.MAGIC_PREFIX
_NPY_PREFIX_BYTES = npy_format.MAGIC_LEN
_NPY_SUFFIX = ".npy"
_NPY_HEADER_READERS: dict[tuple[int, int], tuple[str, Callable[..., Any]]] = {
    (1, 0): ("<H", npy_format.read_array_header_1_0),
    (2, 0): ("<I", npy_format.read_array_header_2_0),
}
# Booleans, integers, floats, complex and text: everything a map holds. Objects need pickle;
# structured, datetime and void types are never written.
_ALLOWED_KINDS = "biufcUS"
_TEXT_KINDS = "US"
_INTEGER_KINDS = "iu"

_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_OPEN = np.frombuffer(b"[{", dtype=np.uint8)
_JSON_CLOSE = np.frombuffer(b"]}", dtype=np.uint8)


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

    @classmethod
    def of(
        cls,
        engine_state: Mapping[str, Any],
        config: Mapping[str, Any],
        trajectory_m: np.ndarray,
        explored_box: tuple[float, float, float, float] | None,
        num_samples: int,
        stamp_ns: int,
        drops: Mapping[str, int],
    ) -> MapData:
        """The one constructor: a live map's, a fit's and a file's contents all come in here,
        in the types a map file holds (the path [K, 2] in float64, counts as ints)."""
        return cls(
            dict(engine_state),
            dict(config),
            np.asarray(trajectory_m, dtype=np.float64).reshape(-1, 2),
            explored_box,
            int(num_samples),
            int(stamp_ns),
            dict(drops),
        )


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
        atomic_write(path, lambda handle: np.savez(handle, **arrays))
    except TemporaryFileError as err:
        raise MapFileError(f"{path}: cannot create a file there: {err}") from err
    except OSError as err:
        raise MapFileError(f"{path}: write failed: {err}") from err


def _read_members(path: Path) -> dict[str, np.ndarray]:
    """Every member of the archive, each bounded by its header before anything is allocated.

    Raises:
        MapFileError: not a readable archive, a member over a limit or of a refused type.
    """
    if not path.is_file():
        raise MapFileError(f"{path}: no such map file")
    size = path.stat().st_size
    if size > MAX_MAP_BYTES:
        raise MapFileError(f"{path}: {size} bytes, more than the {MAX_MAP_BYTES} a map may hold")
    with path.open("rb") as handle:
        if handle.read(len(_NPY_MAGIC)) == _NPY_MAGIC:
            raise MapFileError(f"{path}: not an .npz archive (a single .npy array)")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise MapFileError(f"{path}: corrupt or truncated map file: {err}") from err
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise MapFileError(f"{path}: {len(infos)} members, more than {MAX_MEMBERS}")
        declared = sum(info.file_size for info in infos)
        if declared > MAX_MAP_BYTES:
            raise MapFileError(
                f"{path}: members declare {declared} bytes, more than {MAX_MAP_BYTES}"
            )
        arrays: dict[str, np.ndarray] = {}
        for info in infos:
            if not info.filename.endswith(_NPY_SUFFIX):
                raise MapFileError(f"{path}: member {info.filename!r} is not an .npy array")
            key = info.filename.removesuffix(_NPY_SUFFIX)
            if key in arrays:
                raise MapFileError(f"{path}: member {info.filename!r} appears twice")
            with archive.open(info) as stream:
                arrays[key] = _read_npy(stream, info.file_size, f"{path}: {key}")
    return arrays


def _read_exact(stream: IO[bytes], size: int, where: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise MapFileError(f"{where}: truncated ({len(data)} of {size} bytes)")
    return data


def _read_npy(stream: IO[bytes], member_bytes: int, where: str) -> np.ndarray:
    """One .npy member: its header parsed from a bounded read, its data sized by the header.

    Args:
        stream: The member, positioned at its start.
        member_bytes: Its uncompressed size as the archive declares it.
        where: "path: key", for messages.

    Raises:
        MapFileError: a bad or oversized header, a refused dtype, a shape that disagrees with
            the member's size, or trailing bytes.
    """
    magic = _read_exact(stream, _NPY_PREFIX_BYTES, where)
    version = npy_format.read_magic(io.BytesIO(magic))
    if version not in _NPY_HEADER_READERS:
        raise MapFileError(f"{where}: .npy format {version} is not one a map is written in")
    length_format, read_header = _NPY_HEADER_READERS[version]
    length_field = _read_exact(stream, struct.calcsize(length_format), where)
    (header_bytes,) = struct.unpack(length_format, length_field)
    if header_bytes > MAX_NPY_HEADER_BYTES:
        raise MapFileError(f"{where}: .npy header of {header_bytes} bytes")
    header = _read_exact(stream, header_bytes, where)
    shape, fortran_order, dtype = read_header(
        io.BytesIO(length_field + header), max_header_size=MAX_NPY_HEADER_BYTES
    )
    if dtype.hasobject or dtype.kind not in _ALLOWED_KINDS or dtype.itemsize == 0:
        raise MapFileError(f"{where}: dtype {dtype.str!r} is refused (only plain numbers, text)")
    if any(dim < 0 for dim in shape):
        raise MapFileError(f"{where}: negative dimension in shape {shape}")
    # Python integers: a hostile shape cannot overflow the product.
    data_bytes = math.prod(shape) * dtype.itemsize
    limit = MAX_TEXT_BYTES if dtype.kind in _TEXT_KINDS else MAX_MAP_BYTES
    if data_bytes > limit:
        raise MapFileError(f"{where}: shape {shape} of {dtype.str} needs {data_bytes} bytes")
    stored = member_bytes - (_NPY_PREFIX_BYTES + len(length_field) + header_bytes)
    if data_bytes != stored:
        raise MapFileError(f"{where}: shape {shape} needs {data_bytes} bytes; {stored} stored")
    data = _read_exact(stream, data_bytes, where)
    if stream.read(1):
        raise MapFileError(f"{where}: bytes after the array")
    flat = np.frombuffer(bytearray(data), dtype=dtype)
    if fortran_order:
        return flat.reshape(shape[::-1]).transpose()
    return flat.reshape(shape)


def _json_depth(text: str) -> int:
    """Deepest nesting of JSON arrays and objects in `text`, without recursing.

    Brackets inside string literals do not count; an unterminated literal leaves its brackets
    counted, which can only over-estimate the depth of text that is not valid JSON anyway.
    """
    bare = _JSON_STRING.sub("", text).encode("utf-8", errors="replace")
    codes = np.frombuffer(bare, dtype=np.uint8)
    steps = np.isin(codes, _JSON_OPEN).astype(np.int64) - np.isin(codes, _JSON_CLOSE)
    return int(np.cumsum(steps).max(initial=0))


def _check_text(arrays: Mapping[str, np.ndarray], path: Path) -> None:
    """Refuse text members nested too deep for a recursive parser (config, specs)."""
    for key, array in arrays.items():
        if array.dtype.kind not in _TEXT_KINDS:
            continue
        for item in array.reshape(-1).tolist():
            text = item.decode("latin-1") if isinstance(item, bytes) else str(item)
            if (depth := _json_depth(text)) > MAX_JSON_DEPTH:
                raise MapFileError(
                    f"{path}: {key} nests {depth} levels deep, more than {MAX_JSON_DEPTH}"
                )


def _check_finite(arrays: Mapping[str, np.ndarray], path: Path) -> None:
    """Engine arrays and the trajectory hold numbers only; NaN or inf there poisons a map."""
    for key, array in arrays.items():
        checked = key.startswith(ENGINE_PREFIX) or key == "trajectory_m"
        if checked and array.dtype.kind in "fc" and not np.isfinite(array).all():
            raise MapFileError(f"{path}: {key} has non-finite values")


def _scalar(arrays: Mapping[str, np.ndarray], key: str, path: Path, kinds: str) -> Any:
    array = arrays[key]
    if array.shape != () or array.dtype.kind not in kinds:
        raise MapFileError(
            f"{path}: {key} must be a scalar of kind {kinds!r}; "
            f"has shape {array.shape}, dtype {array.dtype.str}"
        )
    return array.item()


def load_map(
    path: PathLike,
    *,
    input_dims: int | None = None,
    target: str | None = None,
    expected_model: str | None = None,
) -> MapData:
    """Read and check a map file written by `save_map`; nothing in it is trusted.

    Every member's size is bounded from its header before it is read, text is refused if it
    nests deeper than `MAX_JSON_DEPTH`, numbers must be finite, and any fault of any kind in
    the file ends as a `MapFileError`: a caller that keeps its current map on that error is
    safe against every file.

    Args:
        path: The file.
        input_dims: If given, the map must have been built with this many input dimensions.
        target: If given, the map must map this quantity ("norm", "x", "y", "z").
        expected_model: If given, the engine state must name this model (its "model" entry;
            files from before models had names hold "vips").

    Returns:
        The map's contents.

    Raises:
        MapFileError: missing, corrupt, truncated, oversized or hostile file, another format
            version, missing entries, or a map incompatible with `input_dims`, `target` or
            `expected_model`; the message names the path and the fault.
    """
    path = Path(path).expanduser()
    try:
        return _load(path, input_dims, target, expected_model)
    except MapFileError:
        raise
    except Exception as err:  # any fault of a hostile file must leave the caller's map standing
        raise MapFileError(
            f"{path}: corrupt or truncated map file: {type(err).__name__}: {err}"
        ) from err


def _load(
    path: Path, input_dims: int | None, target: str | None, expected_model: str | None
) -> MapData:
    arrays = _read_members(path)
    if "format_version" not in arrays:
        raise MapFileError(f"{path}: not a gp_mapper map (no format_version)")
    version = _scalar(arrays, "format_version", path, _INTEGER_KINDS)
    if version != MAP_FORMAT_VERSION:
        raise MapFileError(f"{path}: map format {version}, expected {MAP_FORMAT_VERSION}")
    missing = [key for key in _REQUIRED if key not in arrays]
    if missing:
        raise MapFileError(f"{path}: missing {', '.join(missing)}")
    _check_text(arrays, path)
    _check_finite(arrays, path)
    try:
        config = json.loads(_scalar(arrays, "config_json", path, "U"))
        drops = json.loads(_scalar(arrays, "drops_json", path, "U"))
    except ValueError as err:  # JSONDecodeError, or an integer too long to convert
        raise MapFileError(f"{path}: unreadable config or counters: {err}") from err
    if not isinstance(config, dict) or not isinstance(drops, dict):
        raise MapFileError(f"{path}: config and counters must be JSON objects")
    try:
        drop_counts = {str(k): int(v) for k, v in drops.items()}
    except (TypeError, ValueError) as err:
        raise MapFileError(f"{path}: unreadable counters: {err}") from err
    num_samples = int(_scalar(arrays, "num_samples", path, _INTEGER_KINDS))
    stamp_ns = int(_scalar(arrays, "stamp_ns", path, _INTEGER_KINDS))
    if input_dims is not None and config.get("input_dims") != input_dims:
        raise MapFileError(
            f"{path}: map has input_dims={config.get('input_dims')}, this mapper uses {input_dims}"
        )
    if target is not None and config.get("target") != target:
        raise MapFileError(
            f"{path}: map has target={config.get('target')!r}, this mapper maps {target!r}"
        )
    trajectory = arrays["trajectory_m"]
    if trajectory.ndim != 2 or trajectory.shape[1] != 2 or trajectory.dtype.kind != "f":
        raise MapFileError(
            f"{path}: trajectory_m must be [K, 2] floats; has shape {trajectory.shape}, "
            f"dtype {trajectory.dtype.str}"
        )
    box = _explored_box(arrays["explored_box"], path)
    engine_state = {
        key[len(ENGINE_PREFIX) :]: value
        for key, value in arrays.items()
        if key.startswith(ENGINE_PREFIX)
    }
    if not engine_state:
        raise MapFileError(f"{path}: no engine state")
    model = _model_name(engine_state, path)
    if expected_model is not None and model != expected_model:
        raise MapFileError(
            f"map file {path} holds {_article(model)} {model} model; "
            f"this mapper runs {expected_model}"
        )
    return MapData.of(engine_state, config, trajectory, box, num_samples, stamp_ns, drop_counts)


def _explored_box(array: np.ndarray, path: Path) -> tuple[float, float, float, float] | None:
    """The box, or None where `save_map` wrote NaN for "no box"; anything in between is refused."""
    if array.shape != (_BOX_LENGTH,) or array.dtype.kind != "f":
        raise MapFileError(
            f"{path}: explored_box must have 4 floats; has shape {array.shape}, "
            f"dtype {array.dtype.str}"
        )
    if np.isnan(array).all():
        return None
    if not np.isfinite(array).all():
        raise MapFileError(f"{path}: explored_box mixes numbers with NaN or inf: {array}")
    xmin, xmax, ymin, ymax = (float(v) for v in array)
    return xmin, xmax, ymin, ymax


def _model_name(engine_state: Mapping[str, np.ndarray], path: Path) -> str:
    try:
        return saved_model_name(engine_state)
    except StateError as err:
        raise MapFileError(f"{path}: {err}") from err


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def model_from_map(
    data: MapData, path: PathLike, *, device: str = "auto", expected_model: str | None = None
) -> Model:
    """Build the model a loaded map file holds.

    Args:
        data: What `load_map` returned.
        path: The file it came from, for messages.
        device: "auto", "cpu", "cuda" or "cuda:N".
        expected_model: If given, the state must be this model's.

    Returns:
        The model, ready to predict (and, if it streams, to continue mapping).

    Raises:
        MapFileError: the engine refused the state (a malformed or inconsistent field, a
            carried factor that is not a Cholesky factor); the message names the path.
    """
    try:
        # The registry picks the model class by the state's "model" entry.
        return model_from_state(data.engine_state, device=device, expected=expected_model)
    except Exception as err:  # StateError, or anything else a hostile state triggers
        raise MapFileError(f"{path}: the engine refused the saved state: {err}") from err


def read_model(path: PathLike, *, device: str = "auto", expected_model: str | None = None) -> Model:
    """Load the model in a map file: the one way to use a saved map from Python.

    Example:
        >>> from gp_mapper.mapping.map_file import read_model
        >>> model = read_model("map_state.npz", device="cpu")
        >>> mean, var = model.predict(Xs)  # Xs [S, D] in m -> latent mean, variance [S]

    Args:
        path: A file written by `save_map` (the node's ~/save_map, `gp-mapper replay`).
        device: "auto", "cpu", "cuda" or "cuda:N".
        expected_model: If given, the file must hold this model.

    Returns:
        The model the file holds (`OnlineSparseGP` for maps the node writes).

    Raises:
        MapFileError: any fault of the file or of the state in it, naming the path.
    """
    path = Path(path).expanduser()
    return model_from_map(load_map(path, expected_model=expected_model), path, device=device)


def clean_stale_temporaries(path: PathLike, *, grace_s: float = STALE_TEMPORARY_S) -> int:
    """Remove the temporary files interrupted saves of `path` left in its directory.

    Only files named as `save_map` names its temporaries for this very path, and untouched for
    `grace_s`, are removed, so a save in progress in another process is not cut short.

    Args:
        path: The map file (it need not exist).
        grace_s: Minimum age (s, by modification time) of a temporary that is removed.

    Returns:
        How many files were removed.
    """
    path = Path(path).expanduser()
    pattern = temporary_pattern(path)
    try:
        candidates = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:  # no directory yet: nothing was ever saved there
        return 0
    now = time.time()
    removed = 0
    for candidate in candidates:
        try:
            status = candidate.lstat()
            if not stat.S_ISREG(status.st_mode) or now - status.st_mtime < grace_s:
                continue
            candidate.unlink()
        except FileNotFoundError:  # another process cleaned it up first
            continue
        except OSError as err:  # not ours to remove: leave it
            logger.warning("cannot remove stale temporary %s: %s", candidate, err)
            continue
        removed += 1
        logger.info("removed %s, left by an interrupted save", candidate)
    return removed
