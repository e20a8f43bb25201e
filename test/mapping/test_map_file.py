from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.mapping import (
    MAP_FORMAT_VERSION,
    MapData,
    MapFileError,
    MapperConfig,
    MappingPipeline,
    load_map,
    map_file,
    save_map,
)
from gp_mapper.mapping.map_file import clean_stale_temporaries, read_model

from .map_file_forge import assert_same, small_engine


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
    with pytest.raises(MapFileError, match=r"engine\.obj: dtype '\|O' is refused"):
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


def test_the_model_named_in_the_state_must_be_the_one_expected(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())  # no "model" entry: a file from before models had names
    assert load_map(path, expected_model="vips").engine_state.keys() == {
        "Z",
        "num_updates",
        "kernel",
    }
    named = make_data()._replace(
        engine_state={**make_data().engine_state, "model": np.array("exact")}
    )
    save_map(path, named)
    assert load_map(path, expected_model="exact").engine_state["model"] == "exact"
    message = f"map file {path} holds an exact model; this mapper runs vips"
    with pytest.raises(MapFileError, match=f"^{re.escape(message)}$"):
        load_map(path, expected_model="vips")
    save_map(path, make_data())
    with pytest.raises(MapFileError, match=r"holds a vips model; this mapper runs exact"):
        load_map(path, expected_model="exact")


def test_a_saved_pipeline_map_reads_back_as_a_model(
    tmp_path: Path, fast_config: MapperConfig
) -> None:
    engine_2d = small_engine()
    path = tmp_path / "map_state.npz"
    MappingPipeline(fast_config, model=engine_2d, background=False).save(path)
    with np.load(path, allow_pickle=False) as archive:
        assert "engine.carried.L" in archive.files  # the layout README readers meet
    model = read_model(path, device="cpu")
    Xs = np.random.default_rng(4).uniform(0.0, 4.0, size=(30, 2))
    torch.testing.assert_close(model.predict(Xs), engine_2d.predict(Xs), rtol=1e-12, atol=1e-12)
    assert model.state_dict().keys() == engine_2d.state_dict().keys()


def test_read_model_refuses_what_load_map_refuses(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(MapFileError, match=r"map\.npz: corrupt or truncated"):
        read_model(path, device="cpu")
    save_map(path, make_data())  # an engine state no model can be rebuilt from
    with pytest.raises(MapFileError, match=r"map\.npz: the engine refused the saved state"):
        read_model(path, device="cpu")


def test_files_over_the_size_limits_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    size = path.stat().st_size
    monkeypatch.setattr(map_file, "MAX_MAP_BYTES", size - 1)
    with pytest.raises(MapFileError, match=rf"{size} bytes, more than the {size - 1}"):
        load_map(path)
    monkeypatch.setattr(map_file, "MAX_MAP_BYTES", size)
    load_map(path)  # members are smaller than the file they are stored in


def test_json_depth_counts_brackets_outside_strings_only() -> None:
    depth = map_file._json_depth
    assert depth("") == 0 and depth('"[[[["') == 0 and depth("{}") == 1
    assert depth('{"a": [1, {"b": "]]]"}], "c": "\\"[["}') == 3
    assert depth("[" * 10) == 10  # unclosed: counted, never parsed


def test_scalars_must_have_the_right_type(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    _rewrite(path, format_version=np.array(1.0))
    with pytest.raises(MapFileError, match="format_version must be a scalar of kind 'iu'"):
        load_map(path)
    save_map(path, make_data())
    _rewrite(path, num_samples=np.array("1234"))
    with pytest.raises(MapFileError, match="num_samples must be a scalar"):
        load_map(path)
    save_map(path, make_data())
    _rewrite(path, explored_box=np.array([0.0, np.nan, 1.0, 2.0]))
    with pytest.raises(MapFileError, match="explored_box mixes numbers with NaN"):
        load_map(path)
    save_map(path, make_data())
    _rewrite(path, trajectory_m=np.array([[0.0, np.inf]]))
    with pytest.raises(MapFileError, match="trajectory_m has non-finite values"):
        load_map(path)


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_stale_temporaries_of_interrupted_saves_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "map.npz"
    save_map(path, make_data())
    stale = tmp_path / ".map.npz.k3j_9x0a.tmp"
    fresh = tmp_path / ".map.npz.aaaaaaaa.tmp"  # a save in progress in another process
    other_map = tmp_path / ".other.npz.k3j_9x0a.tmp"
    not_ours = tmp_path / ".map.npz.notes.tmp"
    for file in (stale, fresh, other_map, not_ours):
        file.write_bytes(b"PK half a map")
    for file in (stale, other_map, not_ours):
        _age(file, 2 * map_file.STALE_TEMPORARY_S)
    assert clean_stale_temporaries(path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name, fresh.name, other_map.name, not_ours.name]
    )
    assert_same(load_map(path), make_data())
    _age(fresh, 2 * map_file.STALE_TEMPORARY_S)
    assert clean_stale_temporaries(path) == 1 and not fresh.exists()
    assert clean_stale_temporaries(tmp_path / "nowhere" / "map.npz") == 0


def test_an_interrupted_save_leaves_a_temporary_the_cleaner_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "map.npz"

    def killed(handle, **arrays) -> None:
        handle.write(b"PK")
        # A killed process runs no cleanup: keep the file, as SIGKILL would.
        monkeypatch.setattr(map_file.Path, "unlink", lambda self, missing_ok=False: None)
        raise KeyboardInterrupt

    monkeypatch.setattr(map_file.np, "savez", killed)
    with pytest.raises(KeyboardInterrupt):
        save_map(path, make_data())
    monkeypatch.undo()
    (leftover,) = tmp_path.iterdir()
    assert clean_stale_temporaries(path) == 0  # too young: it could be a save in progress
    _age(leftover, 2 * map_file.STALE_TEMPORARY_S)
    assert clean_stale_temporaries(path) == 1 and not any(tmp_path.iterdir())
