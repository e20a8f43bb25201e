"""The offline commands read the node's parameter file as the node does: ``/**``, the node's
name, or both (the node's own section over the wildcard)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gp_mapper.mapping import MapperConfig
from gp_mapper.mapping.errors import ConfigError
from gp_mapper.mapping.params_file import config_from_params_file, load_params_file

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "gp_mapper.yaml"


def _write(tmp_path: Path, doc: dict[str, object]) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_shipped_file_is_the_defaults() -> None:
    assert list(yaml.safe_load(SHIPPED.read_text())) == ["/**"]
    assert config_from_params_file(SHIPPED) == MapperConfig()


@pytest.mark.parametrize("key", ["/**", "gp_mapper", "/gp_mapper"])
def test_every_key_that_names_the_node_is_read(tmp_path: Path, key: str) -> None:
    """``gp_mapper:`` is the form of files written before the shipped one moved to ``/**``."""
    path = _write(tmp_path, {key: {"ros__parameters": {"batch_size": 77, "use_sim_time": True}}})
    assert load_params_file(path) == {"batch_size": 77}  # use_sim_time is ROS's, not ours
    assert config_from_params_file(path, resolution=0.5) == MapperConfig(
        batch_size=77, resolution=0.5
    )


def test_the_nodes_own_section_wins_over_the_wildcard(tmp_path: Path) -> None:
    path = _write(tmp_path, {
        "/**": {"ros__parameters": {"batch_size": 77, "resolution": 0.5}},
        "gp_mapper": {"ros__parameters": {"batch_size": 88}},
    })  # fmt: skip
    assert load_params_file(path) == {"batch_size": 88, "resolution": 0.5}


def test_a_file_for_other_nodes_only_is_refused_naming_its_sections(tmp_path: Path) -> None:
    path = _write(tmp_path, {"gp_localizer": {"ros__parameters": {"particles": 10}}})
    with pytest.raises(ConfigError, match=r"no 'ros__parameters' for node 'gp_mapper'.*gp_local"):
        load_params_file(path)
