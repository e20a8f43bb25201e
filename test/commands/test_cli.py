"""``gp-mapper`` as a user types it: help pages with examples, exit codes of bad inputs."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from gp_mapper.cli import COMMANDS, main
from gp_mapper.engine import model_names

# reStructuredText a terminal shows raw: ``literal``, :role:`target`.
RAW_MARKUP = re.compile(r"``|:[a-z]+:`")
HAS_RCLPY = importlib.util.find_spec("rclpy") is not None
NEEDS_RCLPY = {"play", "record"}


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_commands_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help([], capsys)
    assert not RAW_MARKUP.search(text), text
    assert "examples:" in text
    # the example block keeps its line breaks (RawDescriptionHelpFormatter)
    assert "\n  gp-mapper demo\n" in text
    for name in COMMANDS:
        assert name in text
    flat = " ".join(text.split())  # argparse wraps the help lines
    assert ", ".join(model_names()) in flat


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_help_shows_examples_without_markup(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if command in NEEDS_RCLPY and not HAS_RCLPY:
        pytest.skip(f"gp-mapper {command} needs rclpy (ros-jazzy-rclpy wheels)")
    text = _help([command], capsys)
    assert not RAW_MARKUP.search(text), text
    assert "examples:" in text and f"gp-mapper {command} " in text


@pytest.mark.parametrize("source", ["aalto", "synthetic"])
def test_convert_sources_show_examples(source: str, capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["convert", source], capsys)
    assert not RAW_MARKUP.search(text), text
    assert "examples:" in text


@pytest.mark.skipif(not HAS_RCLPY, reason="gp-mapper play needs rclpy (ros-jazzy-rclpy wheels)")
def test_play_of_a_missing_bag_exits_2_like_the_other_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.mcap"
    assert main(["play", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gp-mapper play: error:" in err and str(missing) in err
    assert main(["replay", str(missing), "--out", str(tmp_path / "out")]) == 2
    assert main(["convert", "aalto", str(tmp_path / "no_data"), str(tmp_path / "o")]) == 2


def test_a_bag_missing_both_topics_names_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = tmp_path / "renamed.mcap"
    argv = ["--mag-topic", "/robot/mag", "--pose-topic", "/robot/pose", "--duration", "2"]
    assert main(["convert", "synthetic", str(bag), *argv]) == 0
    capsys.readouterr()
    assert main(["replay", str(bag), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    # one answer that names both, not a fix-one-rerun-find-the-next loop
    assert "no topics /imu/mag and /pose" in err, err
    assert "/robot/mag" in err and "/robot/pose" in err
