"""Hostile map files: each once crashed the node or published NaN."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.engine import OnlineSparseGP, StateError
from gp_mapper.mapping import MapFileError, load_map, save_map
from gp_mapper.mapping.map_file import (
    MAX_JSON_DEPTH,
    MAX_MEMBERS,
    MAX_TEXT_BYTES,
    read_model,
)

from .map_file_forge import (
    forged_npy,
    header_text,
    map_data,
    npy_bytes,
    npy_data,
    read_members,
    small_engine,
    with_member,
    write_map,
    write_members,
)

# The depth that raised RecursionError out of json.loads and took the node down.
BOMB_DEPTH = 200_000
# The shape whose allocation raised MemoryError: 1.6e14 bytes of float64.
HUGE_SHAPE = (10**13, 2)


@pytest.fixture(scope="module")
def engine() -> OnlineSparseGP:
    return small_engine()


@pytest.fixture
def map_path(tmp_path: Path, engine: OnlineSparseGP) -> Path:
    return write_map(tmp_path / "map.npz", engine)


def replace_member(path: Path, name: str, raw: bytes) -> Path:
    return write_members(path, with_member(read_members(path), name, raw))


def deep_list(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("member", ["config_json.npy", "drops_json.npy"])
def test_deeply_nested_json_is_refused(map_path: Path, member: str) -> None:
    replace_member(map_path, member, npy_bytes(np.array(deep_list(BOMB_DEPTH))))
    with pytest.raises(MapFileError, match=rf"map\.npz: {member[:-4]} nests {BOMB_DEPTH} levels"):
        load_map(map_path)


@pytest.mark.parametrize(
    "member", ["engine.kernel_spec.npy", "engine.selector_spec.npy", "engine.stats.npy"]
)
def test_deeply_nested_engine_text_is_refused(map_path: Path, member: str) -> None:
    replace_member(map_path, member, npy_bytes(np.array(deep_list(BOMB_DEPTH))))
    with pytest.raises(MapFileError, match=f"nests {BOMB_DEPTH} levels"):
        read_model(map_path, device="cpu")
    depth = BOMB_DEPTH // 2  # five characters a level: under the text limit
    replace_member(map_path, member, npy_bytes(np.array('{"a":' * depth + "1" + "}" * depth)))
    with pytest.raises(MapFileError, match=f"nests {depth} levels"):
        read_model(map_path, device="cpu")


def test_nesting_up_to_the_limit_is_read_and_brackets_in_strings_do_not_count(
    tmp_path: Path, engine: OnlineSparseGP
) -> None:
    config = map_data(engine).config
    data = map_data(engine)._replace(
        config={**config, "note": "[" * 1000, "nested": json.loads(deep_list(MAX_JSON_DEPTH - 1))}
    )
    save_map(tmp_path / "deep.npz", data)
    assert load_map(tmp_path / "deep.npz").config == data.config
    save_map(tmp_path / "deeper.npz", data._replace(config={"x": json.loads(deep_list(64))}))
    with pytest.raises(MapFileError, match=f"nests {MAX_JSON_DEPTH + 1} levels"):
        load_map(tmp_path / "deeper.npz")


def test_text_over_its_limit_is_refused_before_it_is_read(map_path: Path) -> None:
    characters = MAX_TEXT_BYTES // 4 + 1  # numpy stores text as UCS-4
    header = header_text(f"<U{characters}", ())
    replace_member(map_path, "config_json.npy", forged_npy(header, b"x" * 16))
    with pytest.raises(MapFileError, match=r"config_json: shape \(\) of <U\d+ needs"):
        load_map(map_path)


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_member_declaring_a_huge_shape_is_refused_before_allocation(
    map_path: Path, compression: int
) -> None:
    members = read_members(map_path)
    data = npy_data(members["trajectory_m.npy"])
    forged = forged_npy(header_text("<f8", HUGE_SHAPE), data)
    write_members(map_path, with_member(members, "trajectory_m.npy", forged), compression)
    with pytest.raises(MapFileError, match=r"trajectory_m: shape \(10000000000000, 2\) of <f8"):
        load_map(map_path)


def test_a_shape_that_disagrees_with_the_stored_bytes_is_refused(map_path: Path) -> None:
    members = read_members(map_path)
    data = npy_data(members["trajectory_m.npy"])  # 25 x 2 float64
    forged = forged_npy(header_text("<f8", (26, 2)), data)
    replace_member(map_path, "trajectory_m.npy", forged)
    with pytest.raises(MapFileError, match=r"shape \(26, 2\) needs 416 bytes; 400 stored"):
        load_map(map_path)


@pytest.mark.parametrize(
    ("descr", "shape", "match"),
    [
        ("|O", (3,), r"dtype '\|O' is refused"),
        ([("a", "|O")], (3,), "is refused"),
        ("<M8[s]", (3,), "is refused"),
        ("<f8", (-1, 2), "negative dimension"),
        ("<f8", (2**62, 2**62), "needs"),
        ("not a dtype", (3,), "corrupt or truncated"),
    ],
)
def test_refused_headers(map_path: Path, descr: object, shape: tuple, match: str) -> None:
    replace_member(
        map_path, "engine.carried.Z.npy", forged_npy(header_text(descr, shape), b"\0" * 24)
    )
    with pytest.raises(MapFileError, match=match):
        load_map(map_path)


def test_an_oversized_header_is_refused_before_it_is_read(map_path: Path) -> None:
    forged = forged_npy(header_text("<f8", (3,)) + " " * 20_000, b"\0" * 24, version=(2, 0))
    replace_member(map_path, "engine.carried.Z.npy", forged)
    with pytest.raises(MapFileError, match=r"\.npy header of \d+ bytes"):
        load_map(map_path)


def test_too_many_members_or_foreign_members_are_refused(map_path: Path) -> None:
    members = read_members(map_path)
    extra = [(f"engine.extra{k}.npy", npy_bytes(np.zeros(1))) for k in range(MAX_MEMBERS)]
    write_members(map_path, [*members.items(), *extra])
    with pytest.raises(MapFileError, match=f"more than {MAX_MEMBERS}"):
        load_map(map_path)
    write_members(map_path, [*members.items(), ("notes.txt", b"hello")])
    with pytest.raises(MapFileError, match=r"'notes\.txt' is not an \.npy array"):
        load_map(map_path)


@pytest.mark.parametrize("name", ["carried.L", "carried.L_D"])
def test_an_all_zero_carried_factor_is_refused_by_the_engine(
    engine: OnlineSparseGP, name: str
) -> None:
    state = engine.state_dict()
    state[name] = np.zeros_like(state[name])
    with pytest.raises(StateError, match=f"{name}' has a diagonal entry that is not positive"):
        OnlineSparseGP.from_state(state, device="cpu")


@pytest.mark.parametrize(
    ("name", "corrupt", "match"),
    [
        ("carried.L", lambda L: -L, "not positive"),
        ("carried.L", lambda L: L + np.triu(np.ones_like(L), 1), "not lower triangular"),
        ("carried.L_D", lambda L: L.T.copy(), "not lower triangular"),
    ],
)
def test_carried_factors_that_no_cholesky_produces_are_refused(
    engine: OnlineSparseGP, name: str, corrupt, match: str
) -> None:
    state = engine.state_dict()
    state[name] = corrupt(state[name])
    with pytest.raises(StateError, match=match):
        OnlineSparseGP.from_state(state, device="cpu")


def test_an_all_zero_factor_in_a_map_file_keeps_the_map_out(
    tmp_path: Path, engine: OnlineSparseGP
) -> None:
    data = map_data(engine)
    state = dict(data.engine_state)
    state["carried.L"] = np.zeros_like(state["carried.L"])
    path = tmp_path / "zero.npz"
    save_map(path, data._replace(engine_state=state))
    with pytest.raises(MapFileError, match=r"zero\.npz: the engine refused the saved state"):
        read_model(path, device="cpu")


def test_non_finite_engine_arrays_are_refused_at_file_level(
    tmp_path: Path, engine: OnlineSparseGP
) -> None:
    data = map_data(engine)
    state = dict(data.engine_state)
    state["carried.P"] = np.full_like(state["carried.P"], np.nan)
    save_map(tmp_path / "nan.npz", data._replace(engine_state=state))
    with pytest.raises(MapFileError, match=r"engine\.carried\.P has non-finite values"):
        load_map(tmp_path / "nan.npz")


def test_the_saved_map_itself_loads_and_predicts(map_path: Path, engine: OnlineSparseGP) -> None:
    model = read_model(map_path, device="cpu")
    Xs = torch.as_tensor(np.random.default_rng(5).uniform(0.0, 4.0, size=(20, 2)))
    torch.testing.assert_close(model.predict(Xs), engine.predict(Xs), rtol=1e-12, atol=1e-12)
