"""Fit offline, continue live: a fitted SVGP / SOLVE posterior as the stream's carried posterior.

Our extension, not in either paper: SOLVE's q(f) is p(f | u, v) q(u, v) (Shi, Titsias & Mnih
2020, Sec. 3.3), so it is a valid "old posterior" over a = f(W), W = [Z; O], for the Bui
online bound the streaming engine (VIPS) runs. The stream carries q(a) in whitened natural
form (``vips.posterior.CarriedPosterior``): ``q(a) = N(L D⁻¹ v, L D⁻¹ Lᵀ)`` with
L = chol(K(W, W) + εI) and D = I + P.

The SOLVE prior factor by blocks ``L_W = [[L_u, 0], [Aᵀ, L_v]]`` is exactly chol(K_WW + εI),
and q in the orthogonal whitened coordinates is ``N(m̃, S̃)``, S̃ = blockdiag(S̃_u, S̃_v), with
a = L_W w̃. So ``L = L_W``, ``D = S̃⁻¹``, ``v = S̃⁻¹ m̃``: D, P and L_D are block-diagonal and
each block comes from the M- or M2-sized factor of S̃ alone; no (M+M2)-sized inverse is formed.
For ``odvgp`` (S̃_v = I) the O block is D = I, P = 0, v = m̃_v. With target scaling s the data's
units have L = s·L_W and the same P, v, L_D (the whitened form is unit-free).

P = S̃⁻¹ − I is positive semi-definite when q is at its optimum for the Gaussian likelihood
(S̃⁻¹ = I + σ⁻² B Bᵀ); after SGD a direction may have S̃ above the prior, i.e. P indefinite.
Prediction would not mind (D = S̃⁻¹ is positive definite either way), but the stream does: P
is the precision of the Bui pseudo-observations, and with a negative eigenvalue the
online bound's ``−½ tr(P (K_aa − Q_aa))`` grows without limit as θ moves, so the first
L-BFGS fit after a resume runs θ away (a 32 + 32 fit of two epochs: eigenvalues of P down to
−0.999, i.e. S̃ 2000 times the prior's variance, and a resumed map off by 10⁶ µT). The
conversion therefore clips P's negative eigenvalues to 0: in those directions q falls back to
the prior, which the data had not narrowed, and the mean m̃ is kept.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ..core.linalg import cholesky_with_jitter
from ..core.noise import NOISE_FLOOR
from ..vips.online_sgp import (
    DEFAULT_FIT_ITERATIONS,
    DEFAULT_MAX_INDUCING,
    DEFAULT_PASS_NOISE_VARIANCE,
    OnlineSparseGP,
)
from ..vips.posterior import CarriedPosterior
from ..vips.selectors import Selector
from .model import SolveGP
from .predict import SolvePosterior
from .svgp import lower_factor_of_inverse

# The whitened prior is N(0, I): a relative jitter on S̃ multiplies 1.
WHITENED_PRIOR_SCALE = 1.0


class CarriedBlocks(NamedTuple):
    """One block's share of the carried posterior: D = L_D L_Dᵀ = S̃⁻¹ (P's negative eigenvalues
    clipped to 0), P = D − I, v = D m̃."""

    L_D: Tensor
    P: Tensor
    v: Tensor


def _block(m: Tensor, L: Tensor | None) -> CarriedBlocks:
    """The carried share of one block of q, N(m̃, L̃ L̃ᵀ), without forming S̃ or S̃⁻¹ by a product.

    L_D comes from a QR of L̃ (``lower_factor_of_inverse``), as well conditioned as L̃ itself;
    a Cholesky of L̃ L̃ᵀ would square its condition number and fail for a q that SGD has made
    nearly singular (a 256 + 256 magnetometer fit). Where L̃ is singular to working precision
    the jitter ladder widens S̃ by εI before its inverse is taken, ε relative to the whitened
    prior's covariance I (so the variance grows by at most ε of the prior's). v = L_D L_Dᵀ m̃ is
    formed from L_D, so that the stream's solves against L_D give m̃ back to working precision.
    """
    n = m.shape[0]
    eye = torch.eye(n, dtype=m.dtype, device=m.device)
    if L is None:  # S̃ = I: the block carries no data precision
        return CarriedBlocks(eye, torch.zeros_like(eye), m.clone())
    L_D, _ = lower_factor_of_inverse(L, scale=WHITENED_PRIOR_SCALE)
    D = L_D @ L_D.mT
    P = 0.5 * (D + D.mT) - eye
    eigenvalues, vectors = torch.linalg.eigh(P)
    if bool(eigenvalues.min() < 0.0):  # q wider than the prior somewhere: no valid pseudo-data
        P = (vectors * eigenvalues.clamp(min=0.0)) @ vectors.mT
        P = 0.5 * (P + P.mT)
        L_D, _ = cholesky_with_jitter(eye + P, jitter=0.0)
    return CarriedBlocks(L_D, P, L_D @ (L_D.mT @ m))


@torch.no_grad()
def to_carried(posterior: SolvePosterior) -> CarriedPosterior:
    """The carried posterior over W = [Z; O] in the data's units.

    Raises:
        ValueError: the fit was centred (``standardise="centre"``): its prior mean is the data
            mean, which the zero-mean stream cannot represent.
    """
    if posterior.shift != 0.0:
        raise ValueError(
            "a centred fit (shift != 0) cannot continue as the zero-mean stream: "
            "fit with standardise='scale' (the constant kernel part carries the offset)"
        )
    f, q = posterior.factors, posterior.q
    M, M2 = posterior.num_inducing, posterior.num_orthogonal
    L_W = torch.zeros((M + M2, M + M2), dtype=f.L_u.dtype, device=f.L_u.device)
    L_W[:M, :M] = f.L_u
    if M2:
        L_W[M:, :M] = f.A.mT
        L_W[M:, M:] = f.L_v
    u = _block(q.m_u, q.L_u)
    blocks = [u] if M2 == 0 else [u, _block(q.m_v, q.L_v)]
    dtype = posterior.Z.dtype
    return CarriedPosterior(
        posterior.support,
        (posterior.scale * L_W).to(dtype),
        torch.block_diag(*(b.P for b in blocks)).to(dtype),
        torch.cat([b.v for b in blocks]).to(dtype),
        torch.block_diag(*(b.L_D for b in blocks)).to(dtype),
        f.jitter_u,
    )


def min_carried_precision(carried: CarriedPosterior) -> float:
    """The smallest eigenvalue of P (negative: SGD left q wider than the prior somewhere)."""
    return float(torch.linalg.eigvalsh(carried.P).min()) if carried.num_inducing else 0.0


def to_streaming_state(
    model: SolveGP,
    selector: Selector | None = None,
    *,
    max_inducing: int | None = None,
    fit_iterations: int = DEFAULT_FIT_ITERATIONS,
    hyperprior_scale: float = 0.0,
    **options: Any,
) -> dict[str, np.ndarray]:
    """The state of a streaming model (``vips``) that continues ``model``'s fit.

    Args:
        model: a fitted SolveGP (scaled or unscaled targets, not centred).
        selector: the stream's inducing-point strategy (VIPS by default).
        max_inducing: the stream's cap; at least M + M2 (default: M + M2 and the stream's
            default, whichever is larger).
        fit_iterations: the stream's L-BFGS iterations per window.
        hyperprior_scale: the stream's log-normal hyperprior (0: none).
        **options: the stream's other settings (``OnlineSparseGP``'s keywords, e.g.
            ``local_fit_inducing``, ``fit_max_seconds``, ``outlier_z``); θ, the jitter, the
            device and the dtype are the fit's.

    Returns:
        A ``state_dict`` that ``OnlineSparseGP.from_state`` (and a map file) reads: θ in the
        data's units, the carried posterior over Z ∪ O, the targets' running statistics.

    Raises:
        RuntimeError: the model has not been fitted.
        ValueError: the fit was centred.
    """
    posterior = model.posterior
    if posterior is None:
        raise RuntimeError("the model has no fit to continue: call fit() first")
    carried = to_carried(posterior)
    default = DEFAULT_MAX_INDUCING if max_inducing is None else max_inducing
    cap = max(carried.num_inducing, default)
    # The fit's noise is all of a reading's error over the whole log; a stream with a pass
    # noise fits only the rest (noise.py), so the two together keep the fit's total.
    pass_noise = float(options.get("pass_noise_variance", DEFAULT_PASS_NOISE_VARIANCE))
    engine = OnlineSparseGP(
        model.kernel,
        max(model.noise_variance - pass_noise, NOISE_FLOOR),
        selector,
        device=model.device,
        dtype=model.dtype,
        max_inducing=cap,
        fit_iterations=fit_iterations,
        jitter=model.jitter,
        seed=model.seed,
        hyperprior_scale=hyperprior_scale,
        **options,
    )
    state = engine.state_dict()
    for name in ("Z", "L", "P", "v", "L_D"):
        state[f"carried.{name}"] = getattr(carried, name).detach().cpu().numpy()
    state["carried.jitter"] = np.array(carried.jitter.value)
    state["carried.jitter_relative"] = np.array(carried.jitter.relative)
    state["input_dim"] = np.array(int(carried.Z.shape[1]))
    state["num_updates"] = np.array(1)
    state["theta_fitted"] = np.array(True)  # on the whole log: the health check's full tests
    state["stats"] = np.array(model.target_stats, dtype=np.float64)
    return state


def to_online_sgp(
    model: SolveGP,
    selector: Selector | None = None,
    *,
    max_inducing: int | None = None,
    fit_iterations: int = DEFAULT_FIT_ITERATIONS,
    hyperprior_scale: float = 0.0,
) -> OnlineSparseGP:
    """The streaming model that continues ``model``'s fit (:func:`to_streaming_state`)."""
    state = to_streaming_state(
        model,
        selector,
        max_inducing=max_inducing,
        fit_iterations=fit_iterations,
        hyperprior_scale=hyperprior_scale,
    )
    return OnlineSparseGP.from_state(state, device=model.device)
