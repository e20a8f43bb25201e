"""Poses drawn where the map agrees with a batch (mapping/localization/proposal.py): the ‖B‖
map's level sets, the field vector's heading, and the density that weighs a start drawn so."""

from __future__ import annotations

import math

import numpy as np

from gp_mapper.mapping.grid import GridSpec
from gp_mapper.mapping.localization import FieldLookup, MapNoise
from gp_mapper.mapping.localization.motion import wrap_angle
from gp_mapper.mapping.localization.proposal import BatchEvidence, draw_poses
from gp_mapper.mapping.localization.three_axis import rotation_z

BOX = (0.0, 10.0, 0.0, 8.0)
RES = 0.1


def field_at(xy: np.ndarray) -> np.ndarray:
    """A field whose vertical part and horizontal magnitude and direction vary over the room."""
    x, y = xy[:, 0], xy[:, 1]
    return np.column_stack([18.0 + 4.0 * np.sin(0.7 * x), 3.0 * np.cos(0.5 * y),
                            -40.0 + 3.0 * np.sin(0.4 * (x + y))])  # fmt: skip


def lookup(vector: bool) -> FieldLookup:
    W, H = round((BOX[1] - BOX[0]) / RES), round((BOX[3] - BOX[2]) / RES)
    grid = GridSpec((BOX[0], BOX[2]), RES, (H, W))
    xy = grid.cell_points()
    field = field_at(xy).reshape(H, W, 3)
    norm = np.linalg.norm(field, axis=-1)
    small = np.full((H, W), 0.01)
    layers = (field, np.full(field.shape, 0.01)) if vector else None
    return FieldLookup(grid, norm, small, np.full((H, W), 100.0), MapNoise(0.04, 0.0), 0.5,
                       layers)  # fmt: skip


def test_a_norm_map_draws_its_level_set_and_any_heading() -> None:
    target = float(np.linalg.norm(field_at(np.array([[3.0, 4.0]]))))
    evidence = BatchEvidence(target, None, 0.04, 1.0, 0.0)
    poses, log_q = draw_poses(lookup(False), evidence, np.random.default_rng(0), 4000)
    misfit = np.abs(np.linalg.norm(field_at(poses[:, :2]), axis=1) - target)
    assert np.quantile(misfit, 0.95) < 4.0 * math.sqrt(0.01 + 0.04)
    assert np.abs(np.mean(np.exp(1j * poses[:, 2]))) < 0.1  # headings spread round the circle
    # The density follows the agreement: the draws nearest the level have the largest.
    assert log_q[misfit < 0.05].mean() > log_q[misfit > 0.3].mean()


def test_a_field_vector_map_draws_the_place_and_the_heading() -> None:
    place, heading, odometry_yaw = np.array([3.0, 4.0]), 0.7, -0.2
    delta = heading - odometry_yaw  # the particle's heading less the odometry's
    reading = (rotation_z(np.array([-delta])) @ field_at(place[None])[0])[0]
    evidence = BatchEvidence(float(np.linalg.norm(reading)), reading, 0.04, 1.0, odometry_yaw)
    poses, _ = draw_poses(lookup(True), evidence, np.random.default_rng(1), 4000)
    near = np.linalg.norm(poses[:, :2] - place, axis=1) < 0.3
    assert near.sum() > 20
    off = np.abs(wrap_angle(poses[near, 2] - heading))
    assert np.degrees(np.sqrt(np.mean(off**2))) < 3.0
    # Two heading-free parts, not one: far fewer places agree than on the ‖B‖ level set.
    norm_only = draw_poses(lookup(False), evidence._replace(reading_ut=None),
                           np.random.default_rng(1), 4000)[0]  # fmt: skip
    spread = [np.linalg.norm(p[:, :2] - place, axis=1).mean() for p in (poses, norm_only)]
    assert spread[0] < 0.7 * spread[1], spread


def test_tempering_widens_the_draws() -> None:
    target = float(np.linalg.norm(field_at(np.array([[3.0, 4.0]]))))
    misfits = []
    for weight in (1.0, 0.1):
        evidence = BatchEvidence(target, None, 0.04, weight, 0.0)
        poses, _ = draw_poses(lookup(False), evidence, np.random.default_rng(2), 4000)
        norm = np.linalg.norm(field_at(poses[:, :2]), axis=1)
        misfits.append(float(np.sqrt(np.mean((norm - target) ** 2))))
    assert misfits[1] > 2.0 * misfits[0], misfits
