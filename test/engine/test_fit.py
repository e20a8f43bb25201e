"""The shared L-BFGS pieces of ``engine.core.fit``."""

from __future__ import annotations

import torch

from gp_mapper.engine.core.fit import single_step_lbfgs


def test_single_step_lbfgs_shortens_an_overshooting_step() -> None:
    # Torch caps a step's evaluations at 1.25·max_iter: with max_iter=1 the line search had no
    # trial left and took the overshooting step whole.
    p = torch.nn.Parameter(torch.tensor([3.0], dtype=torch.float64))
    optimiser = single_step_lbfgs([p], lr=10.0)

    def closure() -> torch.Tensor:
        optimiser.zero_grad()
        loss = 1000.0 * ((p - 1.0) ** 2).sum()
        loss.backward()
        return loss.detach()

    before = float(closure())
    optimiser.step(closure)
    assert float(closure()) < before
