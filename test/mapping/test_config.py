from __future__ import annotations

import dataclasses

import pytest

from gp_mapper.engine import EngineSpec, Oips, Vips
from gp_mapper.engine.setting import GROUPS, SETTING_TYPES
from gp_mapper.engine.settings import engine_settings, setting_by_name, streaming_models
from gp_mapper.mapping import (
    ENGINE_PARAMETER_NAMES,
    PARAMETER_BY_NAME,
    PARAMETERS,
    ConfigError,
    MapperConfig,
    parameters_markdown,
)
from gp_mapper.mapping.config import NODE_ENGINE_DEFAULTS, validate

NUMERIC = [p for p in PARAMETERS if p.min is not None and p.max is not None]


def test_table_is_well_formed() -> None:
    names = [p.name for p in PARAMETERS]
    assert len(names) == len(set(names))
    for p in PARAMETERS:
        assert p.type in SETTING_TYPES, p.name
        assert p.group in GROUPS, p.name
        assert p.description, p.name
        assert validate(p, p.default) == p.default, p.name


def test_mapper_config_fields_are_the_table() -> None:
    fields = {f.name for f in dataclasses.fields(MapperConfig)} - {"engine"}
    mapping_rows = {p.name for p in PARAMETERS if p.group != "engine"}
    assert fields == mapping_rows
    config = MapperConfig()
    for name in mapping_rows:
        assert getattr(config, name) == PARAMETER_BY_NAME[name].default, name


def test_engine_rows_are_the_engine_settings_the_node_uses() -> None:
    # The engine's settings table is the one source: every setting of a spec (its shared
    # fields and each model's typed settings) is a row, the node declares those of its
    # streaming model (and the shared ones), with the same defaults and ranges, and the spec's
    # defaults are the table's; the node's own defaults (NODE_ENGINE_DEFAULTS) are the node
    # config's and its parameter rows'.
    assert set(EngineSpec().to_dict()) == set(setting_by_name())
    shared = {f.name for f in dataclasses.fields(EngineSpec)} - {"sections"}
    assert shared == {s.name for s in engine_settings() if "." not in s.name}
    node = {
        s.name for s in engine_settings() if not s.models or set(s.models) & set(streaming_models())
    }
    assert set(ENGINE_PARAMETER_NAMES) == node
    assert set(NODE_ENGINE_DEFAULTS) <= node
    spec, node_spec = EngineSpec(), MapperConfig().engine
    for name in ENGINE_PARAMETER_NAMES:
        row, setting = PARAMETER_BY_NAME[name], setting_by_name()[name]
        assert spec.get(name) == setting.default, name
        assert node_spec.get(name) == row.default, name
        assert row.default == NODE_ENGINE_DEFAULTS.get(name, setting.default), name
        assert (row.min, row.max) == (setting.min, setting.max), name
    assert PARAMETER_BY_NAME["model"].choices == streaming_models()  # the node streams


@pytest.mark.parametrize(
    ("name", "value"), [("vips.delta", 0.0), ("vips.rho", 0.0), ("vips.delta", 1.0)]
)
def test_a_value_the_table_refuses_is_one_the_engine_refuses(name: str, value: float) -> None:
    # Before, the table took delta = 0 and rho = 0, which Vips/Oips then refused at start-up.
    with pytest.raises(ConfigError, match=name):
        MapperConfig.from_dict({name: value})
    with pytest.raises(ValueError, match=name):
        EngineSpec({name: value})
    selector = {"vips.delta": Vips, "vips.rho": Oips}[name]
    with pytest.raises(ValueError, match=name):
        selector(value)
    edge = setting_by_name()[name].min if value == 0.0 else setting_by_name()[name].max
    MapperConfig.from_dict({name: edge})  # the table's own edge is accepted...
    selector(edge)  # ...and so is it by the engine


def test_frames_and_topics_are_read_only() -> None:
    for name in ("map_frame", "mag_topic", "pose_topic", "pose_type", "target", "input_dims"):
        assert PARAMETER_BY_NAME[name].read_only, name
    assert not PARAMETER_BY_NAME["batch_size"].read_only
    assert PARAMETER_BY_NAME["map_frame"].default == "map"
    assert PARAMETER_BY_NAME["pose_type"].choices == (
        "pose_stamped",
        "pose_with_covariance",
        "odometry",
    )


def test_dict_round_trip_is_flat_and_exact() -> None:
    config = MapperConfig.from_dict(
        {"batch_size": 50, "bounds": [0, 4, -1, 3], "vips.delta": 0.095, "device": "cpu"}
    )
    flat = config.to_dict()
    assert list(flat) == [p.name for p in PARAMETERS]
    assert (
        flat["batch_size"] == 50 and flat["vips.delta"] == 0.095 and flat["bounds"] == [0, 4, -1, 3]
    )
    assert config.bounds == (0.0, 4.0, -1.0, 3.0)
    assert config.engine.get("vips.delta") == 0.095 and config.engine.device == "cpu"
    assert MapperConfig.from_dict(flat) == config
    assert MapperConfig.from_dict({}) == MapperConfig()


def test_replace_changes_one_flat_value() -> None:
    config = MapperConfig().replace(resolution=0.25, fit_iterations=5)
    assert config.resolution == 0.25 and config.engine.fit_iterations == 5


def test_int_is_accepted_for_float_and_stored_as_float() -> None:
    config = MapperConfig.from_dict({"batch_period": 5, "bounds": []})
    assert config.batch_period == 5.0 and isinstance(config.batch_period, float)
    assert config.bounds is None


@pytest.mark.parametrize("info", NUMERIC, ids=lambda p: p.name)
def test_out_of_range_names_the_parameter(info) -> None:
    span = info.max - info.min
    for bad in (info.min - max(1, span), info.max + max(1, span)):
        value = int(bad) if info.type == "int" else float(bad)
        with pytest.raises(ConfigError, match=info.name):
            MapperConfig.from_dict({info.name: value})


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"batch_size": 10.5}, "batch_size must be an integer"),
        ({"batch_size": True}, "batch_size must be an integer"),
        ({"resolution": "0.1"}, "resolution must be a number"),
        ({"resolution": float("nan")}, "resolution must be finite"),
        ({"target": "magnitude"}, "target must be one of: norm, x, y, z, vector"),
        ({"input_dims": 4}, "input_dims"),
        ({"pose_type": "tf"}, "pose_type"),
        ({"device": "gpu"}, "device must match"),
        ({"ard": 1}, "ard must be a bool"),
        ({"bounds": [0, 1, 2]}, "bounds"),
        ({"bounds": [1, 0, 0, 1]}, "xmin < xmax"),
        ({"bounds": "0 1 0 1"}, "bounds must be a list"),
        ({"no_such_thing": 1}, "unknown parameter.*no_such_thing"),
    ],
)
def test_bad_values_are_refused_with_a_clear_message(values, match) -> None:
    with pytest.raises(ConfigError, match=match):
        MapperConfig.from_dict(values)


def test_config_error_is_a_value_error_and_config_is_frozen() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        MapperConfig(batch_size=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        MapperConfig().batch_size = 3  # type: ignore[misc]


def test_device_pattern_accepts_numbered_cuda() -> None:
    assert MapperConfig.from_dict({"device": "cuda:1"}).engine.device == "cuda:1"


def test_markdown_lists_every_parameter() -> None:
    text = parameters_markdown()
    for p in PARAMETERS:
        assert f"`{p.name}`" in text
    assert text.count("\n") == len(PARAMETERS) + 1


def test_a_vector_target_and_a_vector_model_go_together() -> None:
    config = MapperConfig.from_dict({"target": "vector", "model": "potential"})
    assert config.target == "vector" and config.engine.model == "potential"
    assert config.replace(input_dims=3).target == "vector"
    with pytest.raises(ConfigError, match=r"target: vector needs .*potential.*'vips'"):
        MapperConfig.from_dict({"target": "vector"})
    for target in ("norm", "x", "y", "z"):
        with pytest.raises(ConfigError, match=f"'potential'.*target: vector.*'{target}'"):
            MapperConfig.from_dict({"model": "potential", "target": target})
    with pytest.raises(ConfigError, match="target: vector"):
        MapperConfig(target="vector", engine=EngineSpec(model="vips"))


def test_nuisance_components_need_an_additive_model() -> None:
    streamed = MapperConfig.from_dict(
        {"model": "gam_stream", "gam.components": "offset+map+heading"}
    )
    assert streamed.engine.get("gam.components") == "offset+map+heading"
    assert MapperConfig.from_dict({"gam.components": "offset+map"}).engine.model == "vips"
    with pytest.raises(ConfigError, match=r"\(heading, drift\).*model: gam_stream.*'vips'"):
        MapperConfig.from_dict({"gam.components": "offset+map+heading+drift"})


def test_each_model_reads_its_own_typed_settings_namespaced_as_ros_parameters() -> None:
    from gp_mapper.engine.acgp.settings import AcgpSettings
    from gp_mapper.engine.vips.settings import VipsSettings

    spec = EngineSpec({"model": "acgp", "acgp.block_size": 500}, kernel="se")
    assert spec.section(AcgpSettings) == AcgpSettings(block_size=500)
    assert spec.section(AcgpSettings).block_size == spec.get("acgp.block_size") == 500
    assert spec.section(VipsSettings).delta == setting_by_name()["vips.delta"].default
    # By keyword, the dot as an underscore, or the model's whole settings object.
    assert EngineSpec(acgp_block_size=500, model="acgp", kernel="se") == spec
    assert EngineSpec(acgp=AcgpSettings(block_size=500), model="acgp", kernel="se") == spec
    assert spec.replace({"acgp.rel_tol": 0.5}).get("acgp.rel_tol") == 0.5
    with pytest.raises(ValueError, match=r"acgp\.block_size"):
        AcgpSettings(block_size=1)  # its row's range, naming the parameter
    with pytest.raises(ValueError, match="unknown setting"):
        EngineSpec({"acgp.no_such": 1})
    with pytest.raises(TypeError, match="unknown keyword"):
        EngineSpec(no_such=1)
    assert {row.name for row in AcgpSettings.rows()} <= set(PARAMETER_BY_NAME) | set(
        setting_by_name()
    )


def test_a_flat_name_of_the_last_release_is_read_with_a_warning() -> None:
    with pytest.warns(FutureWarning) as caught:
        config = MapperConfig.from_dict({"delta": 0.05, "gam_run_gap": 2.0})
    assert [str(w.message).split(" is ")[0] for w in caught] == [
        "setting 'delta'", "setting 'gam_run_gap'"
    ]  # fmt: skip
    assert "use 'vips.delta'" in str(caught[0].message)
    assert config.engine.get("vips.delta") == 0.05 and config.engine.get("gam.run_gap") == 2.0
    with pytest.warns(FutureWarning, match="'solve_inducing' is deprecated"):
        spec = EngineSpec(model="solvegp", solve_inducing=64)
    assert spec.get("solvegp.inducing") == 64
    with pytest.warns(FutureWarning, match="'components' is deprecated"):
        assert MapperConfig().replace(components="offset+map").engine.get("gam.components")


def test_a_params_file_nests_a_models_settings_as_ros_does(tmp_path) -> None:
    from gp_mapper.mapping.params_file import config_from_params_file

    path = tmp_path / "p.yaml"
    path.write_text("/**:\n  ros__parameters:\n    batch_size: 50\n    vips:\n      delta: 0.05\n"
                    "    gam.run_gap: 2.0\n")  # fmt: skip
    config = config_from_params_file(path)
    assert config.batch_size == 50 and config.engine.get("vips.delta") == 0.05
    assert config.engine.get("gam.run_gap") == 2.0
    path.write_text(
        "/**:\n  ros__parameters:\n    vips:\n      delta: 0.05\n    vips.delta: 0.06\n"
    )
    with pytest.raises(ConfigError, match=r"vips\.delta is given twice"):
        config_from_params_file(path)
