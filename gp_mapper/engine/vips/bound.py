"""The collapsed online variational bound (Bui et al. 2017) and its reference values.

Pure functions of tensors. Notation as Pescador-Barrios et al. 2024, Sec. 3.3: batch X [N, D],
y [N]; old inducing inputs Z_a [M_a, D] carried as :class:`CarriedPosterior`; new inducing inputs
Z_b [M_b, D]. All kernel matrices use the new θ except the carried factor ``old.L`` (the old θ).
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
from torch import Tensor

from ..core.kernels import Kernel
from ..core.linalg import (
    LOG_2PI,
    Jitter,
    cholesky_with_jitter,
    gaussian_log_density,
    jitter_scale,
    solve_lower,
)
from ..errors import NumericalError
from .posterior import CarriedPosterior


def _data_terms(
    V: Tensor, y: Tensor, kff_diag: Tensor, noise_variance: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """``(V Σ⁻¹ Vᵀ, V Σ⁻¹ y, the terms free of the inducing set)`` for the noise Σ: one σ²
    (a 0-d tensor; ``kff_diag`` may then be its sum) or one per row [N] (a window's cells,
    ``core.cells``; ``kff_diag`` per row)."""
    s2 = noise_variance
    # One σ²: the operations in the order they always ran, so a map is the same to the bit
    # (autograd sums the gradients of σ² in that order).
    if s2.ndim == 0:
        d1 = (V @ V.mT) / s2
        Lb_c = (V @ y) / s2
    else:
        w = 1.0 / s2
        d1 = (V * w) @ V.mT
        Lb_c = V @ (w * y)
    return d1, Lb_c, _data_constant(y, kff_diag, s2)


def _data_constant(y: Tensor, kff_diag: Tensor, noise_variance: Tensor) -> Tensor:
    """The bound's terms free of the inducing set (``_data_terms``)."""
    N = y.shape[0]
    s2 = noise_variance
    if s2.ndim == 0:
        constant = -0.5 * N * (LOG_2PI + torch.log(s2)) - 0.5 * (y @ y) / s2
        return constant - 0.5 * kff_diag.sum() / s2
    w = 1.0 / s2
    constant = -0.5 * (N * LOG_2PI + torch.log(s2).sum()) - 0.5 * (w * y * y).sum()
    return constant - 0.5 * (w * kff_diag).sum()


class BoundTerms(NamedTuple):
    """The bound and the factors that become the next carried posterior."""

    value: Tensor  # scalar L̂
    P: Tensor  # [M_b, M_b] D − I
    v: Tensor  # [M_b] L_b⁻¹ c
    L_D: Tensor  # [M_b, M_b] chol(D)


def whitened_bound(
    V: Tensor,
    U: Tensor,
    y: Tensor,
    kff_diag: Tensor,
    noise_variance: Tensor,
    old: CarriedPosterior | None,
    Kaa: Tensor | None = None,
) -> BoundTerms:
    """L̂ from the whitened cross-covariances.

    Pescador-Barrios et al. 2024, eq. 8 (App. E eq. 26) in our whitened carried form; Titsias'
    (2009) collapsed SGPR bound when ``old`` is None.

    Args:
        V: L_b⁻¹ K_bf [M_b, N].
        U: L_b⁻¹ K_ba [M_b, M_a] (ignored without ``old``); None when the inducing set begins
            with the old one under its θ and factor (``factors(keeps_old=True)``): then
            A = [I; 0] and K_aa − Q_aa = 0.
        y: targets [N].
        kff_diag: k(xᵢ, xᵢ) [N] (or their sum, with one σ²).
        noise_variance: σ², scalar, or one per row [N] (a window's cells, ``core.cells``).
        old: the carried posterior of the previous batch, or None for the first batch.
        Kaa: the old inducing variables' prior covariance under the new θ, K_θ(Z_a, Z_a) + εI
            with the new set's jitter ε [M_a, M_a] (None with U).

    Returns:
        BoundTerms.
    """
    d1, Lb_c, value = _data_terms(V, y, kff_diag, noise_variance)
    value = value + 0.5 * torch.diagonal(d1).sum()
    P = d1
    if old is not None and old.num_inducing > 0:
        if U is None:  # the old variables first, under the same prior: A = [I; 0]
            old_P, old_v = _carried_onto(old, P.shape[0])
            P = P + old_P
            Lb_c = Lb_c + old_v
        else:
            A = solve_lower(old.L, U.mT).mT  # [M_b, M_a] = L_b⁻¹ K_ba L'⁻ᵀ
            P = P + A @ old.P @ A.mT
            Lb_c = Lb_c + A @ old.v
            Kaa_w = solve_lower(old.L, solve_lower(old.L, Kaa).mT)  # L'⁻¹ K_aa L'⁻ᵀ
            resid = Kaa_w - A.mT @ A  # L'⁻¹ (K_aa − Q_aa) L'⁻ᵀ
            value = value - 0.5 * (old.P * resid).sum()
        w_old = solve_lower(old.L_D, old.v)
        value = value - 0.5 * (w_old @ w_old) + torch.log(torch.diagonal(old.L_D)).sum()
    P = 0.5 * (P + P.mT)
    eye = torch.eye(P.shape[0], dtype=P.dtype, device=P.device)
    # D = I + P ⪰ I, so a Cholesky needs no jitter unless P itself is corrupt.
    L_D, _ = cholesky_with_jitter(eye + P, jitter=0.0)
    w = solve_lower(L_D, Lb_c)
    value = value + 0.5 * (w @ w) - torch.log(torch.diagonal(L_D)).sum()
    return BoundTerms(value, P, Lb_c, L_D)


def _carried_onto(old: CarriedPosterior, size: int) -> tuple[Tensor, Tensor]:
    """The carried P and v as ``A P Aᵀ`` and ``A v`` for an inducing set of ``size`` that
    begins with the old variables under their own factor: A = [I; 0], so they are P and v
    padded with zeros."""
    pad = size - old.num_inducing
    if pad < 0:
        raise ValueError(f"{size} rows cannot begin with {old.num_inducing} old variables")
    return (
        torch.nn.functional.pad(old.P, (0, pad, 0, pad)),
        torch.nn.functional.pad(old.v, (0, pad)),
    )


@torch.no_grad()
def whitened_bound_prefixes(
    V: Tensor,
    U: Tensor | None,
    y: Tensor,
    kff_diag: Tensor,
    noise_variance: Tensor,
    old: CarriedPosterior | None,
    Kaa: Tensor | None = None,
) -> Tensor:
    """L̂ for every leading prefix of a nested inducing set, from one factorisation [M_b].

    Entry m − 1 is :func:`whitened_bound` at the first m rows of V and U. Along a greedy
    sequence the rows are nested (row i is ``L_b⁻¹ K(b_i, ·)`` whatever comes after), so
    every term is a leading block or a prefix sum: P's leading block is P of the prefix,
    chol(I + P)'s leading block is its Cholesky, and forward substitution gives the prefix
    of w. The old posterior's residual term ``(P_a ∘ (K̃_aa − AᵀA)).sum()`` loses
    ``a_iᵀ P_a a_i`` per row. One O(N M² + M³) evaluation then answers every size VIPS asks
    about, instead of one per doubling and bisection step.

    Args:
        U: ``L_b⁻¹ K(b, Z_a)`` [M_b, M_a]; None when the rows begin with the old inducing
            variables themselves (a selection's forced prefix: ``old.Z`` with ``old.L``). Then
            the old block of U is ``L'ᵀ`` and the rows after it are zero there (a pivot's row
            is its residual after the prefix, which explains Z_a exactly), so A = [I; 0] and
            nothing of size M_b M_a² is formed.
        Kaa: the old inducing variables' prior under the rows' θ; None (what a selection
            passes: it holds θ at the carried one) means the carried prior ``L' L'ᵀ`` itself,
            whose whitened form is I, so nothing of size M³ is formed for it.
    """
    d1, Lb_c, constant = _data_terms(V, y, kff_diag, noise_variance)
    per_row = 0.5 * torch.diagonal(d1)
    P = d1
    if old is not None and old.num_inducing > 0:
        w_old = solve_lower(old.L_D, old.v)
        constant = constant - 0.5 * (w_old @ w_old) + torch.log(torch.diagonal(old.L_D)).sum()
        if Kaa is None:  # L'⁻¹ (L' L'ᵀ) L'⁻ᵀ = I
            constant = constant - 0.5 * torch.diagonal(old.P).sum()
        else:
            Kaa_w = solve_lower(old.L, solve_lower(old.L, Kaa).mT)
            constant = constant - 0.5 * (old.P * Kaa_w).sum()
        if U is None:
            if Kaa is not None:
                raise ValueError("rows that begin with the old variables hold θ at the carried one")
            old_P, old_v = _carried_onto(old, P.shape[0])
            P = P + old_P
            Lb_c = Lb_c + old_v
            per_row = per_row + 0.5 * torch.diagonal(old_P)
        else:
            A = solve_lower(old.L, U.mT).mT
            AP = A @ old.P
            P = P + AP @ A.mT
            Lb_c = Lb_c + A @ old.v
            per_row = per_row + 0.5 * (AP * A).sum(-1)
    P = 0.5 * (P + P.mT)
    eye = torch.eye(P.shape[0], dtype=P.dtype, device=P.device)
    L_D, _ = cholesky_with_jitter(eye + P, jitter=0.0)
    w = solve_lower(L_D, Lb_c)
    per_row = per_row + 0.5 * w * w - torch.log(torch.diagonal(L_D))
    return constant + torch.cumsum(per_row, dim=0)


@torch.no_grad()
def whitened_bound_last(
    V: Tensor,
    y: Tensor,
    kff_diag: Tensor,
    noise_variance: Tensor,
    old: CarriedPosterior | None,
) -> Tensor:
    """``whitened_bound_prefixes(V, None, ...)[-1]`` in the space of the data: L̂ at the
    whole set of rows only, for a set of more rows than the window has observations.

    Beyond the old variables (the first ``old.num_inducing`` rows, A = [I; 0]) the bound sees
    the new rows V_n only through ``G = V_nᵀ V_n`` [N, N]; with ``E = I + P_a = L_D L_Dᵀ``,
    ``W = L_D⁻¹ V_a`` and ``H = Wᵀ W + G``, the matrix determinant lemma and Woodbury give
    ``log|I + P| = log|E| + log|I + Σ^-½ H Σ^-½|`` and bᵀ(I + P)⁻¹b for b = V Σ⁻¹ y + [v_a; 0]
    from N × N factors. What L* needs (the rows of every candidate, ``_reachable_reference``)
    costs O(M_a² N + M_n N² + N³) instead of the rows' O((M_a + M_n)² N + (M_a + M_n)³).
    Without ``old`` (a first window) every row is new: W is empty, E = I.
    """
    s2 = noise_variance
    u = y / s2
    constant = _data_constant(y, kff_diag, s2)
    M_a = old.num_inducing if old is not None else 0
    V_a, V_n = V[:M_a], V[M_a:]
    G = V_n.mT @ V_n
    trace = (V_a * V_a).sum(0) + torch.diagonal(G)  # diag(Vᵀ V)
    Gu = G @ u
    if M_a > 0:
        assert old is not None
        W = solve_lower(old.L_D, V_a)
        q = solve_lower(old.L_D, V_a @ u + old.v)
        w_old = solve_lower(old.L_D, old.v)
        constant = constant - 0.5 * (w_old @ w_old)
        H = W.mT @ W + G
        r = W.mT @ q + Gu
        quad = q @ q + u @ Gu
    else:
        H, r, quad = G, Gu, u @ Gu
    half = torch.rsqrt(s2)  # Σ^-½: one σ², or one per row
    if s2.ndim == 0:
        T, spread = H / s2, trace.sum() / s2
    else:
        T, spread = half[:, None] * H * half[None, :], (trace / s2).sum()
    T = 0.5 * (T + T.mT) + torch.eye(T.shape[0], dtype=T.dtype, device=T.device)
    L_T, _ = cholesky_with_jitter(T, jitter=0.0)  # T ⪰ I, as I + P in the row form
    z = solve_lower(L_T, half * r)
    return constant + 0.5 * spread + 0.5 * (quad - z @ z) - torch.log(torch.diagonal(L_T)).sum()


class Factors(NamedTuple):
    """Kernel factors for a given inducing set under one θ."""

    L_b: Tensor  # [M_b, M_b]
    jitter: Jitter
    V: Tensor  # [M_b, N]
    U: Tensor | None  # [M_b, M_a]; None when the set begins with the old one, θ kept (A = [I; 0])
    Kaa: Tensor | None  # [M_a, M_a] K_θ(Z_a, Z_a) + εI
    kff_diag: Tensor  # [N]


def factors(
    kernel: Kernel,
    Z: Tensor,
    X: Tensor,
    old: CarriedPosterior | None,
    jitter: float | Jitter,
    *,
    keeps_old: bool = False,
) -> Factors:
    """Compute L_b, V = L_b⁻¹ K_bf, U = L_b⁻¹ K_ba and K_aa for inducing inputs Z [M_b, D].

    The jitter ε of ``L_b = chol(K_bb + εI)`` belongs to the inducing variables: each is
    f(z) plus its own N(0, ε), so an old inducing point kept in Z is the same variable and
    its covariance with itself carries the ε too. Then the old posterior maps onto a superset
    of its points exactly (A's old block is I, K_aa − Q_aa = 0), which ``K(Z, Z_a)`` alone
    misses along directions where K_aa's eigenvalues are below ε.

    Args:
        keeps_old: Z begins with ``old.Z`` and ``kernel`` is the θ ``old.L`` was made under (a
            window that adds points and keeps θ, or a map at its cap): L_b is ``old.L`` with
            the new points' rows below it, the old variables keep their own jitter, and U,
            K_aa are not formed (A = [I; 0] and K_aa − Q_aa = 0 exactly). Nothing of size
            M³ is formed but the new points' Schur complement and the caller's D.
    """
    if keeps_old and old is not None:
        # A Schur complement no rung can factor (new points on top of old ones) takes the
        # general path, whose ladder starts again on the whole K_bb.
        with contextlib.suppress(NumericalError):
            return _extended_factors(kernel, Z, X, old, jitter)
    K_bb = kernel.K(Z)
    L_b, used = cholesky_with_jitter(K_bb, jitter)
    V = solve_lower(L_b, kernel.K(Z, X))
    if old is not None and old.num_inducing > 0:
        eps = used.amount(jitter_scale(torch.diagonal(K_bb).detach()))
        same = (Z[:, None, :] == old.Z[None, :, :]).all(-1).to(Z.dtype)
        M_a = old.num_inducing
        # Z mostly begins with the old points (VIPS keeps them and adds): K(Z, Z_a) and K_aa
        # are then K_bb's first columns, not two more kernel matrices to build and differentiate.
        prefix = Z.shape[0] >= M_a and torch.equal(Z[:M_a], old.Z)
        K_ba = K_bb[:, :M_a] if prefix else kernel.K(Z, old.Z)
        U = solve_lower(L_b, K_ba + eps * same)
        eye = torch.eye(M_a, dtype=Z.dtype, device=Z.device)
        Kaa = (K_bb[:M_a, :M_a] if prefix else kernel.K(old.Z)) + eps * eye
    else:
        U = V.new_zeros((Z.shape[0], 0))
        Kaa = None
    return Factors(L_b, used, V, U, Kaa, kernel.K_diag(X))


def _extended_factors(
    kernel: Kernel, Z: Tensor, X: Tensor, old: CarriedPosterior, jitter: float | Jitter
) -> Factors:
    """``factors(keeps_old=True)``: chol(K_bb + εI) with its old block ``old.L`` as it is.

    The new rows are ``[Cᵀ, L_s]`` with C = L'⁻¹ K(Z_a, Z_n) and L_s the factor of the new
    points' Schur complement K_nn − CᵀC plus their jitter, ε from the whole K_bb's diagonal
    as in the general path.
    """
    M_a = old.num_inducing
    if Z.shape[0] < M_a or not torch.equal(Z[:M_a], old.Z):
        raise ValueError("keeps_old: Z must begin with the old inducing inputs")
    K_bf = kernel.K(Z, X)
    if Z.shape[0] == M_a:
        return Factors(old.L, old.jitter, solve_lower(old.L, K_bf), None, None, kernel.K_diag(X))
    new = Z[M_a:]
    K_nn = kernel.K(new)
    scale = jitter_scale(torch.cat([kernel.K_diag(old.Z), torch.diagonal(K_nn)]).detach())
    C = solve_lower(old.L, kernel.K(old.Z, new))
    schur = K_nn - C.mT @ C
    L_s, used = cholesky_with_jitter(0.5 * (schur + schur.mT), jitter, scale=scale)
    L_b = torch.cat(
        [torch.nn.functional.pad(old.L, (0, new.shape[0])), torch.cat([C.mT, L_s], dim=1)]
    )
    return Factors(L_b, used, solve_lower(L_b, K_bf), None, None, kernel.K_diag(X))


def online_bound(
    kernel: Kernel,
    noise_variance: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: CarriedPosterior | None,
    jitter: float | Jitter,
    *,
    keeps_old: bool = False,
) -> tuple[BoundTerms, Factors]:
    """L̂ for inducing inputs Z under (kernel, σ²); differentiable in both (``keeps_old``:
    see :func:`factors`)."""
    f = factors(kernel, Z, X, old, jitter, keeps_old=keeps_old)
    return whitened_bound(f.V, f.U, y, f.kff_diag, noise_variance, old, f.Kaa), f


def carry(Z: Tensor, f: Factors, terms: BoundTerms) -> CarriedPosterior:
    """The carried posterior at the end of a batch, from the final θ's factors and bound."""
    return CarriedPosterior(
        Z.detach(),
        f.L_b.detach(),
        terms.P.detach(),
        terms.v.detach(),
        terms.L_D.detach(),
        f.jitter,
    )


def old_predictive(
    kernel: Kernel, old: CarriedPosterior, X: Tensor, A_X: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Joint predictive ``(μ_o [N], Σ_o [N, N])`` of f(X) under the carried posterior.

    Args:
        kernel: the kernel at the θ that produced ``old``.
        old: the carried posterior.
        X: inputs [N, D].
        A_X: L'⁻¹ K_aX [M_a, N] if already known (the selection has it).
    """
    if A_X is None:
        A_X = solve_lower(old.L, kernel.K(old.Z, X))
    B = solve_lower(old.L_D, A_X)
    mean = B.mT @ solve_lower(old.L_D, old.v)
    cov = kernel.K(X) - A_X.mT @ A_X + B.mT @ B
    return mean, cov


def reference_bound(
    kernel: Kernel,
    noise_variance: Tensor,
    X: Tensor,
    y: Tensor,
    old: CarriedPosterior | None,
    A_X: Tensor | None = None,
) -> Tensor:
    """L*: the bound with every new datum an inducing point, when θ_n = θ_o (eq. 9, App. E.1).

    It equals the log predictive density of the whole batch under the old posterior,
    ``log N(y; μ_o(X), Σ_o(X, X) + σ²I)``; for the first batch it is the exact log marginal
    likelihood ``log N(y; 0, K + σ²I)``. Costs O(N³ + N² M_a).
    """
    eye = torch.eye(X.shape[0], dtype=X.dtype, device=X.device)
    if old is None or old.num_inducing == 0:
        return gaussian_log_density(y, torch.zeros_like(y), kernel.K(X) + noise_variance * eye)
    mean, cov = old_predictive(kernel, old, X, A_X)
    return gaussian_log_density(y, mean, cov + noise_variance * eye)


def upper_bound(
    kernel: Kernel,
    noise_variance: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: CarriedPosterior | None,
    jitter: float | Jitter,
) -> Tensor:
    """Û(M) ≥ L*: Titsias' upper bound with the heteroscedastic augmented noise.

    Pescador-Barrios et al. 2024, Sec. 4.1 and App. F (eqs. 30–37); the paper's Sec. 4.1
    leaves out the normaliser Δ_a, which eq. 37 has.

    The D_a-free form of the authors, rewritten in the whitened carried quantities:
    with ``H = L'ᵀL' + tP_a``, ``(D_a + tI)⁻¹`` terms become ``P_a H⁻¹ P_a`` products.
    """
    if noise_variance.ndim != 0:
        raise ValueError("the upper bound takes one noise variance, not one per row")
    terms, f = online_bound(kernel, noise_variance, Z, X, y, old, jitter)
    N = y.shape[0]
    s2 = noise_variance
    t = f.kff_diag.sum() - (f.V * f.V).sum()
    if old is not None and old.num_inducing > 0:
        assert f.U is not None and f.Kaa is not None  # the general path of factors()
        t = t + torch.diagonal(f.Kaa).sum() - (f.U * f.U).sum()
    t = torch.clamp(t, min=0.0)
    d1 = (f.V @ f.V.mT) / (s2 + t)
    c_hat = (f.V @ y) / (s2 + t)
    value = -0.5 * N * (LOG_2PI + torch.log(s2)) - torch.log(torch.diagonal(terms.L_D)).sum()
    value = value - 0.5 * (y @ y) / (s2 + t)
    D_hat = d1
    if old is not None and old.num_inducing > 0:
        A = solve_lower(old.L, f.U.mT).mT
        H = old.L.mT @ old.L + t * old.P
        L_H, _ = cholesky_with_jitter(H, jitter=0.0)
        PAt = old.P @ A.mT  # [M_a, M_b]
        HinvPAt = torch.cholesky_solve(PAt, L_H)
        D_hat = D_hat + A @ old.P @ A.mT - t * (PAt.mT @ HinvPAt)
        Hinv_v = torch.cholesky_solve(old.v[:, None], L_H)[:, 0]
        c_hat = c_hat + A @ old.v - t * (A @ (old.P @ Hinv_v))
        w_old = solve_lower(old.L_D, old.v)
        value = value - 0.5 * (w_old @ w_old) + 0.5 * t * (old.v @ Hinv_v)
        value = value + torch.log(torch.diagonal(old.L_D)).sum()
    eye = torch.eye(D_hat.shape[0], dtype=D_hat.dtype, device=D_hat.device)
    L_Dh, _ = cholesky_with_jitter(eye + 0.5 * (D_hat + D_hat.mT), jitter=0.0)
    w = solve_lower(L_Dh, c_hat)
    return value + 0.5 * (w @ w)
