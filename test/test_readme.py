"""The README is a front page that links the docs; the docs document every node parameter."""

from __future__ import annotations

import re

from gp_mapper.mapping.config import PARAMETERS, parameters_markdown

from .conftest import REPO_ROOT

# A front page a user reads in a few minutes; the rest is in docs/.
MAX_README_LINES = 250


def test_readme_is_a_front_page_with_the_two_commands() -> None:
    text = (REPO_ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= MAX_README_LINES
    assert "make demo" in text and "make test" in text
    for name in ("cli.md", "node.md", "engine.md", "benchmarks.md"):
        assert f"(docs/{name})" in text, name


def test_every_relative_link_of_the_readme_and_the_docs_exists() -> None:
    pages = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)#]+)\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"


def test_the_node_page_holds_the_parameter_table_as_generated() -> None:
    text = (REPO_ROOT / "docs" / "node.md").read_text()
    missing = [p.name for p in PARAMETERS if f"`{p.name}`" not in text]
    assert not missing, f"docs/node.md does not document: {missing}"
    # The table itself is the parameter table's rendering: regenerate it with
    # gp_mapper.mapping.config.parameters_markdown() when a parameter changes.
    assert parameters_markdown() in text


def test_the_localization_page_holds_its_parameter_table_as_generated() -> None:
    from gp_mapper.mapping.localization.settings import parameters_markdown as localizer_table

    text = (REPO_ROOT / "docs" / "localization.md").read_text()
    assert localizer_table() in text


def test_the_engine_page_holds_the_settings_table_as_generated() -> None:
    from gp_mapper.engine.settings import settings_markdown

    assert settings_markdown() in (REPO_ROOT / "docs" / "engine.md").read_text()
