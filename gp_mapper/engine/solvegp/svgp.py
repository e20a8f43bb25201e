"""The sparse variational core: SVGP and SOLVE-GP as one bound with a choice of variational family.

Shi, Titsias & Mnih 2020 (SOLVE-GP): Sec. 3.3 eq. 8 (the bound), App. D.1 Algorithm 1, App. F
(whitening). The prior side of Algorithm 1 is the block Cholesky of K over [Z; O] (our
observation, not the paper's). The inducing inputs are Z [M, D] and O [M2, D]; the prior is
factored in blocks::

    L_u = chol(K_uu + εI)           [M, M]
    A   = L_u⁻¹ K_uv                [M, M2]
    L_v = chol(C_vv + εI),  C_vv = K_vv − AᵀA   [M2, M2]

so ``[[L_u, 0], [Aᵀ, L_v]]`` is chol(K_[Z;O] + εI). At the data, ``B = L_u⁻¹ K_uf`` [M, N] and
``D = L_v⁻¹ (K_vf − Aᵀ B)`` [M2, N] are the whitened projections of f onto the span of Z and onto
the orthogonal part spanned by O.

Every computation runs in the whitened (orthogonal) coordinates ũ = L_u⁻¹ u, ṽ = L_v⁻¹ v⊥, with
q(ũ) = N(m̃_u, L̃_u L̃_uᵀ), q(ṽ) = N(m̃_v, L̃_v L̃_vᵀ) independent. The unwhitened
parameterisation (the paper's default, q(u) = N(m_u, L_u L_uᵀ)) maps onto it by m̃ = L_0⁻¹ m,
L̃ = L_0⁻¹ L, which is exactly Algorithm 1 (its E, F, G, H and KL(m, L, L_0)). The families:

- ``full``: one block, W = [Z; O] with a full covariance (standard SVGP on W); O is empty.
- ``solve``: two blocks, q block-diagonal in (ũ, ṽ) (Sec. 3.3, Algorithm 1).
- ``odvgp``: as ``solve`` with S_v frozen to C_vv, i.e. L̃_v = I (Sec. 5, "Connection with Decoupled
  Inducing Points").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch
from torch import Tensor, nn

from ..core.kernels import Kernel
from ..core.linalg import (
    LOG_2PI,
    Jitter,
    cholesky_with_jitter,
    jitter_scale,
    solve_lower,
    solve_upper_t,
)
from ..errors import NumericalError

Family = Literal["full", "solve", "odvgp"]
FAMILIES: tuple[str, ...] = ("full", "solve", "odvgp")
# σ²(x) is a difference of squared column sums; round-off can take it just below zero.
MARGINAL_VARIANCE_FLOOR = 1e-12
# The prior side (K_uu, C_vv, their Cholesky factors and the solves against them) runs in float64
# whatever the model's dtype: C_vv is a Schur complement that loses rank in float32.
PRIOR_DTYPE = torch.float64
# Rows of data per chunk of the full-data passes (final ELBO, optimal q, validation): bounds
# the [M, chunk] projections at 8·M·chunk bytes.
DATA_CHUNK = 4096
# A triangular factor whose diagonal spans more than 1/√eps (~7e7 in float64) makes the matrix
# it factors, or its inverse, singular to working precision (condition number past 1/eps).
INVERSE_CONDITION_FLOOR = math.sqrt(torch.finfo(PRIOR_DTYPE).eps)


@dataclass(frozen=True)
class Variational:
    """The variational family and its parameterisation.

    Attributes:
        family: "full", "solve" or "odvgp".
        whiten: q over the whitened ũ, ṽ (True) or over u, v⊥ themselves (False, the paper's UCI
            default).
    """

    family: Family = "solve"
    whiten: bool = False

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}; got {self.family!r}")

    @property
    def frozen_v(self) -> bool:
        """S_v is C_vv, not a free parameter (ODVGP)."""
        return self.family == "odvgp"


class PriorFactors(NamedTuple):
    """The block Cholesky of the prior over [Z; O] (Algorithm 1 steps 1–2).

    Attributes:
        L_u: chol(K_uu + εI) [M, M].
        A: L_u⁻¹ K_uv [M, M2].
        L_v: chol(C_vv + ε_v I) [M2, M2] (ε_v ≥ ε: the ladder climbs when the
            Schur complement C_vv loses rank).
        jitter_u, jitter_v: the rungs used.
    """

    L_u: Tensor
    A: Tensor
    L_v: Tensor
    jitter_u: Jitter
    jitter_v: Jitter


class WhitenedQ(NamedTuple):
    """q in the orthogonal, whitened coordinates.

    Attributes:
        m_u: [M]; L_u: [M, M] lower triangular, S̃_u = L_u L_uᵀ.
        m_v: [M2]; L_v: [M2, M2] lower triangular, or None for the identity (S_v = C_vv).
    """

    m_u: Tensor
    L_u: Tensor
    m_v: Tensor
    L_v: Tensor | None


class Marginals(NamedTuple):
    """Univariate q(f(x)) split into the span-Z part and the orthogonal part (App. D.2).

    Attributes:
        mean_u, var_u: [N] K_xu K_uu⁻¹ m_u and K_xu K_uu⁻¹ S_u K_uu⁻¹ K_ux (the coarse layer).
        mean_v, var_v: [N] the f⊥ part: C_xv C_vv⁻¹ m_v and
            c(x, x) − C_xv C_vv⁻¹ (C_vv − S_v) C_vv⁻¹ C_vx (the detail layer).
    """

    mean_u: Tensor
    var_u: Tensor
    mean_v: Tensor
    var_v: Tensor

    @property
    def mean(self) -> Tensor:
        return self.mean_u + self.mean_v

    @property
    def var(self) -> Tensor:
        return torch.clamp(self.var_u + self.var_v, min=MARGINAL_VARIANCE_FLOOR)


class ElboTerms(NamedTuple):
    """One evaluation of the bound (Sec. 3.3 eq. 8), in the units of the targets it was given.

    Attributes:
        value: (N/|B|) Σ_B E_q log p(y|f) − KL_u − KL_v [nats].
        expected_log_lik: the scaled data term.
        kl_u, kl_v: KL[q(u) || p(u)], KL[q(v⊥) || p⊥(v⊥)].
    """

    value: Tensor
    expected_log_lik: Tensor
    kl_u: Tensor
    kl_v: Tensor


def prior_factors(kernel: Kernel, Z: Tensor, Zo: Tensor, jitter: Jitter) -> PriorFactors:
    """Factor the prior over [Z; O] in blocks: two Choleskys of sizes M and M2 (Algorithm 1).

    Args:
        kernel: k.
        Z: [M, D] (M ≥ 1); Zo: O [M2, D] (M2 ≥ 0).
        jitter: the first rung; C_vv starts at the rung K_uu needed, so that with no climb the
            result is exactly chol(K_[Z;O] + εI) by blocks.

    Raises:
        NumericalError: a block does not factor at any rung.
    """
    W = torch.cat([Z, Zo]) if Zo.shape[0] else Z
    scale = jitter_scale(kernel.K_diag(W).to(PRIOR_DTYPE)).detach()
    L_u, jitter_u = cholesky_with_jitter(kernel.K(Z).to(PRIOR_DTYPE), jitter, scale=scale)
    M, M2 = Z.shape[0], Zo.shape[0]
    if M2 == 0:
        empty = L_u.new_zeros((M, 0))
        return PriorFactors(L_u, empty, L_u.new_zeros((0, 0)), jitter_u, jitter_u)
    A = solve_lower(L_u, kernel.K(Z, Zo).to(PRIOR_DTYPE))
    C_vv = kernel.K(Zo).to(PRIOR_DTYPE) - A.mT @ A
    L_v, jitter_v = cholesky_with_jitter(0.5 * (C_vv + C_vv.mT), jitter_u, scale=scale)
    return PriorFactors(L_u, A, L_v, jitter_u, jitter_v)


def project(
    kernel: Kernel, Z: Tensor, Zo: Tensor, factors: PriorFactors, X: Tensor
) -> tuple[Tensor, Tensor]:
    """Whitened projections of f(X) onto Z and onto the orthogonal part (Algorithm 1 step 4).

    Returns:
        B = L_u⁻¹ K_uf [M, N] and D = L_v⁻¹ (K_vf − Aᵀ B) [M2, N], in PRIOR_DTYPE.
    """
    B = solve_lower(factors.L_u, kernel.K(Z, X).to(PRIOR_DTYPE))
    if Zo.shape[0] == 0:
        return B, B.new_zeros((0, X.shape[0]))
    D = solve_lower(factors.L_v, kernel.K(Zo, X).to(PRIOR_DTYPE) - factors.A.mT @ B)
    return B, D


def marginals_from_projections(kss: Tensor, B: Tensor, D: Tensor, q: WhitenedQ) -> Marginals:
    """q(f(x)) from the projections (App. F): the whitened form of Algorithm 1 steps 6–7.

    Args:
        kss: prior variances k(x, x) [N].
        B: [M, N]; D: [M2, N] from :func:`project`.
        q: the whitened variational distribution.
    """
    mean_u = B.mT @ q.m_u
    var_u = ((q.L_u.mT @ B) ** 2).sum(0)
    # c(x, x) = k(x, x) − |B|² ≥ 0 up to round-off; the v part then removes what O explains.
    residual = kss - (B * B).sum(0)
    if D.shape[0] == 0:
        return Marginals(mean_u, var_u, torch.zeros_like(mean_u), residual)
    mean_v = D.mT @ q.m_v
    if q.L_v is None:  # S_v = C_vv: q(v⊥) keeps the prior's variance, the terms cancel
        return Marginals(mean_u, var_u, mean_v, residual)
    var_v = residual - (D * D).sum(0) + ((q.L_v.mT @ D) ** 2).sum(0)
    return Marginals(mean_u, var_u, mean_v, var_v)


def kl_standard(m: Tensor, L: Tensor | None) -> Tensor:
    """KL[N(m, L Lᵀ) || N(0, I)] (Algorithm 1 step 9 with L_0 = I); L None is the identity."""
    quad = 0.5 * (m * m).sum()
    if L is None:
        return quad
    n = m.shape[0]
    # |diag L|: the factor is an unconstrained lower triangle (GPflow's LowerTriangular), whose
    # diagonal may change sign during a fit; S = L Lᵀ does not see the sign.
    return quad + 0.5 * ((L * L).sum() - n) - torch.log(torch.abs(torch.diagonal(L))).sum()


def gaussian_expected_log_lik(y: Tensor, mean: Tensor, var: Tensor, noise_var: Tensor) -> Tensor:
    """E_{N(f; mean, var)} log N(y | f, σ²) [N] in closed form (App. D.1)."""
    return -0.5 * (LOG_2PI + torch.log(noise_var)) - 0.5 * ((y - mean) ** 2 + var) / noise_var


class VariationalParameters(nn.Module):
    """The trainable inducing inputs and q, in the parameterisation the family names.

    Attributes (parameters):
        Z: [M, D]; Zo: O [M2, D] (M2 = 0 for ``full``).
        m_u: [M]; L_u: [M, M] (its lower triangle is used).
        m_v: [M2]; L_v: [M2, M2] ([0, 0] for ``odvgp``, whose S_v is C_vv).

    Unwhitened ``odvgp`` holds the mean as Salimbeni et al.'s (2018) dual weights a, with
    m_v = C_vv a and m̃_v = L_vᵀ a (the mean is C_xv a). The primal m_v = L_v m̃_v would give
    m̃_v = L_v⁻¹ m_v, whose gradient steps L_v⁻¹ amplifies by 1/√(smallest eigenvalue of C_vv):
    with many O points among the data (the paper's 5 + 100 on 100 points) Adam's first step
    already threw m̃_v to ~100 and the fit never recovered (docs/solvegp_snelson.png).
    """

    def __init__(
        self, Z: Tensor, Zo: Tensor, m_u: Tensor, L_u: Tensor, m_v: Tensor, L_v: Tensor
    ) -> None:
        super().__init__()
        self.Z = nn.Parameter(Z.clone())
        self.Zo = nn.Parameter(Zo.clone())
        self.m_u = nn.Parameter(m_u.clone())
        self.L_u = nn.Parameter(L_u.clone())
        self.m_v = nn.Parameter(m_v.clone())
        self.L_v = nn.Parameter(L_v.clone())

    @classmethod
    def at_prior(
        cls,
        kernel: Kernel,
        Z: Tensor,
        Zo: Tensor,
        variational: Variational,
        jitter: Jitter,
    ) -> VariationalParameters:
        """q initialised to the prior (App. G): m = 0; L = I whitened, L = L_0 unwhitened.

        For ``full`` the inputs are joined into one block W = [Z; O].

        Raises:
            NumericalError: the prior does not factor.
        """
        if variational.family == "full" and Zo.shape[0]:
            Z, Zo = torch.cat([Z, Zo]), Zo[:0]
        M, M2 = Z.shape[0], Zo.shape[0]
        like = {"dtype": PRIOR_DTYPE, "device": Z.device}
        with torch.no_grad():
            if variational.whiten:
                L_u, L_v = torch.eye(M, **like), torch.eye(M2, **like)
            else:
                factors = prior_factors(kernel, Z, Zo, jitter)
                L_u, L_v = factors.L_u, factors.L_v
        if variational.frozen_v:
            L_v = torch.zeros((0, 0), **like)
        return cls(Z, Zo, torch.zeros(M, **like), L_u, torch.zeros(M2, **like), L_v)

    @property
    def num_inducing(self) -> int:
        return int(self.Z.shape[0])

    @property
    def num_orthogonal(self) -> int:
        return int(self.Zo.shape[0])

    def whitened(self, factors: PriorFactors, variational: Variational) -> WhitenedQ:
        """q in the whitened coordinates: m̃ = L_0⁻¹ m, L̃ = L_0⁻¹ L when not whitened."""
        L_u = torch.tril(self.L_u)
        L_v = None if variational.frozen_v else torch.tril(self.L_v)
        if variational.whiten:
            return WhitenedQ(self.m_u, L_u, self.m_v, L_v)
        m_v, L_v_w = self.m_v, L_v
        if self.num_orthogonal and L_v is None:  # odvgp: dual weights, m̃_v = L_vᵀ a
            m_v = factors.L_v.mT @ self.m_v
        elif self.num_orthogonal:
            m_v = solve_lower(factors.L_v, self.m_v)
            L_v_w = solve_lower(factors.L_v, L_v)
        return WhitenedQ(
            solve_lower(factors.L_u, self.m_u), solve_lower(factors.L_u, L_u), m_v, L_v_w
        )

    def set_whitened(self, q: WhitenedQ, factors: PriorFactors, variational: Variational) -> None:
        """Write a whitened q into this parameterisation (m = L_0 m̃, L = L_0 L̃ unwhitened; the
        dual a = L_v⁻ᵀ m̃_v for unwhitened ``odvgp``)."""
        with torch.no_grad():
            if variational.whiten:
                m_u, L_u, m_v, L_v = q.m_u, q.L_u, q.m_v, q.L_v
            else:
                m_u, L_u = factors.L_u @ q.m_u, factors.L_u @ q.L_u
                if variational.frozen_v:
                    m_v = solve_upper_t(factors.L_v, q.m_v) if q.m_v.numel() else q.m_v
                else:
                    m_v = factors.L_v @ q.m_v
                L_v = None if q.L_v is None else factors.L_v @ q.L_v
            self.m_u.copy_(m_u)
            self.L_u.copy_(L_u)
            self.m_v.copy_(m_v)
            if L_v is not None and not variational.frozen_v:
                self.L_v.copy_(L_v)


class Evaluation(NamedTuple):
    """What one pass over a batch computes, for the bound and for prediction."""

    factors: PriorFactors
    q: WhitenedQ


def evaluate(
    kernel: Kernel, params: VariationalParameters, variational: Variational, jitter: Jitter
) -> Evaluation:
    """The prior factors and the whitened q at the current parameters (differentiable)."""
    factors = prior_factors(kernel, params.Z, params.Zo, jitter)
    return Evaluation(factors, params.whitened(factors, variational))


def marginals(
    kernel: Kernel, params: VariationalParameters, ev: Evaluation, X: Tensor
) -> Marginals:
    """q(f) at X [N, D] (App. D.2 with the diagonal only)."""
    B, D = project(kernel, params.Z, params.Zo, ev.factors, X)
    return marginals_from_projections(kernel.K_diag(X).to(PRIOR_DTYPE), B, D, ev.q)


def elbo(
    kernel: Kernel,
    noise_var: Tensor,
    params: VariationalParameters,
    variational: Variational,
    X: Tensor,
    y: Tensor,
    n_total: int,
    jitter: Jitter,
) -> ElboTerms:
    """The minibatch estimate of the uncollapsed bound (Sec. 3.3 eq. 8, Algorithm 1).

    Args:
        kernel, noise_var: θ.
        params: inducing inputs and q.
        variational: family and parameterisation.
        X: [B, D], y: [B] a minibatch; the data term is scaled by ``n_total / B``.
        n_total: N, the size of the data set the minibatch is drawn from.
        jitter: first rung of the prior factorisations.

    Raises:
        NumericalError: the prior does not factor.
    """
    ev = evaluate(kernel, params, variational, jitter)
    q = marginals(kernel, params, ev, X)
    ell = gaussian_expected_log_lik(y, q.mean, q.var, noise_var).sum() * (n_total / X.shape[0])
    kl_u = kl_standard(ev.q.m_u, ev.q.L_u)
    kl_v = kl_standard(ev.q.m_v, ev.q.L_v) if params.num_orthogonal else kl_u.new_zeros(())
    return ElboTerms(ell - kl_u - kl_v, ell, kl_u, kl_v)


@torch.no_grad()
def full_elbo(
    kernel: Kernel,
    noise_var: Tensor,
    params: VariationalParameters,
    variational: Variational,
    X: Tensor,
    y: Tensor,
    jitter: Jitter,
    chunk: int = DATA_CHUNK,
) -> ElboTerms:
    """The bound on all of X [N, D], y [N], in chunks (no minibatch noise)."""
    ev = evaluate(kernel, params, variational, jitter)
    ell = X.new_zeros(())
    for s in range(0, X.shape[0], chunk):
        q = marginals(kernel, params, ev, X[s : s + chunk])
        ell = ell + gaussian_expected_log_lik(y[s : s + chunk], q.mean, q.var, noise_var).sum()
    kl_u = kl_standard(ev.q.m_u, ev.q.L_u)
    kl_v = kl_standard(ev.q.m_v, ev.q.L_v) if params.num_orthogonal else kl_u.new_zeros(())
    return ElboTerms(ell - kl_u - kl_v, ell, kl_u, kl_v)


def lower_factor_of_inverse(
    L: Tensor, jitter: float | Jitter = 0.0, *, scale: float | Tensor | None = None
) -> tuple[Tensor, Jitter]:
    """The lower Cholesky factor G of (L Lᵀ + εI)⁻¹, from a lower factor L [n, n].

    ``(L Lᵀ)⁻¹ = L⁻ᵀ L⁻¹`` is upper times lower, not a Cholesky form. With the reversal J and
    the QR decomposition ``[Lᵀ J; √ε I] = Q T`` (T upper), ``J (L Lᵀ + εI) J = Tᵀ T``, so
    ``L Lᵀ + εI = Uᵀ U`` with ``U = J T J`` lower and ``G = U⁻¹``. The product L Lᵀ is never
    formed: T is as well conditioned as L, where a Cholesky of L Lᵀ would square its condition
    number (a q after SGD can have cond(L̃) ~ 1e9). The triangular inverse is the
    covariance factor the caller needs explicitly; no general inverse is formed.

    Args:
        L: [n, n] lower triangular, nonsingular up to the jitter.
        jitter: the first rung added to L Lᵀ (a float is relative); the ladder climbs while T
            is singular to working precision.
        scale: what a relative jitter multiplies; default mean(diag L Lᵀ).

    Returns:
        (G [n, n] lower triangular with a positive diagonal, the jitter used).

    Raises:
        NumericalError: non-finite entries, or T singular at every rung.
    """
    n = L.shape[-1]
    first = Jitter.coerce(jitter)
    if n == 0:
        return L.clone(), first
    if not torch.isfinite(L).all():
        raise NumericalError(f"factor of size {n} has non-finite entries")
    if scale is None:
        scale = jitter_scale((L * L).sum(-1)).detach()  # mean(diag L Lᵀ)
    eye = torch.eye(n, dtype=L.dtype, device=L.device)
    Lt_J = torch.flip(L.mT, (-1,))
    for rung in first.rungs():
        amount = rung.amount(scale)
        stacked = Lt_J if amount == 0.0 else torch.cat([Lt_J, math.sqrt(float(amount)) * eye])
        T = torch.linalg.qr(stacked, mode="r").R
        t = torch.abs(torch.diagonal(T))
        if not bool(t.min() > INVERSE_CONDITION_FLOOR * t.max()):
            continue
        U = torch.flip(T * torch.sign(torch.diagonal(T))[:, None], (-2, -1))  # J T J, diag > 0
        return torch.linalg.solve_triangular(U, eye, upper=False), rung
    raise NumericalError(f"factor of size {n} is singular even with {first.rungs()[-1]}")


@torch.no_grad()
def optimal_q(
    kernel: Kernel,
    noise_var: Tensor,
    Z: Tensor,
    Zo: Tensor,
    factors: PriorFactors,
    variational: Variational,
    X: Tensor,
    y: Tensor,
    chunk: int = DATA_CHUNK,
) -> WhitenedQ:
    """The q that maximises the bound for a Gaussian likelihood at fixed θ, Z, O.

    The optimal q(v⊥) is the paper's App. C; the optimal q(u) given it is our derivation (the
    paper only says to plug it in).

    In the whitened coordinates, with sums over all data (accumulated in chunks):
    S̃_v* = (I + σ⁻² D Dᵀ)⁻¹, m̃_v* = (I + D A⁻¹ Dᵀ)⁻¹ D A⁻¹ y with A = BᵀB + σ²I (Woodbury
    through Λ_u = I + σ⁻² B Bᵀ), then q(ũ)* is the SGPR posterior of the residual y − Dᵀ m̃_v*:
    S̃_u* = Λ_u⁻¹, m̃_u* = σ⁻² Λ_u⁻¹ B (y − Dᵀ m̃_v*). ODVGP keeps S̃_v = I and has the same m̃_v*
    (the bound separates in m_v and S_v). For ``full`` only q(ũ) exists.

    Returns:
        The whitened optimum. O(N (M² + M·M2 + M2²) + M³ + M2³).

    Raises:
        NumericalError: a precision does not factor.
    """
    M, M2 = Z.shape[0], Zo.shape[0]
    s2 = noise_var.to(PRIOR_DTYPE)
    like = {"dtype": PRIOR_DTYPE, "device": Z.device}
    BBt, By = torch.zeros((M, M), **like), torch.zeros(M, **like)
    DDt, DBt, Dy = (
        torch.zeros((M2, M2), **like),
        torch.zeros((M2, M), **like),
        torch.zeros(M2, **like),
    )
    for s in range(0, X.shape[0], chunk):
        B, D = project(kernel, Z, Zo, factors, X[s : s + chunk])
        yc = y[s : s + chunk].to(PRIOR_DTYPE)
        BBt += B @ B.mT
        By += B @ yc
        if M2:
            DDt += D @ D.mT
            DBt += D @ B.mT
            Dy += D @ yc
    eye_u = torch.eye(M, **like)
    R, info = torch.linalg.cholesky_ex(eye_u + BBt / s2)
    if int(info) != 0:
        raise NumericalError(f"the precision of q(u) (size {M}) is not positive definite")
    m_v = torch.zeros(M2, **like)
    L_v: Tensor | None = None if variational.frozen_v else torch.zeros((M2, M2), **like)
    residual_By = By
    if M2:
        eye_v = torch.eye(M2, **like)
        T = solve_lower(R, DBt.mT)  # R⁻¹ B Dᵀ [M, M2]
        r_y = solve_lower(R, By)
        D_Ainv_Dt = DDt / s2 - (T.mT @ T) / (s2 * s2)
        D_Ainv_y = Dy / s2 - (T.mT @ r_y) / (s2 * s2)
        R_m, info = torch.linalg.cholesky_ex(eye_v + 0.5 * (D_Ainv_Dt + D_Ainv_Dt.mT))
        if int(info) != 0:
            raise NumericalError(f"the precision of m_v (size {M2}) is not positive definite")
        m_v = torch.cholesky_solve(D_Ainv_y[:, None], R_m)[:, 0]
        if not variational.frozen_v:
            R_v, info = torch.linalg.cholesky_ex(eye_v + DDt / s2)
            if int(info) != 0:
                raise NumericalError(f"the precision of q(v) (size {M2}) is not positive definite")
            L_v, _ = lower_factor_of_inverse(R_v)
        residual_By = By - DBt.mT @ m_v
    m_u = torch.cholesky_solve((residual_By / s2)[:, None], R)[:, 0]
    L_u, _ = lower_factor_of_inverse(R)
    return WhitenedQ(m_u, L_u, m_v, L_v)
