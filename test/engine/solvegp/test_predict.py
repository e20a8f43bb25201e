"""SOLVE-GP's predictive against a dense computation of the same equations.

The predictive of Shi, Titsias & Mnih 2020, App. D.2.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.solvegp import SolveGP

from .test_model import QUICK, TEST_POINTS, data, kernel

# Far below every tolerance: the dense reference adds no jitter.
TINY_JITTER = Jitter(1e-13)


def dense_predictive(model: SolveGP, Xs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """μ* and diag Σ* of App. D.2 with K_uu⁻¹ and C_vv⁻¹ by dense solves, in the data's units.

    μ* = K_*u K_uu⁻¹ m_u + C_*v C_vv⁻¹ m_v,
    Σ* = K_*u K_uu⁻¹ S_u K_uu⁻¹ K_u* + C_** − C_*v C_vv⁻¹ (C_vv − S_v) C_vv⁻¹ C_v*.
    """
    p, post = model.parameters, model.posterior
    k = post.kernel  # the fitted units: targets divided by model.scale
    with torch.no_grad():
        Z, Zo = p.Z, p.Zo
        Kuu, Kvv, Kuv = k.K(Z).numpy(), k.K(Zo).numpy(), k.K(Z, Zo).numpy()
        Kus, Kvs, kss = k.K(Z, Xs).numpy(), k.K(Zo, Xs).numpy(), k.K_diag(Xs).numpy()
        m_u, L_u, m_v = p.m_u.numpy(), np.tril(p.L_u.numpy()), p.m_v.numpy()
        L_v = np.tril(p.L_v.numpy()) if p.L_v.numel() else None
    Cvv = Kvv - Kuv.T @ np.linalg.solve(Kuu, Kuv)
    Cvs = Kvs - Kuv.T @ np.linalg.solve(Kuu, Kus)
    if L_v is None and not model.variational.whiten:  # ODVGP's dual weights a: m_v = C_vv a
        m_v = Cvv @ m_v
    if model.variational.whiten:  # q over ũ = L_uu⁻¹ u and ṽ = L_vv⁻¹ v⊥
        R_u, R_v = np.linalg.cholesky(Kuu), np.linalg.cholesky(Cvv)
        m_u, L_u, m_v = R_u @ m_u, R_u @ L_u, R_v @ m_v
        L_v = None if L_v is None else R_v @ L_v
    S_u = L_u @ L_u.T
    S_v = Cvv if L_v is None else L_v @ L_v.T  # ODVGP: S_v = C_vv
    E = np.linalg.solve(Kuu, Kus)  # K_uu⁻¹ K_u*
    G = np.linalg.solve(Cvv, Cvs)  # C_vv⁻¹ C_v*
    mean = E.T @ m_u + G.T @ m_v
    c_ss = kss - np.einsum("ms,ms->s", Kus, E)
    var = np.einsum("ms,mk,ks->s", E, S_u, E) + c_ss - np.einsum("ms,mk,ks->s", G, Cvv - S_v, G)
    s = model.scale
    return model.shift + s * mean, s * s * var


@pytest.mark.parametrize(
    ("family", "whiten"), [("solve", False), ("solve", True), ("odvgp", False), ("full", False)]
)
def test_the_predictive_is_the_specs_equations(family: str, whiten: bool) -> None:
    """Near the data and far from it (the last test point), for a q that SGD moved."""
    model = SolveGP(
        kernel(),
        0.05,
        **{**QUICK, "epochs": 3},
        family=family,
        whiten=whiten,  # type: ignore[arg-type]
        jitter=TINY_JITTER,
    )
    assert model.fit(*data()).accepted
    mean, var = model.predict(TEST_POINTS)
    mean_d, var_d = dense_predictive(model, TEST_POINTS)
    prior = float(model.kernel.K_diag(TEST_POINTS[:1])[0].detach())
    np.testing.assert_allclose(mean.numpy(), mean_d, rtol=0.0, atol=1e-7 * prior)
    np.testing.assert_allclose(var.numpy(), var_d, rtol=0.0, atol=1e-7 * prior)
    # Far from every inducing point only the constant part stays known.
    far = float(model.posterior.prior_variance(TEST_POINTS[-1:])[0])
    assert float(var[0]) < float(var[-1]) == pytest.approx(far, rel=1e-6)
