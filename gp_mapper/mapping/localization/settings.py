"""Every setting of the localizer, declared once: the filter's (``LocalizerConfig``) and the
node's wiring, with defaults, ranges and units. The node declares its ROS parameters from this
table (``gp_mapper.ros.localizer_node``) and ``config/gp_localizer.yaml`` lists it.

Names follow Nav2's ``amcl`` where AMCL has the setting (``min_particles``, ``alpha1``,
``global_frame_id``, ``base_frame_id``, ``transform_tolerance``, ``set_initial_pose``,
``initial_pose.x``). Every row but the read-only ones may change while the node runs; the
filter's apply from its next update (``seed`` and ``initial_sd_*`` from its next start).
``DEPRECATED_NAMES`` are the names of an earlier release, still read for one release.
"""

from __future__ import annotations

import math
from typing import Any

from gp_mapper.engine.settings import Setting

FILTER = "localization"
NODE = "node"


def _row(*fields: Any, group: str = FILTER, **named: Any) -> Setting:
    return Setting(*fields, group=group, **named)


LOCALIZER_PARAMETERS: tuple[Setting, ...] = (
    # --- ROS wiring (the node's) ---
    _row(
        "map_path",
        "",
        "str",
        "map file of ‖B‖ or of the field vector written by gp_mapper (map_state.npz; ~ is "
        "expanded), read at configure and by ~/load_map; empty: no map until ~/load_map with "
        "map_path set",
        group=NODE,
    ),
    _row(
        "odom_source",
        "tf",
        "str",
        "where odometry comes from: tf = odom_frame_id -> base_frame_id on /tf at each "
        "reading's stamp and the magnetometer's mounting from TF (as AMCL); topic = "
        "nav_msgs/Odometry on odom_topic, the reading taken in the base's axes",
        choices=("tf", "topic"),
        read_only=True,
        group=NODE,
    ),
    _row(
        "mag_topic",
        "mag",
        "str",
        "magnetometer topic (sensor_msgs/MagneticField, field in tesla)",
        read_only=True,
        group=NODE,
    ),
    _row(
        "odom_topic",
        "odom",
        "str",
        "(odom_source topic) odometry topic (nav_msgs/Odometry of the base in odom_frame_id)",
        read_only=True,
        group=NODE,
    ),
    _row(
        "global_frame_id",
        "map",
        "str",
        "frame of the map and of the published pose",
        read_only=True,
        group=NODE,
    ),
    _row(
        "odom_frame_id",
        "odom",
        "str",
        "the odometry's frame (the child of map -> odom)",
        read_only=True,
        group=NODE,
    ),
    _row(
        "base_frame_id",
        "base_link",
        "str",
        "the robot's base (Nav2's name; base_link, not Nav2's base_footprint: the frame this "
        "package's robot bags and the mapper use); the pose published is this frame's",
        read_only=True,
        group=NODE,
    ),
    _row(
        "transform_timeout",
        1.0,
        "float",
        "(odom_source tf) how long a reading may wait for the transforms at its stamp, in the "
        "magnetometer's stamp time; then it is dropped and counted [s]",
        min=0.0,
        max=60.0,
        group=NODE,
    ),
    _row(
        "max_transform_gap",
        1.0,
        "float",
        "(odom_source tf) largest time between two transforms of one TF edge that a reading "
        "is interpolated across [s]",
        min=0.001,
        max=10.0,
        read_only=True,
        group=NODE,
    ),
    _row(
        "tf_broadcast",
        True,
        "bool",
        "broadcast global_frame_id -> odom_frame_id on /tf (tf2_msgs/TFMessage); false: no /tf",
        group=NODE,
    ),
    _row(
        "transform_tolerance",
        1.0,
        "float",
        "how far map -> odom is post-dated (AMCL's): stamped the update's last reading + "
        "this, so a listener may use it until then without extrapolating [s]",
        min=0.0,
        max=60.0,
        group=NODE,
    ),
    _row(
        "transform_publish_period",
        0.1,
        "float",
        "while no update comes (the robot stands), map -> odom is re-sent this often, stamped "
        "now + transform_tolerance (slam_toolbox's name); 0 = only at updates [s]",
        min=0.0,
        max=10.0,
        group=NODE,
    ),
    _row(
        "set_initial_pose",
        False,
        "bool",
        "start around initial_pose.x/y/yaw (as AMCL); false: a global start over the map's "
        "known area once the map is loaded",
        read_only=True,
        group=NODE,
    ),
    _row(
        "initial_pose.x",
        0.0,
        "float",
        "initial pose x [m] in global_frame_id",
        min=-1e6,
        max=1e6,
        read_only=True,
        group=NODE,
    ),
    _row(
        "initial_pose.y",
        0.0,
        "float",
        "initial pose y [m] in global_frame_id",
        min=-1e6,
        max=1e6,
        read_only=True,
        group=NODE,
    ),
    _row(
        "initial_pose.yaw",
        0.0,
        "float",
        "initial pose yaw [rad] in global_frame_id",
        min=-2 * math.pi,
        max=2 * math.pi,
        read_only=True,
        group=NODE,
    ),
    _row(
        "autostart",
        True,
        "bool",
        "configure and activate the lifecycle node at start (false: wait for a lifecycle "
        "manager or `ros2 lifecycle set`)",
        read_only=True,
        group=NODE,
    ),
    _row(
        "diagnostics_period",
        1.0,
        "float",
        "period of /diagnostics [s]",
        min=0.1,
        max=60.0,
        group=NODE,
    ),
    # --- the filter ---
    _row(
        "lookup_resolution",
        0.05,
        "float",
        "cell of the grid the map is predicted on for the particles [m] (a tenth of the "
        "lengthscales indoor fields fit)",
        min=0.005,
        max=1.0,
        read_only=True,
    ),
    _row(
        "min_particles",
        500,
        "int",
        "fewest particles of the KLD-adaptive set",
        min=1,
        max=1_000_000,
    ),
    _row(
        "max_particles",
        20000,
        "int",
        "most particles of the set (a start uses this many); 20000 not Nav2's 2000: a "
        "magnetic reading is weak evidence, and on the validation floor a global start was "
        "found in 10 of 10 seeds against 9 with 5000 (docs/localization.md)",
        min=1,
        max=1_000_000,
    ),
    _row(
        "batch_distance_m",
        0.2,
        "float",
        "travel whose readings make one observation (their mean) [m]; 0.2 chosen on the "
        "validation runs against 0.05, 0.1 and 0.4 (docs/localization.md)",
        min=0.005,
        max=10.0,
    ),
    _row(
        "alpha1",
        0.05,
        "float",
        "rotation noise from rotation (AMCL's odometry model) "
        "[rad²/rad²]; lower than Nav2's 0.2, chosen on a validation run (docs/localization.md)",
        min=0.0,
        max=10.0,
    ),
    _row("alpha2", 0.05, "float", "rotation noise from translation [rad²/m²]", min=0.0, max=10.0),
    _row("alpha3", 0.05, "float", "translation noise from translation [m²/m²]", min=0.0, max=10.0),
    _row("alpha4", 0.05, "float", "translation noise from rotation [m²/rad²]", min=0.0, max=10.0),
    _row(
        "kld_error", 0.05, "float", "KLD sampling's error bound (AMCL's pf_err)", min=1e-4, max=1.0
    ),
    _row(
        "kld_quantile",
        0.99,
        "float",
        "KLD sampling's upper quantile (AMCL's pf_z)",
        min=0.5,
        max=0.9999,
    ),
    _row("kld_bin_m", 0.5, "float", "KLD histogram bin in x and y [m]", min=0.01, max=10.0),
    _row(
        "kld_bin_rad",
        math.radians(10.0),
        "float",
        "KLD histogram bin in yaw [rad]",
        min=0.01,
        max=math.pi,
    ),
    _row(
        "resample_ess",
        0.5,
        "float",
        "resample when the effective sample size falls below this share of the set",
        min=0.0,
        max=1.0,
    ),
    _row(
        "initial_sd_m",
        0.5,
        "float",
        "position sd of a start from a given pose [m]",
        min=0.001,
        max=1000.0,
    ),
    _row(
        "initial_sd_rad",
        math.sqrt(0.068),
        "float",
        "yaw sd of a start from a given pose [rad] (AMCL's initial_cov_aa 0.068 rad²)",
        min=0.001,
        max=math.pi,
    ),
    _row(
        "converged_sd_m",
        0.5,
        "float",
        "converged when the position sd along its major axis is below this [m]",
        min=0.001,
        max=100.0,
    ),
    _row(
        "temper_lengthscales",
        1.0,
        "float",
        "travel over which the map's errors count as one observation, in map lengthscales: "
        "each observation is weighed by batch_distance / (this × lengthscale), at most 1; "
        "0 = every observation independent. 0.5 finds a small room faster, but leaves a global "
        "start over a whole floor lost and sure of itself (docs/localization.md)",
        min=0.0,
        max=100.0,
    ),
    _row(
        "sensor_resetting",
        False,
        "bool",
        "draw a global start's particles (at its first batch of readings) and the recovery's "
        "new ones where the map agrees with the last batch (its ‖B‖; with a map of the field "
        "vector its vertical and horizontal parts, the heading from the horizontal "
        "direction) rather than uniformly over the known map (sensor resetting)",
    ),
    _row(
        "recovery_alpha_slow",
        0.0,
        "float",
        "decay rate of the long-term average of the particles' likelihood (AMCL's; 0 with "
        "recovery_alpha_fast 0: no recovery)",
        min=0.0,
        max=1.0,
    ),
    _row(
        "recovery_alpha_fast",
        0.0,
        "float",
        "decay rate of the short-term average; when it falls below the long-term one, that "
        "share of the particles is drawn anew over the known map at the next resampling",
        min=0.0,
        max=1.0,
    ),
    _row(
        "likelihood",
        "auto",
        "str",
        "what a batch of readings is weighed by: vector = all three components against a map "
        "of the field vector, turned by each particle's heading and the sensor's attitude from "
        "TF (holds the heading); norm = ‖B‖ (no orientation needed); auto = vector where the "
        "map holds the field vector (target: vector), norm otherwise",
        choices=("auto", "norm", "vector"),
    ),
    _row(
        "hard_iron_sd_ut",
        5.0,
        "float",
        "prior sd of each component of the sensor's offset in its own axes [µT] (hard iron, "
        "or a sensor other than the map's), estimated online by the three-axis likelihood, "
        "per particle; 0 = the readings have none (calibrated on the map's sensor)",
        min=0.0,
        max=1000.0,
    ),
    _row(
        "hard_iron_walk_ut",
        0.05,
        "float",
        "random walk of the sensor's offset [µT/√s]: how fast it may drift (temperature, "
        "a pass's own error)",
        min=0.0,
        max=100.0,
    ),
    _row(
        "field_offset_sd_ut",
        0.0,
        "float",
        "prior sd of an offset of each reading along the field it reads [µT] (a gain error, "
        "a pass's calibration residue: the reading stretched along B), estimated online per "
        "particle with the sensor's offset by the three-axis likelihood; 0 = none",
        min=0.0,
        max=1000.0,
    ),
    _row(
        "field_offset_walk_ut",
        0.0,
        "float",
        "random walk of that offset [µT/√s]",
        min=0.0,
        max=100.0,
    ),
    _row(
        "norm_offset_sd_ut",
        0.0,
        "float",
        "prior sd of an offset of ‖B‖ [µT] estimated online per particle when the filter "
        "weighs ‖B‖ (a pass's error, a sensor other than the map's); 0 = none",
        min=0.0,
        max=1000.0,
    ),
    _row(
        "norm_offset_walk_ut",
        0.0,
        "float",
        "random walk of that offset [µT/√s]",
        min=0.0,
        max=100.0,
    ),
    _row(
        "seed",
        0,
        "int",
        "the filter's random stream (same inputs and seed, same poses); a change applies from "
        "the next map load",
        min=0,
        max=2**31 - 1,
    ),
)

PARAMETER_BY_NAME: dict[str, Setting] = {p.name: p for p in LOCALIZER_PARAMETERS}

# Old name -> the name that replaces it. An old name that is set is read (with a warning in
# the log) for one release, then removed.
DEPRECATED_NAMES: dict[str, str] = {
    "initial_pose_x": "initial_pose.x",
    "initial_pose_y": "initial_pose.y",
    "initial_pose_a": "initial_pose.yaw",
}


def default(name: str) -> Any:
    """The default of a setting of the table."""
    return PARAMETER_BY_NAME[name].default


def parameters_markdown() -> str:
    """The table as Markdown (docs/localization.md's parameter table is this)."""
    lines = [
        "| name | default | range | read-only | description |",
        "|---|---|---|---|---|",
    ]
    for p in LOCALIZER_PARAMETERS:
        shown = f"{p.default:.4g}" if isinstance(p.default, float) else repr(p.default)
        if p.choices:
            span = ", ".join(f"`{c}`" for c in p.choices)
        else:
            span = "" if p.min is None else f"{p.min:g} … {p.max:g}"
        read_only = "yes" if p.read_only else ""
        lines.append(f"| `{p.name}` | `{shown}` | {span} | {read_only} | {p.description} |")
    return "\n".join(lines)
