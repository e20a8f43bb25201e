"""A fitted SOLVE / SVGP posterior continues as the streaming model (spec seed002 §12.3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import OnlineSparseGP
from gp_mapper.engine.solvegp import (
    SolveGP,
    min_carried_precision,
    to_carried,
    to_online_sgp,
    to_streaming_state,
)

from .test_model import QUICK, TEST_POINTS, data, kernel

# The tolerance: the continuation predicts as the fit did, to 1e-6 of the prior variance.
REL_TOL = 1e-6


def fitted(**settings: object) -> SolveGP:
    model = SolveGP(kernel(), 0.05, **{**QUICK, "epochs": 4, **settings})  # type: ignore[arg-type]
    X, y = data()
    assert model.fit(X, y).accepted
    return model


@pytest.mark.parametrize("family", ["solve", "full", "odvgp"])
@pytest.mark.parametrize("whiten", [False, True])
def test_the_stream_predicts_as_the_fit_before_new_data(family: str, whiten: bool) -> None:
    model = fitted(family=family, whiten=whiten)
    stream = to_online_sgp(model)
    assert isinstance(stream, OnlineSparseGP)
    assert stream.num_inducing == model.posterior.support.shape[0]
    prior = float(model.posterior.kernel.K_diag(TEST_POINTS[:1])[0]) * model.scale**2
    mean, var = model.predict(TEST_POINTS)
    mean_s, var_s = stream.predict(TEST_POINTS)
    assert float((mean - mean_s).abs().max()) < REL_TOL * prior
    assert float((var - var_s).abs().max()) < REL_TOL * prior
    assert stream.hyperparameters() == pytest.approx(model.hyperparameters())


def test_carried_blocks_match_the_joint_q_of_z_and_o() -> None:
    """q(a) over [Z; O] from the carried form equals SOLVE's structured q(u, v) (spec §3)."""
    model = fitted(family="solve", standardise="none")
    carried = to_carried(model.posterior)
    m_a, S_a = carried.mean_and_cov()
    f, q = model.posterior.factors, model.posterior.q
    M = model.posterior.num_inducing
    L_W = torch.zeros_like(carried.L)
    L_W[:M, :M], L_W[M:, :M], L_W[M:, M:] = f.L_u, f.A.mT, f.L_v
    S_w = torch.block_diag(q.L_u @ q.L_u.mT, q.L_v @ q.L_v.mT)
    torch.testing.assert_close(m_a, L_W @ torch.cat([q.m_u, q.m_v]), rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(S_a, L_W @ S_w @ L_W.mT, rtol=1e-8, atol=1e-10)
    K = model.posterior.kernel.K(carried.Z)
    torch.testing.assert_close(carried.L @ carried.L.mT, K, rtol=1e-6, atol=1e-6)


def test_at_the_optimum_the_carried_precision_is_positive() -> None:
    model = fitted(epochs=0, optimal_q=True)
    assert min_carried_precision(to_carried(model.posterior)) > -1e-10


def test_the_stream_continues_with_new_data() -> None:
    model = fitted()
    state = to_streaming_state(model, fit_iterations=2)
    stream = OnlineSparseGP.from_state(state, device="cpu")
    X, y = data(seed=5)
    report = stream.update(X[:30] + 1.0, y[:30])
    assert report.accepted, report.reason
    assert stream.num_updates == 2
    count = model.target_stats[0]
    assert stream.stats.count == count + 30


def test_a_centred_fit_is_refused() -> None:
    model = fitted(standardise="centre")
    with pytest.raises(ValueError, match="centred"):
        to_streaming_state(model)
    np.testing.assert_equal(model.shift != 0.0, True)
