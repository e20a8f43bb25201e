"""Seeded toy problems and dense references for the engine tests."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch

from gp_mapper.engine import CarriedPosterior, Kernel, SquaredExponential
from gp_mapper.engine.vips.bound import carry, online_bound

DTYPE = torch.float64


class OnlineToy(NamedTuple):
    """An old posterior q(a) from a first batch, and a second batch, on a 1-D sine."""

    kernel_old: Kernel
    kernel_new: Kernel
    noise_old: torch.Tensor
    noise_new: torch.Tensor
    X_old: torch.Tensor
    y_old: torch.Tensor
    X: torch.Tensor
    y: torch.Tensor
    old: CarriedPosterior


def sine(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(2.0 * x) + torch.cos(5.0 * x)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1058390)


def make_online_toy(rng: np.random.Generator, num_old_inducing: int = 8) -> OnlineToy:
    X_old = torch.as_tensor(np.sort(rng.uniform(0.0, 10.0, 60)), dtype=DTYPE)[:, None]
    y_old = sine(X_old[:, 0]) + 0.3 * torch.as_tensor(rng.standard_normal(60), dtype=DTYPE)
    X = torch.as_tensor(np.sort(rng.uniform(0.0, 12.0, 50)), dtype=DTYPE)[:, None]
    y = sine(X[:, 0]) + 0.3 * torch.as_tensor(rng.standard_normal(50), dtype=DTYPE)
    kernel_old = SquaredExponential(1.0, 0.8).to(DTYPE)
    kernel_new = SquaredExponential(1.3, 0.6).to(DTYPE)
    noise_old = torch.tensor(0.09, dtype=DTYPE)
    noise_new = torch.tensor(0.12, dtype=DTYPE)
    Z_a = torch.linspace(0.0, 10.0, num_old_inducing, dtype=DTYPE)[:, None]
    with torch.no_grad():
        terms, f = online_bound(kernel_old, noise_old, Z_a, X_old, y_old, None, jitter=0.0)
    old = carry(Z_a, f, terms)
    return OnlineToy(kernel_old, kernel_new, noise_old, noise_new, X_old, y_old, X, y, old)


@pytest.fixture
def online_toy(rng: np.random.Generator) -> OnlineToy:
    return make_online_toy(rng)


def np64(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def gauss_logpdf(y: np.ndarray, cov: np.ndarray) -> float:
    sign, logdet = np.linalg.slogdet(cov)
    assert sign > 0
    return float(-0.5 * (len(y) * np.log(2 * np.pi) + logdet + y @ np.linalg.solve(cov, y)))


def naive_eq8(toy: OnlineToy, Z_b: torch.Tensor) -> float:
    """Eq. 8 of the paper with D_a formed explicitly: the dense reference."""
    k = toy.kernel_new
    m_a, S_a = (np64(t) for t in toy.old.mean_and_cov())
    Kp = np64(toy.old.L @ toy.old.L.mT)  # K'_aa under the old θ, as carried
    Za, X, y, s2 = toy.old.Z, toy.X, np64(toy.y), float(toy.noise_new)
    with torch.no_grad():
        Kbb, Kbf, Kba = np64(k.K(Z_b)), np64(k.K(Z_b, X)), np64(k.K(Z_b, Za))
        Kaa, kff = np64(k.K(Za)), np64(k.K_diag(X))
    Sinv, Kpinv = np.linalg.inv(S_a), np.linalg.inv(Kp)
    D_a = np.linalg.inv(Sinv - Kpinv)
    y_hat = np.concatenate([y, D_a @ Sinv @ m_a])
    K_hb = np.vstack([Kbf.T, Kba.T])
    Sigma = np.block(
        [[s2 * np.eye(len(y)), np.zeros((len(y), len(m_a)))], [np.zeros((len(m_a), len(y))), D_a]]
    )
    Kbb_inv = np.linalg.inv(Kbb)
    term = gauss_logpdf(y_hat, K_hb @ Kbb_inv @ K_hb.T + Sigma)
    Ma = len(m_a)
    delta_a = (
        -0.5 * (np.linalg.slogdet(S_a)[1] - np.linalg.slogdet(Kp)[1] - np.linalg.slogdet(D_a)[1])
        + 0.5 * Ma * np.log(2 * np.pi)
        - 0.5 * m_a @ Sinv @ m_a
        + 0.5 * m_a @ Sinv @ D_a @ Sinv @ m_a
    )
    Qaa = Kba.T @ Kbb_inv @ Kba
    Qff_diag = np.einsum("bn,bc,cn->n", Kbf, Kbb_inv, Kbf)
    return float(
        term
        + delta_a
        - 0.5 * np.trace(np.linalg.solve(D_a, Kaa - Qaa))
        - 0.5 / s2 * (kff.sum() - Qff_diag.sum())
    )
