"""The SOLVE-GP UCI protocol pieces (benchmarks/solvegp_uci.py) on synthetic arrays: split sizes,
the validation part carved from the training part only, the seeding that lets the GPyTorch peer
walk our minibatches, the paper's rows and the quick target's bookkeeping. No shared data."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import solvegp_magnetic
import solvegp_uci
from uci_data import UciSet, random_split

from gp_mapper.engine.solvegp import SolveGP


def synthetic(n: int = 250, d: int = 3, seed: int = 5) -> UciSet:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 4.0, 0.2])[:d] + 2.0
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.1 * rng.normal(size=n)
    return UciSet("synthetic", X, y, ())


@pytest.mark.parametrize("n", [40_000, 16_599, 250, 11])
def test_split_is_80_20_and_a_partition(n: int) -> None:
    train, test = random_split(n, 0, solvegp_uci.TRAIN_FRACTION)
    assert len(train) == int(0.8 * n)
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))


def test_fit_size_is_the_papers_n() -> None:
    """Shi et al. 2020, App. G.3: N = 0.64 × the set (kin40k 25 600): 80 % train less 20 %."""
    n_train = int(40_000 * solvegp_uci.TRAIN_FRACTION)
    fit, val = solvegp_uci.inner_split(n_train, solvegp_uci.protocol_generator(0))
    assert (len(fit), len(val)) == (25_600, 6_400)


def test_validation_is_carved_from_the_training_part_only() -> None:
    data = synthetic()
    split = solvegp_uci.outer_split(data, 3)
    n_train = split.X_train.shape[0]
    fit, val = solvegp_uci.inner_split(n_train, solvegp_uci.protocol_generator(3))
    # Indices into the training part: disjoint, together all of it, none beyond it.
    assert set(fit.tolist()).isdisjoint(val.tolist())
    assert sorted([*fit.tolist(), *val.tolist()]) == list(range(n_train))
    assert len(val) == int(solvegp_uci.VALIDATION_FRACTION * n_train)
    test_rows = {r.tobytes() for r in split.X_test}
    assert not test_rows & {r.tobytes() for r in split.X_train[val.numpy()]}


def test_test_targets_do_not_reach_the_fit() -> None:
    """Never tune on the test split: altering its targets changes nothing the model sees."""
    data = synthetic()
    _, test = random_split(len(data.y), 1, solvegp_uci.TRAIN_FRACTION)
    y = data.y.copy()
    y[test] += 1e3
    a = solvegp_uci.outer_split(data, 1)
    b = solvegp_uci.outer_split(UciSet("altered", data.X, y, ()), 1)
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.y_train, b.y_train)


def test_seeding_is_repeatable_and_splits_differ() -> None:
    data = synthetic()
    a, b, c = (solvegp_uci.outer_split(data, s) for s in (2, 2, 4))
    assert np.array_equal(a.X_train, b.X_train)
    assert not np.array_equal(a.X_train, c.X_train)
    orders = [solvegp_uci.epoch_orders(50, 3, solvegp_uci.protocol_generator(7)) for _ in range(2)]
    assert all(torch.equal(x, y) for x, y in zip(*orders, strict=True))
    assert not torch.equal(orders[0][0], orders[0][1])  # a fresh order every epoch


def test_the_replayed_split_is_the_models() -> None:
    """The peer's validation rows are the ones ``SolveGP.fit`` holds out (same generator)."""
    n, seed = 97, 11
    model = solvegp_uci.solve_gp("full", 4, 0, seed, 1, torch.device("cpu"))
    model_fit, model_val = model._split(n, solvegp_uci.protocol_generator(seed))
    fit, val = solvegp_uci.inner_split(n, solvegp_uci.protocol_generator(seed))
    assert torch.equal(model_fit.cpu(), fit) and torch.equal(model_val.cpu(), val)


def test_protocol_model_settings() -> None:
    model = solvegp_uci.solve_gp("solve", 8, 8, 0, 100, torch.device("cpu"))
    assert model.validation == 0.2 and model.batch_size == 1024 and model.learning_rate == 0.01
    assert not model.warm_start and not model.variational.whiten  # the paper's App. G
    assert model.patience >= model.epochs  # 100 epochs run, no early stop
    spec = solvegp_uci.kernel().to_spec()
    assert spec["type"] == "matern32" and np.size(spec["lengthscale"]) == 1  # no ARD


def test_paper_rows_cover_every_set_and_method() -> None:
    assert set(solvegp_uci.PAPER) == set(solvegp_uci.DATASETS)
    for rows in solvegp_uci.PAPER.values():
        assert set(rows) == set(solvegp_uci.METHODS)
    assert solvegp_uci.PAPER["kin40k"]["solve"] == (0.187, 0.002, 0.172, 0.001)


def test_mean_se_and_target_check() -> None:
    mean, se = solvegp_uci.mean_se([1.0, 3.0])
    assert mean == 2.0 and se == pytest.approx(1.0)
    assert math.isnan(solvegp_uci.mean_se([1.0])[1])
    rows = {
        "svgp_M": {"ll": [0.0, 0.2], "s_per_epoch": 1.0},
        "solve": {"ll": [0.3, 0.5], "s_per_epoch": 2.0},
        "svgp_2M": {"ll": [0.4, 0.6], "s_per_epoch": 3.0},
    }
    checks = solvegp_uci.target_check(rows)
    assert all(checks.values())
    rows["svgp_2M"]["ll"] = [5.0, 5.2]
    assert not solvegp_uci.target_check(rows)["solve_ll_not_below_svgp_2M_by_2se"]
    one = {k: {**v, "ll": v["ll"][:1]} for k, v in rows.items()}
    assert solvegp_uci.target_check(one)["solve_ll_not_below_svgp_2M_by_2se"] is None


def test_magnetic_hold_out_is_every_fifth_ten_second_block() -> None:
    t = np.arange(0.0, 100.0, 0.02) + 3.0
    held = solvegp_magnetic.held_out_blocks(t)
    assert held[(t >= 43.0) & (t < 53.0)].all() and held[(t >= 93.0)].all()
    assert not held[t < 43.0].any() and not held[(t >= 53.0) & (t < 93.0)].any()
    assert held.mean() == pytest.approx(0.2)


@pytest.mark.slow  # importing gpytorch alone takes seconds
def test_gpytorch_peer_walks_the_same_path() -> None:
    """Same split, Z, θ, prior q and minibatches: GPyTorch's SVGP lands where ours does."""
    pytest.importorskip("gpytorch")
    split = solvegp_uci.outer_split(synthetic(n=300), 0)
    cpu = torch.device("cpu")
    ours = solvegp_uci.run_ours("svgp_M", split, 6, 0, 3, cpu)
    peer = solvegp_uci.run_gpytorch(6, split, 6, 0, 3, cpu)
    assert peer.ll == pytest.approx(ours.ll, abs=0.02)
    assert peer.rmse == pytest.approx(ours.rmse, rel=0.02)


def test_svgp_m_is_the_full_family_without_o() -> None:
    split = solvegp_uci.outer_split(synthetic(n=200), 0)
    model = solvegp_uci.solve_gp("full", 5, 0, 0, 1, torch.device("cpu"))
    assert model.fit(split.X_train, split.y_train).accepted
    assert isinstance(model, SolveGP) and model.parameters is not None
    assert model.parameters.Z.shape[0] == 5 and model.parameters.Zo.shape[0] == 0
