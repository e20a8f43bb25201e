"""Building map files by hand for the hostile-file and fuzz tests: raw .npy members, zips."""

from __future__ import annotations

import io
import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gp_mapper.engine import EngineSpec, OnlineSparseGP, build_model
from gp_mapper.mapping import MapData, MapperConfig, save_map

from .synthetic import true_field

NPY_MAGIC = b"\x93NUMPY"
# numpy pads headers so that the data starts on a 64-byte boundary (numpy.lib.format.ARRAY_ALIGN).
NPY_ALIGN = 64


# θ kept fixed: selection and the posterior alone give a complete state (carried factors and
# all) in a fraction of the time of a fit, and the file tests need nothing more.
STATE_ENGINE = EngineSpec(fit_iterations=0, device="cpu")


def small_engine(seed: int = 3) -> OnlineSparseGP:
    """An engine after one update on 150 noisy points of the synthetic field over [0, 4]²."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 4.0, size=(150, 2))
    y = true_field(X) + 0.1 * rng.normal(size=150)
    engine = build_model(STATE_ENGINE, input_dim=2)
    report = engine.update(X, y)
    assert report.accepted, report.reason
    return engine


def map_data(engine: OnlineSparseGP, seed: int = 0) -> MapData:
    """The map a pipeline would save around `engine` (as `MappingPipeline.save` builds it)."""
    rng = np.random.default_rng(seed)
    input_dims = engine.input_dim or 2
    return MapData(
        engine_state=engine.state_dict(),
        config=MapperConfig.from_dict({"input_dims": input_dims}).to_dict(),
        trajectory_m=rng.uniform(0.0, 4.0, size=(25, 2)),
        explored_box=(0.0, 4.0, 0.0, 4.0),
        num_samples=150,
        stamp_ns=1_700_000_000_000_000_000,
        drops={"nan": 1, "duplicate": 3},
    )


def assert_same(a: MapData, b: MapData) -> None:
    """Two maps are equal member by member, dtypes included."""
    assert a.engine_state.keys() == b.engine_state.keys()
    for key in a.engine_state:
        np.testing.assert_array_equal(a.engine_state[key], b.engine_state[key])
        assert a.engine_state[key].dtype == b.engine_state[key].dtype
    assert a.config == b.config and a.drops == b.drops
    np.testing.assert_array_equal(a.trajectory_m, b.trajectory_m)
    assert (a.explored_box, a.num_samples, a.stamp_ns) == (
        b.explored_box,
        b.num_samples,
        b.stamp_ns,
    )


def write_map(path: Path, engine: OnlineSparseGP) -> Path:
    save_map(path, map_data(engine))
    return path


def npy_bytes(array: np.ndarray) -> bytes:
    """`array` as an .npy member, exactly as np.savez writes it."""
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asanyarray(array), allow_pickle=False)
    return buffer.getvalue()


def forged_npy(header: str, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    """An .npy member with a header of our choosing (any text, checked by nobody here)."""
    length_format = "<H" if version[0] == 1 else "<I"
    prefix = len(NPY_MAGIC) + 2 + struct.calcsize(length_format)
    text = header.encode("latin-1")
    text += b" " * (-(prefix + len(text) + 1) % NPY_ALIGN) + b"\n"  # numpy pads before "\n"
    return NPY_MAGIC + bytes(version) + struct.pack(length_format, len(text)) + text + data


def header_text(descr: object, shape: object, fortran_order: object = False) -> str:
    return f"{{'descr': {descr!r}, 'fortran_order': {fortran_order!r}, 'shape': {shape!r}, }}"


def npy_data(member: bytes) -> bytes:
    """The data part of an .npy member written by numpy (format 1.0)."""
    (header_bytes,) = struct.unpack("<H", member[8:10])
    return member[10 + header_bytes :]


def read_members(path: Path) -> dict[str, bytes]:
    """Raw member bytes by archive name ("config_json.npy", ...), in archive order."""
    with zipfile.ZipFile(path) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


def write_members(
    path: Path,
    members: Iterable[tuple[str, bytes]],
    compression: int = zipfile.ZIP_STORED,
) -> Path:
    """A zip of the given (name, bytes) members; duplicate names are written as given."""
    with zipfile.ZipFile(path, "w", compression=compression) as archive:
        for name, raw in members:
            archive.writestr(name, raw)
    return path


def with_member(members: dict[str, bytes], name: str, raw: bytes) -> list[tuple[str, bytes]]:
    """`members` with one member replaced (or added at the end)."""
    return list({**members, name: raw}.items())
