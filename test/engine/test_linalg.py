"""The jitter ladder and the solves."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import NumericalError
from gp_mapper.engine.linalg import JITTER_LADDER, cholesky_with_jitter, solve_lower, solve_upper_t


def test_rank_deficient_psd_matrix_climbs_the_ladder() -> None:
    v = torch.ones(4, 1, dtype=torch.float64)
    K = v @ v.mT  # rank one: PSD but singular
    L, used = cholesky_with_jitter(K, jitter=0.0)
    assert used > 0.0 and used in JITTER_LADDER
    torch.testing.assert_close(L @ L.mT, K + used * torch.eye(4, dtype=torch.float64))


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
