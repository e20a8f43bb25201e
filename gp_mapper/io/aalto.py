"""Reader for the Aalto robot magnetometer recordings (Solin et al. 2018, AaltoML/magnetic-data).

Layout: ``<data_dir>/<sensor>/<seq>-time.csv`` (t [s since the start of the trial]),
``<seq>-loc.csv`` (x, y [m], room frame) and ``<seq>-mag.csv`` (Bx, By, Bz [µT for invensense
and nexus], room frame: the authors compensated the robot orientation). Plain comma-separated
text with NO header row, one sample per row, the three files row-aligned.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import DatasetError

__all__ = ["AALTO_FILE_KINDS", "MICROTESLA_SENSORS", "AaltoSequence", "load_aalto_sequence"]

_LOG = logging.getLogger(__name__)

# Kind of file -> number of columns (upstream README of AaltoML/magnetic-data).
AALTO_FILE_KINDS: dict[str, int] = {"time": 1, "loc": 2, "mag": 3}

# Sensors whose magnetometer columns are in µT; trivisio's are normalised (upstream README).
MICROTESLA_SENSORS: frozenset[str] = frozenset({"invensense", "nexus"})


class AaltoSequence(NamedTuple):
    """One recorded sequence, NaN rows removed.

    Attributes:
        time_s: [N] seconds since the start of the trial, strictly increasing.
        loc_m: [N, 2] position (x, y) in metres, room frame.
        mag_ut: [N, 3] magnetic field in µT, room frame (already orientation-compensated).
    """

    time_s: np.ndarray
    loc_m: np.ndarray
    mag_ut: np.ndarray


def load_aalto_sequence(
    data_dir: str | os.PathLike[str], sensor: str = "invensense", seq: int = 3
) -> AaltoSequence:
    """Load one sequence of one sensor.

    Rows holding a NaN or inf in any of the three files are dropped and counted in a warning.

    Args:
        data_dir: the folder that holds one sub-folder per sensor (``invensense/`` ...).
        sensor: sensor sub-folder name.
        seq: sequence number (1..9 upstream).

    Returns:
        The sequence as float64 arrays.

    Raises:
        DatasetError: a folder or file is missing (the message lists what exists), a file cannot
            be parsed or has the wrong number of columns, the row counts differ, or the time
            column does not increase.
    """
    sequence, dropped = read_aalto_sequence(data_dir, sensor, seq)
    if dropped:
        _LOG.warning(
            "%s/%s sequence %d: dropped %d non-finite rows", data_dir, sensor, seq, dropped
        )
    return sequence


def read_aalto_sequence(
    data_dir: str | os.PathLike[str], sensor: str, seq: int
) -> tuple[AaltoSequence, int]:
    """Like :func:`load_aalto_sequence`, but returns the number of dropped rows instead of logging.

    Returns:
        (sequence, number of rows dropped because some value was NaN or inf).
    """
    sensor_dir = _sensor_dir(Path(data_dir), sensor)
    columns = {
        kind: _read_csv(_csv_path(sensor_dir, seq, kind), n) for kind, n in AALTO_FILE_KINDS.items()
    }
    counts = {kind: arr.shape[0] for kind, arr in columns.items()}
    if len(set(counts.values())) != 1:
        found = ", ".join(f"{seq}-{kind}.csv: {n}" for kind, n in counts.items())
        raise DatasetError(
            f"{sensor_dir}: sequence {seq} files have different row counts ({found})"
        )

    time_s, loc_m, mag_ut = columns["time"][:, 0], columns["loc"], columns["mag"]
    finite = np.isfinite(time_s) & np.isfinite(loc_m).all(axis=1) & np.isfinite(mag_ut).all(axis=1)
    dropped = int(finite.size - np.count_nonzero(finite))
    time_s, loc_m, mag_ut = time_s[finite], loc_m[finite], mag_ut[finite]
    if time_s.size == 0:
        raise DatasetError(f"{sensor_dir}: sequence {seq} has no finite rows")
    if (steps := np.diff(time_s)).size and (bad := np.flatnonzero(steps <= 0.0)).size:
        row = int(bad[0]) + 1
        raise DatasetError(
            f"{_csv_path(sensor_dir, seq, 'time')}: time does not increase at finite row {row} "
            f"({time_s[row - 1]!r} -> {time_s[row]!r})"
        )
    return AaltoSequence(time_s=time_s, loc_m=loc_m, mag_ut=mag_ut), dropped


def available_sequences(sensor_dir: Path) -> list[int]:
    """Sequence numbers that have all three files under ``sensor_dir``, sorted."""
    found: list[int] = []
    for path in sensor_dir.glob("*-time.csv"):
        stem = path.name.removesuffix("-time.csv")
        if stem.isdigit() and all(
            (sensor_dir / f"{stem}-{kind}.csv").is_file() for kind in AALTO_FILE_KINDS
        ):
            found.append(int(stem))
    return sorted(found)


def _sensor_dir(data_dir: Path, sensor: str) -> Path:
    """``DATA_DIR/SENSOR``, or ``DATA_DIR/data/SENSOR``: a clone of AaltoML/magnetic-data
    holds its sensor folders under ``data/``, and a user passes the clone."""
    if not data_dir.is_dir():
        raise DatasetError(f"Aalto data directory {data_dir} does not exist")
    for sensor_dir in (data_dir / sensor, data_dir / "data" / sensor):
        if sensor_dir.is_dir():
            return sensor_dir
    present = sorted(p.name for p in data_dir.iterdir() if p.is_dir())
    raise DatasetError(
        f"no sensor folder {sensor!r} in {data_dir} or in {data_dir / 'data'}; "
        f"{data_dir} holds {present or 'no folders'}"
    )


def _csv_path(sensor_dir: Path, seq: int, kind: str) -> Path:
    path = sensor_dir / f"{seq}-{kind}.csv"
    if not path.is_file():
        have = available_sequences(sensor_dir)
        raise DatasetError(
            f"missing {path.name} in {sensor_dir}; complete sequences there: {have or 'none'}"
        )
    return path


def _read_csv(path: Path, ncols: int) -> np.ndarray:
    """Parse a header-less CSV of ``ncols`` float columns into [rows, ncols] float64."""
    if not path.read_bytes().strip():
        raise DatasetError(f"{path}: file is empty")
    try:
        values = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as err:
        raise DatasetError(f"{path}: not a header-less numeric CSV ({err})") from None
    except OSError as err:
        raise DatasetError(f"{path}: cannot read ({err})") from None
    if values.shape[1] != ncols:
        raise DatasetError(f"{path}: expected {ncols} columns, found {values.shape[1]}")
    return values
