"""The Gaussian likelihood's expected log density under a Gaussian marginal of the predictor."""

from __future__ import annotations

from torch import Tensor

from ..core.linalg import LOG_2PI


def gaussian_expected_log_likelihood(
    y: Tensor, mean: Tensor, variance: Tensor, noise_variance: Tensor
) -> Tensor:
    """``Σ_n E_{ρ_n ~ N(mean_n, variance_n)} log N(y_n; ρ_n, σ²)`` (Adam et al. 2018, App. C).

    Args:
        y, mean, variance: [N] targets and the marginals of ρ(x_n) = Σ_c f_c(x_n).
        noise_variance: σ² (scalar tensor).
    """
    r = y - mean
    n = y.shape[0]
    return -0.5 * (
        n * (LOG_2PI + noise_variance.log()) + ((r * r).sum() + variance.sum()) / noise_variance
    )
