from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gp_mapper.mapping import (
    MAP_FORMAT_VERSION,
    MapData,
    MapFileError,
    MapperConfig,
    load_map,
    map_file,
    save_map,
)


def make_data(input_dims: int = 2, seed: int = 0) -> MapData:
    rng = np.random.default_rng(seed)
    return MapData(
        engine_state={
            "Z": rng.normal(size=(7, input_dims)),
            "num_updates": np.array(3),
            "kernel": np.array("matern52"),
        },
        config=MapperConfig.from_dict({"input_dims": input_dims}).to_dict(),
        trajectory_m=rng.normal(size=(11, 2)),
        explored_box=(-1.0, 2.0, -3.0, 4.0),
        num_samples=1234,
        stamp_ns=1_700_000_000_123_456_789,
        drops={"nan": 2, "duplicate": 40},
    )


def assert_same(a: MapData, b: MapData) -> None:
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


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "maps" / "room.npz"  # the directory is created
    data = make_data()
    save_map(path, data)
    assert_same(load_map(path, input_dims=2, target="norm"), data)
    assert [p.name for p in path.parent.iterdir()] == ["room.npz"]  # no temporary left over


def test_round_trip_without_an_explored_box(tmp_path: Path) -> None:
    data = make_data()._replace(explored_box=None, trajectory_m=np.zeros((0, 2)))
    save_map(tmp_path / "m.npz", data)
    loaded = load_map(tmp_path / "m.npz")
    assert loaded.explored_box is None and loaded.trajectory_m.shape == (0, 2)


def test_a_failed_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "map.npz"
    old = make_data(seed=1)
    save_map(path, old)

    def half_written(handle, **arrays) -> None:
        handle.write(b"PK\x03\x04 half a zip")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(map_file.np, "savez", half_written)
    with pytest.raises(MapFileError, match=r"map\.npz: write failed: .*No space left"):
        save_map(path, make_data(seed=2))
    monkeypatch.undo()
    assert_same(load_map(path), old)
    assert [p.name for p in tmp_path.iterdir()] == ["map.npz"]


def test_an_interrupted_write_leaves_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "map.npz"
    old = make_data(seed=1)
    save_map(path, old)

    def interrupted(handle, **arrays) -> None:
        handle.write(b"PK")
        raise KeyboardInterrupt

    monkeypatch.setattr(map_file.np, "savez", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_map(path, make_data(seed=2))
    monkeypatch.undo()
    assert_same(load_map(path), old)
    assert [p.name for p in tmp_path.iterdir()] == ["map.npz"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MapFileError, match=r"nothere\.npz: no such map file"):
        load_map(tmp_path / "nothere.npz")


def test_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    raw = path.read_bytes()
    for keep in (len(raw) // 2, len(raw) - 30, 10):
        path.write_bytes(raw[:keep])
        with pytest.raises(MapFileError, match=r"map\.npz: corrupt or truncated"):
            load_map(path)


def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    raw = bytearray(path.read_bytes())
    # Flip bytes inside the stored arrays: the zip CRC check must catch it.
    middle = len(raw) // 3
    raw[middle : middle + 64] = bytes(b ^ 0xFF for b in raw[middle : middle + 64])
    path.write_bytes(bytes(raw))
    with pytest.raises(MapFileError, match=r"map\.npz"):
        load_map(path)
    path.write_bytes(b"this is not a map at all")
    with pytest.raises(MapFileError, match=r"map\.npz: corrupt or truncated"):
        load_map(path)


def test_plain_npy_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "array.npz"
    with path.open("wb") as handle:
        np.save(handle, np.zeros(3))
    with pytest.raises(MapFileError, match=r"not an \.npz archive"):
        load_map(path)


def _rewrite(path: Path, **changes: np.ndarray) -> None:
    with np.load(path, allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del arrays[key]
    np.savez(path, **arrays)


def test_wrong_version(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    _rewrite(path, format_version=np.array(MAP_FORMAT_VERSION + 1))
    with pytest.raises(MapFileError, match=f"map format {MAP_FORMAT_VERSION + 1}, expected"):
        load_map(path)
    _rewrite(path, format_version=None)
    with pytest.raises(MapFileError, match="not a gp_mapper map"):
        load_map(path)


def test_missing_entries_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    _rewrite(path, trajectory_m=None)
    with pytest.raises(MapFileError, match="missing trajectory_m"):
        load_map(path)
    save_map(path, make_data())
    _rewrite(path, config_json=np.array("{not json"))
    with pytest.raises(MapFileError, match="unreadable config"):
        load_map(path)
    save_map(path, make_data()._replace(engine_state={}))
    with pytest.raises(MapFileError, match="no engine state"):
        load_map(path)


def test_incompatible_map_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "map3d.npz"
    save_map(path, make_data(input_dims=3))
    with pytest.raises(MapFileError, match="input_dims=3, this mapper uses 2"):
        load_map(path, input_dims=2)
    with pytest.raises(MapFileError, match="target='norm', this mapper maps 'x'"):
        load_map(path, target="x")
    assert load_map(path, input_dims=3).config["input_dims"] == 3


def test_pickle_is_never_needed_nor_accepted(tmp_path: Path) -> None:
    data = make_data()
    bad = data._replace(engine_state={"obj": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(MapFileError, match="object array"):
        save_map(tmp_path / "m.npz", bad)
    path = tmp_path / "pickled.npz"
    save_map(path, data)
    _rewrite(path, **{"engine.obj": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(MapFileError, match="corrupt or truncated"):
        load_map(path)


def test_the_config_is_stored_as_json(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    with np.load(path, allow_pickle=False) as archive:
        config = json.loads(str(archive["config_json"]))
    assert MapperConfig.from_dict(config).input_dims == 2


def test_unwritable_destination(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(MapFileError, match="cannot create a file there"):
        save_map(blocker / "map.npz", make_data())
