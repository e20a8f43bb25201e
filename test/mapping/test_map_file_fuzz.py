"""Fuzzing the map-file reader: every damaged file is refused with `MapFileError` or read intact.

Starting from a valid saved map, each case damages it (truncation, flipped bytes, random bytes,
forged .npy headers, renamed or missing members, JSON bombs, hostile values) and reads it back.
The only outcomes allowed are a `MapFileError` or a map equal to the original: never another
exception, never `MemoryError` or `RecursionError`. Seeded, and a few seconds in all.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.engine import OnlineSparseGP
from gp_mapper.mapping import MapData, MapFileError, load_map
from gp_mapper.mapping.map_file import read_model

from .map_file_forge import (
    assert_same,
    forged_npy,
    header_text,
    npy_bytes,
    npy_data,
    read_members,
    small_engine,
    with_member,
    write_map,
    write_members,
)

SEED = 20_261_124
TRUNCATIONS = 120
FLIPS = 250
RANDOM_FILES = 40
VALUE_CASES = 60
# Engine fields a state may lack: files from before each existed (jitter convention, model
# name) load with the documented default.
# Fields that older states lack and are read with their default (model: vips; outlier_z: the
# setting's default; pass_noise_variance: 0), so a map without them loads.
OPTIONAL_ENGINE_MEMBERS = frozenset(
    {
        "engine.jitter_relative.npy",
        "engine.carried.jitter_relative.npy",
        "engine.model.npy",
        "engine.outlier_z.npy",
        "engine.pass_noise_variance.npy",
        "engine.theta_memory.npy",
        "engine.local_fit_inducing.npy",
        "engine.fit_max_seconds.npy",
        "engine.theta_fitted.npy",
        "engine.cell_size.npy",  # states from before the cells: every reading
        "engine.cell_columns.npy",
        "engine.cell_direction_columns.npy",  # states from before the sensor offset: none
    }
)

# Headers no map member may have; the data after each is the member's own.
HOSTILE_HEADERS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("huge shape", lambda d: header_text(d, (10**13, 2))),
    ("huge 1-d shape", lambda d: header_text(d, (2**62,))),
    ("negative dimension", lambda d: header_text(d, (-1, 2))),
    ("negative, product positive", lambda d: header_text(d, (-2, -3))),
    ("object dtype", lambda d: header_text("|O", (3,))),
    ("object field", lambda d: header_text([("a", "|O")], (3,))),
    ("void dtype", lambda d: header_text("|V8", (3,))),
    ("datetime dtype", lambda d: header_text("<M8[s]", (3,))),
    ("unknown dtype", lambda d: header_text("<q9", (3,))),
    ("shape not a tuple", lambda d: header_text(d, "3")),
    ("shape of floats", lambda d: header_text(d, (3.0,))),
    ("fortran_order not a bool", lambda d: header_text(d, (3,), "yes")),
    ("missing key", lambda d: f"{{'descr': {d!r}, 'shape': (3,), }}"),
    ("not a dict", lambda d: "[1, 2, 3]"),
    ("not a literal", lambda d: "__import__('os').getcwd()"),
    ("unbalanced", lambda d: "{'descr': " + "(" * 500),
    ("empty", lambda d: ""),
)


@pytest.fixture(scope="module")
def engine() -> OnlineSparseGP:
    return small_engine()


@pytest.fixture
def original(tmp_path: Path, engine: OnlineSparseGP) -> tuple[Path, MapData, bytes]:
    path = write_map(tmp_path / "source.npz", engine)
    return path, load_map(path), path.read_bytes()


def refused_or_intact(path: Path, original: MapData) -> str:
    """Read `path`; "refused" or "intact", and fail on anything else."""
    try:
        loaded = load_map(path)
    except MapFileError as err:
        assert str(path) in str(err), err
        return "refused"
    assert_same(loaded, original)
    return "intact"


def refused_by_file_or_engine(path: Path) -> str:
    """Read `path` through to a model: "refused" or "loaded", and fail on anything else."""
    try:
        read_model(path, device="cpu")
    except MapFileError as err:
        assert str(path) in str(err), err
        return "refused"
    return "loaded"


def test_truncations(original, tmp_path: Path) -> None:
    _, data, raw = original
    rng = np.random.default_rng(SEED)
    offsets = {0, 1, 4, 21, 22, len(raw) // 2, len(raw) - 22, len(raw) - 1}
    offsets |= set(rng.integers(0, len(raw), size=TRUNCATIONS).tolist())
    path = tmp_path / "cut.npz"
    for keep in sorted(offsets):
        path.write_bytes(raw[:keep])
        assert refused_or_intact(path, data) == "refused", keep


def test_byte_flips(original, tmp_path: Path) -> None:
    _, data, raw = original
    rng = np.random.default_rng(SEED + 1)
    path = tmp_path / "flipped.npz"
    outcomes = []
    for _ in range(FLIPS):
        damaged = bytearray(raw)
        where = int(rng.integers(len(raw)))
        damaged[where] ^= int(rng.integers(1, 256))
        path.write_bytes(bytes(damaged))
        outcomes.append(refused_or_intact(path, data))
    # Most bytes are member data under a CRC; a few are zip fields nobody reads (timestamps).
    assert outcomes.count("refused") > FLIPS // 2


def test_random_bytes(original, tmp_path: Path) -> None:
    _, data, raw = original
    rng = np.random.default_rng(SEED + 2)
    path = tmp_path / "noise.npz"
    heads = (b"", b"PK\x03\x04", b"PK\x05\x06", b"\x93NUMPY\x01\x00", raw[:64])
    for k in range(RANDOM_FILES):
        size = int(rng.integers(0, 4096))
        path.write_bytes(heads[k % len(heads)] + rng.bytes(size))
        assert refused_or_intact(path, data) == "refused"
    # A valid archive of the right members, each filled with noise.
    members = read_members(original[0])
    write_members(path, [(name, rng.bytes(len(blob))) for name, blob in members.items()])
    assert refused_or_intact(path, data) == "refused"


@pytest.mark.parametrize(
    ("label", "make_header"), HOSTILE_HEADERS, ids=[h[0] for h in HOSTILE_HEADERS]
)
def test_hostile_npy_headers(original, tmp_path: Path, label: str, make_header) -> None:
    source, data, _ = original
    members = read_members(source)
    path = tmp_path / "forged.npz"
    for name, blob in members.items():
        descr = np.lib.format.read_array_header_1_0(_header_stream(blob))[2].str
        forged = forged_npy(make_header(descr), npy_data(blob))
        write_members(path, with_member(members, name, forged))
        assert refused_or_intact(path, data) == "refused", (label, name)


def test_unreadable_npy_versions_and_lengths(original, tmp_path: Path) -> None:
    source, data, _ = original
    members = read_members(source)
    path = tmp_path / "forged.npz"
    name, blob = "engine.carried.Z.npy", members["engine.carried.Z.npy"]
    cases = [
        b"\x93NUMPY\x03\x00" + blob[8:],  # format 3.0: never written for a map
        b"\x93NUMPY\x09\x09" + blob[8:],
        b"\x93NUMPX" + blob[6:],
        blob[:8] + b"\xff\xff" + blob[10:],  # header length past the member's end
        blob[:8] + b"\x00\x00" + blob[10:],
        forged_npy(header_text("<f8", (3,)), b"\0" * 24, version=(2, 0))[:12] + b"\xff" * 8,
        blob[:-1],  # one data byte short
        blob + b"\0",  # a byte too many
    ]
    for forged in cases:
        write_members(path, with_member(members, name, forged))
        assert refused_or_intact(path, data) == "refused", forged[:16]


def test_members_missing_renamed_or_duplicated(original, tmp_path: Path) -> None:
    source, _, raw = original
    members = read_members(source)
    path = tmp_path / "members.npz"
    for name in members:
        others = [(n, b) for n, b in members.items() if n != name]
        variants = {
            "missing": others,
            "renamed": [*others, ("x" + name, members[name])],
            "not .npy": [*others, (name.removesuffix(".npy"), members[name])],
        }
        for label, layout in variants.items():
            write_members(path, layout)
            outcome = refused_by_file_or_engine(path)
            if name not in OPTIONAL_ENGINE_MEMBERS or label == "not .npy":
                assert outcome == "refused", (label, name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # zipfile: "Duplicate name"
            write_members(path, [*members.items(), (name, members[name])])
        assert refused_by_file_or_engine(path) == "refused", ("duplicated", name)
    # A member renamed in the central directory only: its local header disagrees.
    first = next(iter(members)).encode()
    central = raw.rindex(first)
    path.write_bytes(raw[:central] + b"Z" + raw[central + 1 :])
    assert refused_by_file_or_engine(path) == "refused"


@pytest.mark.parametrize(
    "member",
    [
        "config_json.npy",
        "drops_json.npy",
        "engine.kernel_spec.npy",
        "engine.selector_spec.npy",
        "engine.initial_hyperparameters.npy",
    ],
)
def test_json_bombs(original, tmp_path: Path, member: str) -> None:
    source, _, _ = original
    members = read_members(source)
    path = tmp_path / "bomb.npz"
    bombs = [
        "[" * 200_000 + "]" * 200_000,
        "[" * 300_000,  # never closed
        '{"a":' * 100_000 + "1" + "}" * 100_000,
        '["' + "[" * 100_000 + '"]',  # brackets in a string: shallow, but not the right JSON
        "9" * 100_000,  # an integer past Python's conversion limit
        "1e999999",
        '{"a": ' * 65 + "1" + "}" * 65,  # one level past the limit
        "\ud800",
    ]
    for bomb in bombs:
        write_members(path, with_member(members, member, npy_bytes(np.array(bomb))))
        assert refused_by_file_or_engine(path) == "refused", (member, bomb[:12])


def test_hostile_values(original, tmp_path: Path) -> None:
    """Members replaced by arrays of random shape, dtype and content: refused, or a model."""
    source, _, _ = original
    members = read_members(source)
    rng = np.random.default_rng(SEED + 3)
    names = sorted(members)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -1.0, 1e308, -1e-308])
    path = tmp_path / "values.npz"
    for _ in range(VALUE_CASES):
        name = names[int(rng.integers(len(names)))]
        shape = tuple(int(n) for n in rng.integers(0, 4, size=int(rng.integers(0, 3))))
        kind = int(rng.integers(4))
        if kind == 0:
            value = rng.choice(specials, size=shape)
        elif kind == 1:
            value = rng.integers(-(2**62), 2**62, size=shape)
        elif kind == 2:
            value = np.full(shape, "nope")
        else:
            value = rng.normal(size=shape) > 0
        write_members(path, with_member(members, name, npy_bytes(value)))
        refused_by_file_or_engine(path)  # any other exception fails the test


def test_a_compressed_copy_of_a_valid_map_is_read_intact(original, tmp_path: Path) -> None:
    source, data, _ = original
    path = write_members(
        tmp_path / "deflated.npz", read_members(source).items(), zipfile.ZIP_DEFLATED
    )
    assert refused_or_intact(path, data) == "intact"


def _header_stream(blob: bytes) -> io.BytesIO:
    """An .npy member positioned after its magic, where numpy's header readers start."""
    stream = io.BytesIO(blob)
    np.lib.format.read_magic(stream)
    return stream
