"""The jitter ladder and the solves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import NumericalError
from gp_mapper.engine.core.linalg import (
    JITTER_LADDER,
    Jitter,
    cholesky_with_jitter,
    solve_lower,
    solve_upper_t,
)


def test_rank_deficient_psd_matrix_climbs_the_ladder() -> None:
    v = torch.ones(4, 1, dtype=torch.float64)
    K = v @ v.mT  # rank one: PSD but singular
    L, used = cholesky_with_jitter(K, jitter=0.0)
    assert used.relative and used.value in JITTER_LADDER
    torch.testing.assert_close(L @ L.mT, K + used.value * torch.eye(4, dtype=torch.float64))


@pytest.mark.parametrize("variance", [1e-4, 1.0, 500.0])
def test_relative_jitter_scales_with_the_kernel_and_absolute_does_not(variance: float) -> None:
    K = variance * torch.eye(3, dtype=torch.float64)
    eye = torch.eye(3, dtype=torch.float64)
    L, used = cholesky_with_jitter(K, Jitter(1e-6))
    assert used == Jitter(1e-6)
    torch.testing.assert_close(L @ L.mT, (variance * (1 + 1e-6)) * eye)
    L, used = cholesky_with_jitter(K, Jitter(1e-6, relative=False))
    assert used == Jitter(1e-6, relative=False)
    torch.testing.assert_close(L @ L.mT, (variance + 1e-6) * eye)


def test_absolute_jitter_climbs_by_the_ladder_factors() -> None:
    v = torch.ones(4, 1, dtype=torch.float64)
    L, used = cholesky_with_jitter(v @ v.mT * 1e3, Jitter(1e-12, relative=False))
    assert not used.relative and used.value in (1e-12, 1e-10, 1e-8)
    torch.testing.assert_close(L @ L.mT, v @ v.mT * 1e3 + used.value * torch.eye(4).double())
    assert [j.value for j in Jitter(1e-6, relative=False).rungs()] == pytest.approx(
        [1e-6, 1e-4, 1e-2]
    )


def test_jitter_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        Jitter(-1e-6)
    with pytest.raises(ValueError, match="absolute jitter must be positive"):
        Jitter(0.0, relative=False)


def test_indefinite_matrix_raises_numerical_error() -> None:
    K = torch.diag(torch.tensor([1.0, -1.0], dtype=torch.float64))
    with pytest.raises(NumericalError, match="not positive definite"):
        cholesky_with_jitter(K)


def test_non_finite_matrix_raises() -> None:
    K = torch.tensor([[1.0, float("nan")], [float("nan"), 1.0]], dtype=torch.float64)
    with pytest.raises(NumericalError, match="non-finite"):
        cholesky_with_jitter(K)


def test_triangular_solves(rng: np.random.Generator) -> None:
    A = torch.as_tensor(rng.normal(size=(5, 5)))
    K = A @ A.mT + 5 * torch.eye(5, dtype=torch.float64)
    L, _ = cholesky_with_jitter(K, jitter=0.0)
    B = torch.as_tensor(rng.normal(size=(5, 3)))
    torch.testing.assert_close(L @ solve_lower(L, B), B)
    torch.testing.assert_close(L.mT @ solve_upper_t(L, B), B)
    torch.testing.assert_close(L @ solve_lower(L, B[:, 0]), B[:, 0])
