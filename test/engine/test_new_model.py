"""Adding a model is its own package and one line of the registry: a toy model (the exact GP at
fixed θ) written to a package outside the engine is built, fitted, saved and read back by name."""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from gp_mapper.engine import (
    BatchModel,
    EngineSpec,
    build_model,
    model_entry,
    model_from_state,
    model_names,
    registry,
)

ENTRY = '''
"""A toy model: the exact GP with θ as configured (no fit)."""

from typing import ClassVar

from gp_mapper.engine.exact.gp import ExactGP
from gp_mapper.engine.registry import ModelEntry, model_kind
from gp_mapper.engine.spec import DTYPES, EngineSpec, build_kernel


class FixedThetaGP(ExactGP):
    name: ClassVar[str] = "fixed_theta"


def build(spec: EngineSpec, input_dim: int) -> FixedThetaGP:
    return FixedThetaGP(build_kernel(spec, input_dim), spec.noise_variance,
                        device=spec.device, dtype=DTYPES[spec.dtype], fit_iterations=0)


def entry(name: str) -> ModelEntry:
    return ModelEntry(name, model_kind(name), "the exact GP at the configured θ", build,
                      FixedThetaGP.from_state, lambda n: {}, support_label="data points")
'''


@pytest.fixture
def toy_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    package = tmp_path / "toys" / "fixed_theta"  # a package outside the engine: a dotted path
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "entry.py").write_text(textwrap.dedent(ENTRY))
    monkeypatch.syspath_prepend(str(tmp_path))
    # The one line of the registry.
    monkeypatch.setitem(registry._MODELS, "fixed_theta", ("batch", "toys.fixed_theta"))
    yield "fixed_theta"
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
