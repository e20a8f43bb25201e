"""Typed records passed between the pipeline stages; every stamp is in integer nanoseconds."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

import numpy as np


class Pose(NamedTuple):
    """A pose of the magnetometer in the map frame.

    Attributes:
        stamp_ns: Header stamp (ns).
        position_m: [3] position (m) in the map frame.
        orientation_xyzw: [4] unit quaternion (x, y, z, w) rotating sensor-frame vectors into the
            map frame.
    """

    stamp_ns: int
    position_m: np.ndarray
    orientation_xyzw: np.ndarray


class Transform(NamedTuple):
    """One edge of the TF tree at one stamp, as ``geometry_msgs/TransformStamped`` carries it.

    Attributes:
        stamp_ns: Header stamp (ns); ignored for a static transform.
        parent: ``header.frame_id``.
        child: ``child_frame_id``.
        translation_m: [3] the child's origin in the parent frame (m).
        rotation_xyzw: [4] quaternion (x, y, z, w) rotating child-frame vectors into the
            parent frame.
    """

    stamp_ns: int
    parent: str
    child: str
    translation_m: np.ndarray
    rotation_xyzw: np.ndarray


class StaticTransform(NamedTuple):
    """A transform of ``/tf_static``: valid for all time (its stamp is ignored)."""

    transform: Transform

    @property
    def stamp_ns(self) -> int:
        """The header stamp it was sent with (ns)."""
        return self.transform.stamp_ns


class FieldReading(NamedTuple):
    """One magnetometer reading, as `sensor_msgs/MagneticField` carries it.

    Attributes:
        stamp_ns: Header stamp (ns).
        field_t: [3] magnetic field (T) in the sensor frame.
        frame_id: The sensor frame the vector is expressed in.
    """

    stamp_ns: int
    field_t: np.ndarray
    frame_id: str


class Sample(NamedTuple):
    """A reading paired with the pose interpolated at its stamp.

    Attributes:
        stamp_ns: The reading's stamp (ns).
        position_m: [3] sensor position (m) in the map frame.
        field_ut: [3] magnetic field (µT) rotated into the map frame with the interpolated
            orientation (its norm is the sensor-frame norm).
        orientation_xyzw: [4] the interpolated orientation (sensor to map frame), kept so that
            models can use the heading as an input; None where no pose orientation exists.
    """

    stamp_ns: int
    position_m: np.ndarray
    field_ut: np.ndarray
    orientation_xyzw: np.ndarray | None = None


class Window(NamedTuple):
    """A batch of training data for one engine update.

    Attributes:
        X: [N, D] inputs (m): (x, y) or (x, y, z) in the map frame.
        y: [N] targets (µT), or [N, 3] map-frame field components (µT) for target "vector".
        start_ns: Stamp of the first sample (ns).
        end_ns: Stamp of the last sample (ns).
        stamps_ns: [N] stamp of each sample (ns), for models with time as an input.
        orientation_xyzw: [N, 4] orientation of each sample (for heading inputs); NaN rows
            where a sample had none.
    """

    X: np.ndarray
    y: np.ndarray
    start_ns: int
    end_ns: int
    stamps_ns: np.ndarray | None = None
    orientation_xyzw: np.ndarray | None = None


@dataclass
class DropCounts:
    """Inputs discarded by the pipeline, by reason; published on `/diagnostics`.

    Every field counts field readings (or the samples made from them), except `late_pose`,
    `bad_pose` and the `*_transform`, `bad_quaternion` fields, which count pose messages and
    TF transforms.

    Attributes:
        nan: Readings with a NaN or infinite component.
        zero_field: Readings whose vector is exactly zero (a sensor that reports nothing).
        implausible: Readings whose magnitude |B| lies outside [`field_min`, `field_max`]
            (a glitch, a motor passing the sensor, a unit mistake).
        out_of_order: Readings whose stamp is not newer than the previous reading's.
        no_pose: Readings never bracketed by two poses (older than the pose buffer, or waited
            longer than `pose_wait`; under TF: older than an edge's cache, or waited longer
            than `transform_timeout` for a transform at or after their stamp).
        no_transform: (TF) Readings whose frame the TF tree did not join to `map_frame` within
            `transform_timeout`: a missing edge, or a sensor frame renamed.
        pose_gap: Readings whose bracketing poses are more than `max_pose_gap` apart (under
            TF: two transforms of one edge more than `max_transform_gap` apart).
        pose_jump: Readings whose bracketing poses imply a speed above `max_pose_speed`.
        duplicate: Samples at the position of the last kept sample, or closer to it than
            `min_spacing`.
        frame: Readings whose frame_id differs from `expected_frame`.
        window_overflow: Samples thinned out because the engine was busy and the backlog of
            waiting windows was full (`backlog_limit`), or waiting for a map since replaced.
        failed_update: Samples in windows the engine rejected (the previous map stands).
        outlier: Samples the engine dropped from an accepted window, their value far outside
            the map's predictive distribution (`outlier_z`).
        late_pose: Poses older than everything in the pose buffer.
        bad_pose: Poses with non-finite values, a zero quaternion or a repeated stamp.
        late_transform: Transforms older than their edge's cache, or repeating a stamp.
        bad_transform: Transforms with a non-finite value, an empty frame name, or a frame
            its own parent.
        bad_quaternion: Transforms whose rotation is not a unit quaternion (tf2's tolerance).
        transform_loop: Transforms that would close a loop in the TF tree.
        future_transform: Transforms stamped more than 10 s (tf2's cache time) ahead of the
            newest reading.
    """

    nan: int = 0
    zero_field: int = 0
    implausible: int = 0
    out_of_order: int = 0
    no_pose: int = 0
    pose_gap: int = 0
    pose_jump: int = 0
    duplicate: int = 0
    frame: int = 0
    window_overflow: int = 0
    failed_update: int = 0
    outlier: int = 0
    late_pose: int = 0
    bad_pose: int = 0
    no_transform: int = 0
    late_transform: int = 0
    bad_transform: int = 0
    bad_quaternion: int = 0
    transform_loop: int = 0
    future_transform: int = 0

    def total(self) -> int:
        """The sum over every reason."""
        return sum(getattr(self, f.name) for f in fields(self))

    def as_dict(self) -> dict[str, int]:
        """The counts by reason, in field order."""
        return asdict(self)

    def copy(self) -> DropCounts:
        """An independent copy."""
        return DropCounts(**self.as_dict())


# The map's health as `/diagnostics` reports it (the node maps these onto DiagnosticStatus).
HEALTH_OK = "OK"
HEALTH_WARN = "WARN"
HEALTH_ERROR = "ERROR"
# Unhealthy updates in a row (rejected, or fitted θ refused) after which the map's health is
# ERROR, not WARN: one is a glitch the map survives; three mean it has stopped learning (with
# 10 s windows, for half a minute).
UNHEALTHY_FOR_ERROR = 3


def update_health(unhealthy_in_a_row: int, problem: str) -> tuple[int, str, str]:
    """The map's health after an update.

    Args:
        unhealthy_in_a_row: unhealthy updates before this one, since the last healthy one.
        problem: what went wrong with this update, one line; "" if nothing did.

    Returns:
        (unhealthy updates in a row now, HEALTH_OK/WARN/ERROR, the message: "" when OK).
    """
    if not problem:
        return 0, HEALTH_OK, ""
    count = unhealthy_in_a_row + 1
    level = HEALTH_ERROR if count >= UNHEALTHY_FOR_ERROR else HEALTH_WARN
    return count, level, f"{problem} ({count} unhealthy update(s) in a row)"
