"""The README documents every node parameter and the two commands."""

from __future__ import annotations

from gp_mapper.mapping.config import PARAMETERS

from .conftest import REPO_ROOT


def test_readme_lists_every_parameter_and_the_two_commands() -> None:
    text = (REPO_ROOT / "README.md").read_text()
    missing = [p.name for p in PARAMETERS if f"`{p.name}`" not in text]
    assert not missing, f"README.md does not document: {missing}"
    assert "make demo" in text and "make test" in text
