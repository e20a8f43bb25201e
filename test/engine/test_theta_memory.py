"""The θ memory: each fitted window's curvature carried into the next fits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from gp_mapper.engine import EngineSpec, OnlineSparseGP, build_model
from gp_mapper.engine.core.kernels import Constant, SquaredExponential
from gp_mapper.engine.vips.theta_memory import ThetaMemory, curvature


def test_curvature_is_the_negative_hessian_with_negative_directions_clipped() -> None:
    p = nn.Parameter(torch.tensor([0.3, -1.2], dtype=torch.float64))
    A = torch.tensor([[3.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    a = torch.tensor([1.0, 0.5], dtype=torch.float64)
    concave = curvature(lambda: -0.5 * (p - a) @ (A @ (p - a)), [p])
    torch.testing.assert_close(concave, A, rtol=1e-12, atol=1e-12)
    # A saddle carries evidence along its concave direction only.
    saddle = curvature(lambda: -1.5 * p[0] ** 2 + 0.5 * p[1] ** 2, [p])
    torch.testing.assert_close(saddle, torch.diag(torch.tensor([3.0, 0.0]).double()))
    memory = ThetaMemory(a, A)
    with torch.no_grad():
        expected = float(-0.5 * (p - a) @ (A @ (p - a)))
        assert float(memory.log_density([p])) == pytest.approx(expected, rel=1e-12)


def windows(n: int = 40, count: int = 3, seed: int = 0):
    """Windows along parallel lines through a smooth field (µT)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(count):
        t = torch.linspace(0.0, 5.0, n, dtype=torch.float64)
        X = torch.stack([t, torch.full_like(t, 0.7 * i)], dim=1)
        f = 48.0 + 4.0 * torch.sin(2.0 * X[:, 0]) * torch.cos(1.5 * X[:, 1])
        out.append((X, f + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)))
    return out


def engine(memory: bool) -> OnlineSparseGP:
    kernel = Constant(500.0) + SquaredExponential(5.0, 0.8)
    return OnlineSparseGP(kernel, 0.05, device="cpu", fit_iterations=10, theta_memory=memory)


def raw(model: OnlineSparseGP) -> torch.Tensor:
    return state_theta(model.state_dict())


def state_theta(state: dict) -> torch.Tensor:
    keys = sorted(k for k in state if k.startswith("kernel.") or k == "noise.raw_variance")
    return torch.as_tensor(np.concatenate([np.ravel(state[k]) for k in keys]))


def test_memory_grows_with_each_fitted_window_and_holds_theta_against_one() -> None:
    first, second, third = windows()
    model = engine(True)
    model.update(*first)
    one = model.state_dict()["theta_memory.precision"]
    model.update(*second)
    two = model.state_dict()["theta_memory.precision"]
    assert np.trace(two) > np.trace(one) > 0.0  # each fitted window adds its evidence
    assert np.all(np.linalg.eigvalsh(two) >= -1e-9)
    # Kept but not re-fitted: a window joined under the current θ adds nothing.
    model.update(*third, fit=False)
    np.testing.assert_array_equal(model.state_dict()["theta_memory.precision"], two)
    # Evidence worth a million windows pins θ; without it the same window moves θ.
    pinned, free = engine(True), engine(False)
    for m in (pinned, free):
        m.update(*first)
    centre = pinned._memory.centre
    pinned._memory = ThetaMemory(centre, 1.0e6 * torch.eye(centre.shape[0], dtype=centre.dtype))
    before = raw(free)
    pinned.update(*second)
    free.update(*second)
    assert float((raw(pinned) - before).abs().max()) < 1e-3
    assert float((raw(free) - before).abs().max()) > 1e-2


def test_the_memory_survives_the_state_and_old_states_have_none() -> None:
    model = engine(True)
    first, second, third = windows()
    model.update(*first)
    model.update(*second)
    state = model.state_dict()
    assert state["theta_memory.precision"].shape == (4, 4)  # constant, variance, ℓ, noise
    assert np.all(np.linalg.eigvalsh(state["theta_memory.precision"]) >= -1e-9)
    restored = OnlineSparseGP.from_state(state, device="cpu")
    assert restored.theta_memory
    a, b = model.update(*third), restored.update(*third)
    assert a.hyperparameters == b.hyperparameters  # bit for bit, the memory included
    old = {k: v for k, v in state.items() if not k.startswith("theta_memory")}
    assert not OnlineSparseGP.from_state(old, device="cpu").theta_memory
    bad = {**state, "theta_memory.precision": np.eye(3)}
    with pytest.raises(Exception, match="theta_memory"):
        OnlineSparseGP.from_state(bad, device="cpu")


def test_the_setting_reaches_the_engine() -> None:
    assert build_model(EngineSpec(vips_theta_memory=True, device="cpu"), 2).theta_memory
    assert not build_model(EngineSpec(device="cpu"), 2).theta_memory
