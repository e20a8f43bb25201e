"""The node's parameters, declared once as data, and the frozen config built from them.

`PARAMETERS` is the single table of every parameter of the `gp_mapper` node: name, default,
type, description with unit, range or choices and whether it is read-only. The ROS node declares
exactly these (with descriptors built from the table), docs/node.md lists them, and
`MapperConfig` holds their values. The engine's parameters are built from the engine's settings
table (`gp_mapper.engine.settings`), the one source of their defaults and ranges: the shared ones
by name (`kernel`), each model's namespaced by its package (`vips.delta`, `acgp.block_size`), the
settings of `gp_mapper.engine.EngineSpec` of the same names.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gp_mapper.engine import EngineSpec, model_entry, model_names
from gp_mapper.engine.gam.settings import GAM_MAP_LAYER, parse_components
from gp_mapper.engine.registry import load_installed_models
from gp_mapper.engine.setting import AUTO, SettingValue
from gp_mapper.engine.settings import Setting, name_of, node_settings, setting_by_name
from gp_mapper.mapping.errors import ConfigError
from gp_mapper.mapping.fit_schedule import LEVEL_WINDOWS
from gp_mapper.mapping.windowing import TARGETS, VECTOR_TARGET

if TYPE_CHECKING:
    from gp_mapper.engine import EngineSpec

ParamValue = SettingValue

# Number of values in `bounds`: xmin, xmax, ymin, ymax.
BOUNDS_LENGTH = 4


def _parameter(*fields: Any, group: str = "mapping", **named: Any) -> Setting:
    """A row of the node's own table: a setting of the pipeline unless ``group`` says node."""
    return Setting(*fields, group=group, **named)


def validate(parameter: Setting, value: Any) -> ParamValue:
    """``value`` in its canonical type if the parameter allows it.

    Raises:
        ConfigError: naming the parameter, the allowed values and the value given.
    """
    try:
        return parameter.check(value)
    except ValueError as err:
        raise ConfigError(str(err)) from err


# Ranges: wide enough for any robot, narrow enough to catch a unit mistake (ms for s, cm for m).
PARAMETERS: tuple[Setting, ...] = (
    # --- ROS wiring (read by the node only) ---
    _parameter("map_frame", "map", "str", "frame of the poses and the published maps (REP-105)",
                  read_only=True, group="node"),
    _parameter("pose_source", "tf", "str",
                  "where each reading's pose comes from: tf = the transform map_frame -> "
                  "sensor frame at the reading's stamp, from /tf and /tf_static (a robot's "
                  "map -> odom -> base_link -> sensor); topic = a pose of the sensor itself in "
                  "map_frame on pose_topic (bags that carry one)",
                  choices=("tf", "topic"), read_only=True, group="node"),
    _parameter("sensor_frame", "", "str",
                  "(pose_source tf) frame the readings are looked up in; empty = each "
                  "MagneticField header's frame_id",
                  read_only=True, group="node"),
    _parameter("mag_topic", "mag", "str",
                  "magnetometer topic (sensor_msgs/MagneticField, field in tesla)",
                  read_only=True, group="node"),
    _parameter("pose_topic", "pose", "str",
                  "(pose_source topic) pose topic of the magnetometer in map_frame",
                  read_only=True, group="node"),
    _parameter("pose_type", "pose_stamped", "str", "message type on pose_topic",
                  choices=("pose_stamped", "pose_with_covariance", "odometry"),
                  read_only=True, group="node"),
    _parameter("qos_depth", 100, "int",
                  "history depth of the sensor subscriptions [messages]; a 100 Hz magnetometer "
                  "needs room between callbacks (50-200)",
                  min=1, max=10000, read_only=True, group="node"),
    _parameter("map_path", "~/.ros/gp_mapper/map.npz", "str",
                  "map file written by ~/save_map and read by ~/load_map (~ is expanded)",
                  group="node"),
    _parameter("diagnostics_period", 1.0, "float", "period of /diagnostics [s]",
                  min=0.1, max=60.0, group="node"),
    _parameter("torch_threads", 1, "int",
                  "CPU threads of the engine's torch operations; 1 keeps its OpenMP threads "
                  "from spinning against the node's own threads (8x faster updates measured "
                  "under load); 0 = torch's default (one per core) [threads]",
                  min=0, max=256, read_only=True, group="node"),
    _parameter("autostart", True, "bool",
                  "configure and activate the node at start (a lifecycle node); false: it "
                  "waits unconfigured for a lifecycle manager or `ros2 lifecycle set`",
                  read_only=True, group="node"),
    _parameter("executor", "events", "str",
                  "rclpy executor of gp_mapper_node: events = the C++ EventsExecutor (sustains "
                  "4000+ messages/s here; a service's work, a load or a flush, holds the inputs "
                  "while it runs), single_threaded = the Python SingleThreadedExecutor (about "
                  "1000/s), multi_threaded = Python's MultiThreadedExecutor (services in a "
                  "group of their own: the inputs flow during a load or a flush)",
                  choices=("events", "single_threaded", "multi_threaded"), read_only=True,
                  group="node"),
    # --- the pipeline ---
    _parameter("target", "norm", "str",
                  "mapped quantity: norm = |B| [µT] (rotation invariant); x, y, z = that "
                  "component of B in map_frame [µT], rotated with the interpolated "
                  "orientation; vector = the field vector in map_frame [µT], rotated as x, y, "
                  "z are (needs model: potential)",
                  choices=TARGETS, read_only=True),
    _parameter("input_dims", 2, "int", "GP inputs: 2 = (x, y), 3 = (x, y, z) [m]",
                  min=2, max=3, choices=(2, 3), read_only=True),
    _parameter("batch_size", 400, "int",
                  "samples per engine update; the paper streams ~469 per batch [samples]",
                  min=1, max=10000),
    _parameter("batch_period", 10.0, "float",
                  "an open window closes after this much message-stamp time (a new map's "
                  "first: see first_batch_min) [s]",
                  min=0.1, max=3600.0),
    # 100: the first fit starts from the configured guess; on ~17 readings of a slow walk
    # (min_spacing 0.1 m, 10 s) it explained the batch as noise or ran the field variance to
    # 10³-10⁴ µT², and the map built on it went wrong by hundreds of µT.
    _parameter("first_batch_min", 100, "int",
                  "until a fit of the hyperparameters has been accepted (a new map), a window "
                  "closes at batch_period only once it holds this many samples (at batch_size "
                  "or at the end of input in any case): the fit from the configured guess "
                  "needs them [samples]",
                  min=1, max=10000),
    _parameter("min_spacing", 0.0, "float",
                  "drop samples closer than this to the last kept one [m]; 0 = off (exact "
                  "repeats of the last kept position are always dropped)",
                  min=0.0, max=10.0),
    _parameter("max_pose_gap", 0.2, "float",
                  "largest time between the two poses bracketing a reading [s]",
                  min=0.001, max=10.0),
    _parameter("max_pose_speed", 10.0, "float",
                  "bracketing poses implying a faster motion are a jump (map correction) and "
                  "are not interpolated across [m/s]; 0 = off",
                  min=0.0, max=1000.0),
    _parameter("pose_wait", 0.5, "float",
                  "how long a reading may wait for a later pose, in stamp time [s]",
                  min=0.0, max=60.0),
    _parameter("pose_buffer_size", 1000, "int", "poses kept for interpolation [poses]",
                  min=2, max=100000),
    # 1 s: a localizer's map -> odom comes at 1-10 Hz, and unless it is post-dated (AMCL's
    # transform_tolerance) a reading waits for the next one.
    _parameter("transform_timeout", 1.0, "float",
                  "(pose_source tf) how long a reading may wait for the transforms at its "
                  "stamp, in the magnetometer's stamp time; then it is dropped and counted [s]",
                  min=0.0, max=60.0),
    _parameter("max_transform_gap", 1.0, "float",
                  "(pose_source tf) largest time between two transforms of one TF edge that a "
                  "reading is interpolated across (a localizer's map -> odom at 1-10 Hz) [s]",
                  min=0.001, max=10.0),
    _parameter("mag_bias", None, "float_array",
                  "the magnetometer's hard-iron offset [x, y, z] in its own frame, subtracted "
                  "from each reading (a calibration, as imu_filter_madgwick's mag_bias); "
                  "empty = none [µT]",
                  rule="empty, or [x, y, z] of finite values"),
    _parameter("expected_frame", "", "str",
                  "drop readings whose frame_id differs; empty = accept any frame"),
    # The Earth's field is 25-65 µT at the surface; steel indoors bends it to ~10-150 µT. A
    # reading outside this range is a glitch, a motor passing the sensor or a unit mistake.
    _parameter("field_min", 10.0, "float",
                  "readings with |B| below this are implausible and dropped [µT]; 0 = no "
                  "lower limit",
                  min=0.0, max=1.0e4),
    _parameter("field_max", 200.0, "float",
                  "readings with |B| above this are implausible and dropped [µT]; must exceed "
                  "field_min",
                  min=1.0e-3, max=1.0e9),
    # --- tiles: a map of any size (engine/tiled) ---
    # 16 m, from the lengthscale and the cap: at the lengthscales indoor fields fit (0.25-0.7 m)
    # a 16 m tile of a walked floor holds a few hundred inducing points (at most ~650 on the
    # synthetic office floor), a third of vips.max_inducing, so a tile does not fill. A room within
    # 6 m (half a tile less the overlap) of where the map starts is one tile, the map of one
    # model: every Aalto run is (at most 4.2 m); the demo's 8 x 6 m room spills into a second
    # (RMSE 0.552 µT, 0.555 untiled). Smaller tiles fit theta on fewer readings and cover
    # worse (8 m on the validation floor: 95 % coverage 0.77 against 0.88); larger ones cost
    # more per update (M per tile grows) for no accuracy (12-24 m: RMSE 1.69-1.70 µT). The
    # README's "Mapping a building" has the figures.
    _parameter("tile_size", 16.0, "float",
                  "side of the square tiles the map is made of, each one model of the "
                  "configured kind holding at most vips.max_inducing points; tile (0, 0) is "
                  "centred on the first reading; 0 = one model for the whole map (capped at "
                  "vips.max_inducing) [m]",
                  min=0.0, max=1.0e4, read_only=True),
    _parameter("tile_overlap", 0.0, "float",
                  "readings shared by neighbouring tiles each side of an edge, where their "
                  "maps are blended; 0 = two lengthscales, at most half a tile [m]",
                  min=0.0, max=5.0e3, read_only=True),
    _parameter("resolution", 0.1, "float", "grid cell size [m]", min=0.01, max=5.0),
    _parameter("margin", 1.0, "float",
                  "grid margin around the explored box when bounds is empty [m]",
                  min=0.0, max=100.0),
    _parameter("bounds", None, "float_array",
                  "fixed grid extent [xmin, xmax, ymin, ymax] [m]; empty = explored box + margin",
                  rule="empty, or [xmin, xmax, ymin, ymax] with xmin < xmax and ymin < ymax"),
    _parameter("max_cells", 40000, "int",
                  "cap on grid cells; the resolution coarsens to stay below it [cells]",
                  min=16, max=4000000),
    _parameter("full_resolution_cells", 0, "int",
                  "cap on the cells of the ~/field cloud and grids.npz, kept at resolution "
                  "over the explored area (coarsened only above this) and redrawn tile by "
                  "tile; 0 = they hold the published grid (max_cells) [cells]",
                  min=0, max=100000000),
    _parameter("grid_z", 0.0, "float", "height of the grid when input_dims = 3 [m]",
                  min=-10000.0, max=10000.0),
    _parameter("unknown_variance_ratio", 0.9, "float",
                  "a cell is unknown (-1) where its variance exceeds this times the prior variance",
                  min=0.0, max=1.0),
    _parameter("provisional_map", True, "bool",
                  "publish each window's map under the previous hyperparameters as soon as its "
                  "inducing points are chosen, then the fitted map (lower latency; one more "
                  "grid prediction per window; the node only)"),
    # Scheduling the engine (the hyperparameter fit is most of an update).
    _parameter("merge_limit", 4000, "int",
                  "windows closing while the engine is busy are merged into one waiting window "
                  "of at most this many samples; a full one waits for the engine and the next "
                  "fills behind it; 4000 = 20 s of a 200 Hz magnetometer, past which the "
                  "selection's reference bound (up to 3000 greedy pivots) makes a merged "
                  "window dearer per sample [samples]",
                  min=1, max=1000000),
    _parameter("backlog_limit", 200000, "int",
                  "most samples waiting for the engine in all merged windows together (taken "
                  "as at least merge_limit); a slow stretch of updates (a fit, a large "
                  "selection) is worked off by the faster ones after it, and only past this "
                  "is the newest waiting window thinned evenly over its span (counted as "
                  "window_overflow); 200000 = 1000 s of a 200 Hz magnetometer, ~15 MB "
                  "[samples]",
                  min=1, max=100000000),
    _parameter("fit_first_windows", 5, "int",
                  "re-fit the hyperparameters on each of a map's first windows (the initial "
                  "values are guesses) [windows]",
                  min=0, max=1000000),
    _parameter("fit_every_windows", 20, "int",
                  "after those, re-fit on every this-many-th window since the last fit (a "
                  "merged window counts once); the others only join the map under the current "
                  "hyperparameters; 0 = only when stale, 1 = every window [windows]",
                  min=0, max=1000000),
    _parameter("refit_bound_drop", 0.5, "float",
                  "re-fit on the next window when the median bound per sample of the latest "
                  f"{LEVEL_WINDOWS} windows under the current hyperparameters falls this far "
                  f"below that of the first {LEVEL_WINDOWS} after the last fit (the map's "
                  "statistics changed); not while "
                  "the map is at vips.max_inducing, where the bound falls wherever the data leave "
                  "its points; 0 = off [nats/sample]",
                  min=0.0, max=1000.0),
)  # fmt: skip


# Where the node's default differs from the engine's (the paper's protocol, `EngineSpec()`).
# pass_noise_variance: a magnetometer's reading error has a part that stays the same along a
# pass (heading-dependent calibration residue, pose offset), which no window can tell from the
# field. It is the sensor's and the robot's, so the node measures it from the readings of
# different passes at the same place (mapping/pass_noise.py) rather than assume one value: a
# constant chosen on one sensor's validation blocks (1 µT² on the Aalto runs) is wrong for
# another robot, and wrong for data with no between-pass error at all (the synthetic demo).
# cell_size: readings of one window within a quarter lengthscale are one observation of their
# mean (engine/core/cells.py). Chosen on validation splits, never on a benchmark's test set:
# on the calibration's validation blocks (Aalto runs 1-5, phase 3; `calibration.py --diagnose
# --variants "node defaults" --set vips.cell_size=X`) the norm map's NLPD is 2.62 / 2.46 / 2.57 /
# 2.79 at 0 / 0.25 / 0.5 / 1 lengthscales (RMSE 5.17 / 3.42 / 4.01 / 3.91 µT), and on the
# three-axis validation split (runs 6-7, `vector_field.py --splits validation`) the norm
# stream's NLPD is 3.01 / 2.95 / 2.82 / 2.83 / 2.86 at 0 / 0.1 / 0.25 / 0.5 / 1. A quarter
# lengthscale also keeps the field's change across a cell of second order about its centroid.
NODE_ENGINE_DEFAULTS: Mapping[str, Any] = {"vips.pass_noise_variance": AUTO, "vips.cell_size": 0.25}


def _engine_parameter(setting: Setting) -> Setting:
    return setting._replace(default=NODE_ENGINE_DEFAULTS.get(setting.name, setting.default))


# The models of other installed packages (entry points ``gp_mapper.models``) join the engine's
# table first, so that a streaming one's settings are the node's parameters too.
for _problem in load_installed_models():
    logging.getLogger(__name__).warning(_problem)

# The engine's parameters come from its settings table: one source of defaults and ranges.
PARAMETERS += tuple(_engine_parameter(s) for s in node_settings())

PARAMETER_BY_NAME: Mapping[str, Setting] = {p.name: p for p in PARAMETERS}
ENGINE_PARAMETER_NAMES: tuple[str, ...] = tuple(p.name for p in PARAMETERS if p.group == "engine")


def _check_target_model(target: str, model: str) -> None:
    """A vector model maps target: vector, and target: vector needs a vector model.

    Raises:
        ConfigError: naming both settings and the models that fit.
    """
    vector_model = model_entry(model).target == VECTOR_TARGET
    if vector_model == (target == VECTOR_TARGET):
        return
    vector_models = ", ".join(n for n in model_names() if model_entry(n).target == VECTOR_TARGET)
    if vector_model:
        raise ConfigError(
            f"model {model!r} maps the field vector: it needs target: vector; got target: "
            f"{target!r}"
        )
    raise ConfigError(
        f"target: vector needs a model of the field vector (model: {vector_models}); "
        f"model {model!r} maps one scalar (target: norm, x, y or z)"
    )


def check_components_model(components: str, model: str) -> None:
    """Nuisance components (heading, run, drift) are the additive models' alone: any other
    model would map the readings with the nuisance left in, silently.

    Raises:
        ConfigError: naming the components and the models that take them.
    """
    nuisance = [c for c in parse_components(components) if c not in GAM_MAP_LAYER]
    if nuisance and not model_entry(model).takes_components:

        def takers(kind: str) -> str:
            return " or ".join(n for n in model_names(kind) if model_entry(n).takes_components)

        raise ConfigError(
            f"components: {components} has nuisance components ({', '.join(nuisance)}), which "
            f"only an additive model removes: set model: {takers('streaming')} (streamed) or "
            f"fit with --model {takers('batch')}; model {model!r} maps the readings as they are"
        )


def _default(name: str) -> Any:
    return PARAMETER_BY_NAME[name].default


def _default_engine_spec() -> EngineSpec:
    return EngineSpec(NODE_ENGINE_DEFAULTS)


def parameter_names(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` by parameter name: a flat engine name of an earlier release (``delta``)
    becomes its name (``vips.delta``) with a ``FutureWarning``; the others pass as they are."""
    return {name_of(k): v for k, v in values.items()}


def keyword_name(keyword: str) -> str:
    """The parameter a Python keyword names: the pipeline's by name, the engine's with its dot
    as an underscore (``vips_delta`` -> ``vips.delta``); a flat name of an earlier release with
    a ``FutureWarning``."""
    if keyword in PARAMETER_BY_NAME:
        return keyword
    return setting_by_name().name_of_keyword(keyword) or name_of(keyword)


@dataclass(frozen=True)
class MapperConfig:
    """Every parameter of the node; defaults and ranges come from `PARAMETERS`.

    Construct it directly (keyword arguments, `engine=EngineSpec(...)`) or from a flat mapping
    with `from_dict`. Construction validates every value.

    Raises:
        ConfigError: a value has the wrong type or is out of range; the message names it.
    """

    map_frame: str = _default("map_frame")
    mag_topic: str = _default("mag_topic")
    pose_source: str = _default("pose_source")
    sensor_frame: str = _default("sensor_frame")
    pose_topic: str = _default("pose_topic")
    pose_type: str = _default("pose_type")
    qos_depth: int = _default("qos_depth")
    map_path: str = _default("map_path")
    diagnostics_period: float = _default("diagnostics_period")
    torch_threads: int = _default("torch_threads")
    autostart: bool = _default("autostart")
    executor: str = _default("executor")
    target: str = _default("target")
    input_dims: int = _default("input_dims")
    batch_size: int = _default("batch_size")
    batch_period: float = _default("batch_period")
    first_batch_min: int = _default("first_batch_min")
    min_spacing: float = _default("min_spacing")
    max_pose_gap: float = _default("max_pose_gap")
    max_pose_speed: float = _default("max_pose_speed")
    pose_wait: float = _default("pose_wait")
    pose_buffer_size: int = _default("pose_buffer_size")
    transform_timeout: float = _default("transform_timeout")
    max_transform_gap: float = _default("max_transform_gap")
    mag_bias: tuple[float, float, float] | None = _default("mag_bias")
    expected_frame: str = _default("expected_frame")
    field_min: float = _default("field_min")
    field_max: float = _default("field_max")
    resolution: float = _default("resolution")
    margin: float = _default("margin")
    bounds: tuple[float, float, float, float] | None = _default("bounds")
    max_cells: int = _default("max_cells")
    full_resolution_cells: int = _default("full_resolution_cells")
    grid_z: float = _default("grid_z")
    unknown_variance_ratio: float = _default("unknown_variance_ratio")
    tile_size: float = _default("tile_size")
    tile_overlap: float = _default("tile_overlap")
    provisional_map: bool = _default("provisional_map")
    merge_limit: int = _default("merge_limit")
    backlog_limit: int = _default("backlog_limit")
    fit_first_windows: int = _default("fit_first_windows")
    fit_every_windows: int = _default("fit_every_windows")
    refit_bound_drop: float = _default("refit_bound_drop")
    engine: EngineSpec = field(default_factory=_default_engine_spec)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            if f.name == "engine":
                continue
            value = validate(PARAMETER_BY_NAME[f.name], getattr(self, f.name))
            object.__setattr__(self, f.name, value)
        engine = self.engine.to_dict()
        for name in ENGINE_PARAMETER_NAMES:
            if name not in engine:
                raise ConfigError(f"engine spec has no setting {name!r}")
            validate(PARAMETER_BY_NAME[name], engine[name])
        _check_target_model(self.target, self.engine.model)
        check_components_model(engine["gam.components"], self.engine.model)
        if not self.field_min < self.field_max:
            raise ConfigError(
                f"field_min must be below field_max; got {self.field_min} and {self.field_max}"
            )
        if self.tile_size > 0.0 and self.tile_overlap > 0.5 * self.tile_size:
            raise ConfigError(
                f"tile_overlap must be at most half of tile_size; got {self.tile_overlap} and "
                f"{self.tile_size}"
            )
        if self.mag_bias is not None and (
            len(self.mag_bias) != 3 or not all(map(math.isfinite, self.mag_bias))
        ):
            raise ConfigError(f"mag_bias must be empty or [x, y, z] µT; got {list(self.mag_bias)}")
        if self.bounds is not None:
            if len(self.bounds) != BOUNDS_LENGTH:
                raise ConfigError(
                    f"bounds must be empty or [xmin, xmax, ymin, ymax]; got {list(self.bounds)}"
                )
            xmin, xmax, ymin, ymax = self.bounds
            if not (xmin < xmax and ymin < ymax):
                raise ConfigError(f"bounds needs xmin < xmax and ymin < ymax; got {self.bounds}")

    @property
    def pass_noise_auto(self) -> bool:
        """Whether the map measures σ²_pass from its data (``vips.pass_noise_variance: auto``)."""
        return self.engine.pass_noise_auto

    def tile_layout(self) -> tuple[float, float] | None:
        """(size, overlap) of the map's tiles [m]; None for one model over the whole map."""
        if self.tile_size <= 0.0:
            return None
        overlap = self.tile_overlap or min(2.0 * self.engine.lengthscale, 0.5 * self.tile_size)
        return self.tile_size, overlap

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> MapperConfig:
        """Build a config from parameter names (the engine's as the node's: ``vips.delta``; a
        flat name of an earlier release, ``delta``, is read with a warning).

        Args:
            values: name -> value; names not given keep their defaults.

        Raises:
            ConfigError: an unknown name, or a value of the wrong type or out of range.
        """
        values = parameter_names(values)
        unknown = sorted(set(values) - set(PARAMETER_BY_NAME))
        if unknown:
            raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
        mapping = {k: v for k, v in values.items() if k not in ENGINE_PARAMETER_NAMES}
        engine_values = {
            k: validate(PARAMETER_BY_NAME[k], v)
            for k, v in values.items()
            if k in ENGINE_PARAMETER_NAMES
        }
        spec = _default_engine_spec()
        try:
            spec = spec.replace(engine_values)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"invalid engine parameters {engine_values}: {err}") from err
        return cls(**mapping, engine=spec)

    def to_dict(self) -> dict[str, Any]:
        """Parameter name -> value for every parameter in `PARAMETERS` order (bounds as list or
        None)."""
        engine = self.engine.to_dict()
        out: dict[str, Any] = {}
        for info in PARAMETERS:
            value = engine[info.name] if info.group == "engine" else getattr(self, info.name)
            out[info.name] = list(value) if isinstance(value, tuple) else value
        return out

    def replace(self, values: Mapping[str, Any] | None = None, /, **changes: Any) -> MapperConfig:
        """A copy with some parameters changed (the engine's included), validated: by name
        (``{"vips.delta": 0.1}``) or by keyword, an engine setting's dot as an underscore
        (``vips_delta=0.1``)."""
        by_keyword = {keyword_name(k): v for k, v in changes.items()}
        return MapperConfig.from_dict({**self.to_dict(), **parameter_names(values or {}),
                                       **by_keyword})  # fmt: skip

    def offline(self) -> MapperConfig:
        """These settings for a replay or an offline fit (:func:`offline_engine`)."""
        return dataclasses.replace(self, engine=offline_engine(self.engine))


def offline_engine(spec: EngineSpec) -> EngineSpec:
    """A model's settings for a replay or an offline fit, where the same bag must give the
    same map on an idle or a loaded machine: no wall-clock budget (``vips.fit_max_seconds`` is
    the live node's, which must keep up with the sensor), so a fit of θ stops at its
    ``fit_iterations`` whatever the machine's speed."""
    budget = spec.get("vips.fit_max_seconds")
    return spec if budget == 0.0 else spec.replace({"vips.fit_max_seconds": 0.0})


def parameters_markdown() -> str:
    """The parameter table as Markdown, as docs/node.md shows it."""
    lines = [
        "| parameter | default | type | allowed | read-only | description |",
        "|---|---|---|---|---|---|",
    ]
    for p in PARAMETERS:
        default = "[]" if p.default is None else repr(p.default)
        lines.append(
            f"| `{p.name}` | `{default}` | {p.type} | {p.allowed()} | "
            f"{'yes' if p.read_only else ''} | {p.description} |"
        )
    return "\n".join(lines)
