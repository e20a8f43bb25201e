from __future__ import annotations

import dataclasses

from gp_mapper.mapping import DropCounts


def test_drop_counts_total_as_dict_and_copy() -> None:
    drops = DropCounts(nan=2, duplicate=5, failed_update=3)
    assert drops.total() == 10
    as_dict = drops.as_dict()
    assert list(as_dict) == [f.name for f in dataclasses.fields(DropCounts)]
    assert as_dict["nan"] == 2 and as_dict["no_pose"] == 0

    copy = drops.copy()
    copy.nan += 1
    assert drops.nan == 2 and copy.nan == 3


def test_drop_counts_has_every_documented_reason() -> None:
    names = {f.name for f in dataclasses.fields(DropCounts)}
    documented = {"nan", "zero_field", "out_of_order", "no_pose", "pose_gap", "duplicate", "frame",
                "window_overflow", "failed_update"}  # fmt: skip
    assert documented <= names
