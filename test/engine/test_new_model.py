"""Adding a model is its own package and one call: a toy model (the exact GP at fixed θ, its
noise scaled by a setting of its own) written to a package outside the engine is registered
with ``register_model``, built, fitted, saved and read back by name, and its setting joins the
engine's table and reaches its builder."""

from __future__ import annotations

import argparse
import io
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.commands.fit import add_fit_arguments
from gp_mapper.engine import (
    BatchModel,
    EngineSpec,
    build_model,
    model_entry,
    model_from_state,
    model_names,
    register_model,
    registry,
    unregister_model,
)
from gp_mapper.engine.settings import setting_by_name, settings_markdown
from gp_mapper.mapping.batch_fit import fit_config
from gp_mapper.mapping.errors import ConfigError

SETTINGS = """
from dataclasses import dataclass
from typing import ClassVar

from gp_mapper.engine.model_settings import ModelSettings, setting


@dataclass(frozen=True)
class FixedThetaSettings(ModelSettings):
    NAMESPACE: ClassVar[str] = "fixed_theta"
    MODELS: ClassVar[tuple[str, ...]] = ("fixed_theta",)

    noise_scale: float = setting(1.0, "float",
                                 "the configured noise variance is multiplied by this",
                                 min=0.01, max=100.0)


SECTION = FixedThetaSettings
"""

ENTRY = '''
"""A toy model: the exact GP with θ as configured (no fit)."""

from typing import ClassVar

from gp_mapper.engine import EngineSpec, ModelEntry
from gp_mapper.engine.exact.gp import ExactGP
from gp_mapper.engine.spec import DTYPES, build_kernel

from .settings import FixedThetaSettings


class FixedThetaGP(ExactGP):
    name: ClassVar[str] = "fixed_theta"


def build(spec: EngineSpec, input_dim: int) -> FixedThetaGP:
    noise = spec.noise_variance * spec.section(FixedThetaSettings).noise_scale
    return FixedThetaGP(build_kernel(spec, input_dim), noise, device=spec.device,
                        dtype=DTYPES[spec.dtype], fit_iterations=0)


def entry(name: str) -> ModelEntry:
    return ModelEntry(name, "batch", "the exact GP at the configured θ", build,
                      FixedThetaGP.from_state, lambda n: {}, support_label="data points")
'''


@pytest.fixture
def toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    package = tmp_path / "toys" / "fixed_theta"  # a package outside the engine: a dotted path
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(textwrap.dedent(SETTINGS))
    (package / "entry.py").write_text(textwrap.dedent(ENTRY))
    monkeypatch.syspath_prepend(str(tmp_path))
    register_model("fixed_theta", "batch", "toys.fixed_theta")  # the one call
    yield "fixed_theta"
    unregister_model("fixed_theta")
    for name in [m for m in sys.modules if m.startswith("toys")]:
        del sys.modules[name]


def test_a_model_in_its_own_package_is_built_fitted_and_read_back(toy_package: str) -> None:
    assert toy_package in model_names("batch")
    assert "toys.fixed_theta" in registry.model_packages()
    model = build_model(EngineSpec(model=toy_package, device="cpu", kernel="se"), 2)
    assert isinstance(model, BatchModel) and model.name == toy_package
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 3.0, (40, 2))
    y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(40)
    theta = model.hyperparameters()
    assert model.fit(X, y).accepted and model.hyperparameters() == theta  # no fit of θ
    buffer = io.BytesIO()
    np.savez(buffer, **model.state_dict())
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as saved:
        again = model_from_state(dict(saved), device="cpu", expected=toy_package)
    Xs = torch.tensor([[1.0, 1.0], [2.5, 0.5]], dtype=torch.float64)
    for a, b in zip(model.predict(Xs), again.predict(Xs), strict=True):
        torch.testing.assert_close(a, b, rtol=0.0, atol=0.0)
    assert model_entry(toy_package).support_label == "data points"


def test_its_setting_joins_the_table_and_reaches_its_builder(toy_package: str) -> None:
    row = setting_by_name()["fixed_theta.noise_scale"]
    assert row.models == (toy_package,) and row.default == 1.0
    _, spec = fit_config(toy_package, {"fixed_theta.noise_scale": 4.0, "noise_variance": 0.5})
    section = type(spec.sections[-1])  # its typed settings, as its builder reads them
    assert section.__name__ == "FixedThetaSettings" and spec.section(section).noise_scale == 4.0
    assert spec.get("fixed_theta.noise_scale") == 4.0
    assert spec.to_dict()["fixed_theta.noise_scale"] == 4.0
    model = build_model(spec.replace(device="cpu"), 2)
    assert model.noise_variance == pytest.approx(2.0)
    assert EngineSpec(model=toy_package).get("fixed_theta.noise_scale") == 1.0
    assert (
        EngineSpec(model=toy_package, fixed_theta_noise_scale=3.0).get("fixed_theta.noise_scale")
        == 3.0
    )  # by keyword, the dot as an underscore
    with pytest.raises(ConfigError, match=r"fixed_theta\.noise_scale"):
        fit_config(toy_package, {"fixed_theta.noise_scale": 1000.0})
    with pytest.raises(ValueError, match="unknown setting"):
        EngineSpec({"fixed_theta.other": 2.0})
    # In the generated documentation and the fit command's help.
    assert "`fixed_theta.noise_scale`" in settings_markdown()
    parser = argparse.ArgumentParser()
    add_fit_arguments(parser)
    assert "fixed_theta: fixed_theta.noise_scale" in parser.format_help()


def test_the_table_refuses_what_it_cannot_hold(toy_package: str) -> None:
    register_model(toy_package, "batch", "toys.fixed_theta")  # the same again: allowed
    with pytest.raises(ValueError, match="already registered"):
        register_model(toy_package, "streaming", "toys.fixed_theta")
    with pytest.raises(ValueError, match="already registered"):
        register_model("acgp", "batch", "toys.fixed_theta")
    with pytest.raises(ValueError, match="name"):
        register_model("Fixed-Theta", "batch", "toys.fixed_theta")
    with pytest.raises(ValueError, match="kind"):
        register_model("other", "online", "toys.fixed_theta")
    with pytest.raises(ValueError, match="package"):
        register_model("other", "batch", "toys/fixed_theta")
    with pytest.raises(ValueError, match="engine's own"):
        unregister_model("acgp")


def test_an_unregistered_model_leaves_with_its_settings(toy_package: str) -> None:
    assert "fixed_theta.noise_scale" in setting_by_name()
    unregister_model(toy_package)
    try:
        assert toy_package not in model_names()
        assert "fixed_theta.noise_scale" not in setting_by_name()
        with pytest.raises(ValueError, match="unknown model"):
            model_entry(toy_package)
    finally:
        register_model(toy_package, "batch", "toys.fixed_theta")  # for the fixture's teardown


def test_an_installed_package_lists_its_model_as_an_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[project.entry-points."gp_mapper.models"] fixed_theta = "toys.fixed_theta"`` in an
    installed package's metadata: the model is registered at start, with no call of its own."""
    package = tmp_path / "toys" / "fixed_theta"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(textwrap.dedent(SETTINGS))
    (package / "entry.py").write_text(textwrap.dedent(ENTRY))
    info = tmp_path / "toys-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toys\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{registry.MODELS_GROUP}]\nfixed_theta = toys.fixed_theta\nbroken = toys.missing\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problems = registry.load_installed_models()
        assert "fixed_theta" in model_names("batch")
        assert "fixed_theta.noise_scale" in setting_by_name()
        assert len(problems) == 1 and "'broken' (toys.missing) not loaded" in problems[0]
    finally:
        unregister_model("fixed_theta")
        for name in [m for m in sys.modules if m.startswith("toys")]:
            del sys.modules[name]
