"""A tiny regression problem and dense references for the SOLVE-GP tests."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
import torch

from gp_mapper.engine import SquaredExponential
from gp_mapper.engine.core.kernels import Kernel
from gp_mapper.engine.core.linalg import Jitter

DTYPE = torch.float64
# A jitter far below every tolerance: the dense references add none.
TINY_JITTER = Jitter(1e-12)


class Toy(NamedTuple):
    kernel: Kernel
    noise: torch.Tensor
    X: torch.Tensor
    y: torch.Tensor
    Z: torch.Tensor
    Zo: torch.Tensor


def make_toy(seed: int = 7, n: int = 40, m: int = 5, m2: int = 4) -> Toy:
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(np.sort(rng.uniform(0.0, 6.0, n)), dtype=DTYPE)[:, None]
    y = torch.sin(2.0 * X[:, 0]) + 0.2 * torch.as_tensor(rng.standard_normal(n), dtype=DTYPE)
    Z = torch.linspace(0.3, 5.7, m, dtype=DTYPE)[:, None]
    Zo = torch.as_tensor(rng.uniform(0.0, 6.0, m2), dtype=DTYPE)[:, None]
    kernel = SquaredExponential(1.2, 0.7).to(DTYPE)
    return Toy(kernel, torch.tensor(0.05, dtype=DTYPE), X, y, Z, Zo)


@pytest.fixture
def toy() -> Toy:
    return make_toy()


def dense(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def gauss_logpdf(y: np.ndarray, mean: np.ndarray, cov: np.ndarray) -> float:
    sign, logdet = np.linalg.slogdet(cov)
    assert sign > 0
    r = y - mean
    return float(-0.5 * (len(y) * np.log(2 * np.pi) + logdet + r @ np.linalg.solve(cov, r)))


class DensePrior(NamedTuple):
    """Every kernel block of the toy, with the residual covariances of Shi et al. 2020, Sec. 3.2."""

    Kuu: np.ndarray
    Kvv: np.ndarray
    Kuv: np.ndarray
    Kuf: np.ndarray
    Kvf: np.ndarray
    Kff: np.ndarray
    Qff: np.ndarray
    Cvv: np.ndarray
    Cvf: np.ndarray
    Cff: np.ndarray


def dense_prior(toy: Toy) -> DensePrior:
    k = toy.kernel
    with torch.no_grad():
        Kuu, Kvv, Kuv = dense(k.K(toy.Z)), dense(k.K(toy.Zo)), dense(k.K(toy.Z, toy.Zo))
        Kuf, Kvf, Kff = dense(k.K(toy.Z, toy.X)), dense(k.K(toy.Zo, toy.X)), dense(k.K(toy.X))
    Kuu_inv_Kuf = np.linalg.solve(Kuu, Kuf)
    Kuu_inv_Kuv = np.linalg.solve(Kuu, Kuv)
    Qff = Kuf.T @ Kuu_inv_Kuf
    Cvv = Kvv - Kuv.T @ Kuu_inv_Kuv
    Cvf = Kvf - Kuv.T @ Kuu_inv_Kuf
    return DensePrior(Kuu, Kvv, Kuv, Kuf, Kvf, Kff, Qff, Cvv, Cvf, Kff - Qff)


def titsias_bound(toy: Toy, Z: torch.Tensor) -> float:
    """SGPR (Titsias 2009) collapsed bound with inducing inputs Z."""
    k = toy.kernel
    with torch.no_grad():
        Kuu, Kuf, Kff = dense(k.K(Z)), dense(k.K(Z, toy.X)), dense(k.K(toy.X))
    s2 = float(toy.noise)
    Qff = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    y = dense(toy.y)
    return gauss_logpdf(y, 0 * y, Qff + s2 * np.eye(len(y))) - np.trace(Kff - Qff) / (2 * s2)


def exact_lml(toy: Toy) -> float:
    with torch.no_grad():
        Kff = dense(toy.kernel.K(toy.X))
    y = dense(toy.y)
    return gauss_logpdf(y, 0 * y, Kff + float(toy.noise) * np.eye(len(y)))
