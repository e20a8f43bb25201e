"""The ACGP UCI protocol pieces (benchmarks/uci_data.py splits, benchmarks/acgp_uci.py, the
reference comparison's bookkeeping) on synthetic arrays; no shared data, no timing."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import acgp_reference
import acgp_uci
from common import data_dir
from uci_data import TRAIN_FRACTION, UciSet, load_uci, random_split, standardised_split

from gp_mapper.engine.acgp import stopped_cholesky


def synthetic(n: int = 301, d: int = 4, seed: int = 3) -> UciSet:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 5.0, 0.1, 20.0])[:d] + 7.0
    return UciSet("synthetic", X, 3.0 + X @ np.arange(1.0, d + 1.0) + rng.normal(size=n), ())


def rows(a: np.ndarray) -> set[bytes]:
    return {r.tobytes() for r in a}


@pytest.mark.parametrize("n", [3, 8192, 16599, 301])
def test_split_is_two_thirds_train_and_a_partition(n: int) -> None:
    train, test = random_split(n, seed=0)
    assert len(train) == int(n * TRAIN_FRACTION)  # pumadyn32nm: 5461 train, 2731 test
    assert len(train) + len(test) == n
    assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))


def test_split_is_seeded_as_bayesian_benchmarks() -> None:
    """numpy's legacy generator seeded with the shuffle number, one shuffle of the indices."""
    train, test = random_split(10, seed=4)
    order = np.arange(10)
    np.random.RandomState(4).shuffle(order)
    assert np.array_equal(np.concatenate([train, test]), order)
    again = random_split(10, seed=4)
    other = random_split(10, seed=5)
    assert np.array_equal(again[0], train)
    assert not np.array_equal(other[0], train)


def test_split_refuses_an_empty_part() -> None:
    with pytest.raises(ValueError, match="empty part"):
        random_split(1, seed=0)


def test_standardisation_uses_the_training_rows_only() -> None:
    data = synthetic()
    split = standardised_split(data, seed=1)
    train, test = random_split(len(data.y), seed=1)
    np.testing.assert_allclose(split.X_train.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(split.y_train.mean(), 0.0, atol=1e-12)
    raw = data.X[train].std(0)
    np.testing.assert_allclose(split.X_train.std(0), raw / (raw + 1e-6), rtol=1e-12)
    # The test rows are mapped with the training statistics, not their own.
    expected = (data.X[test] - data.X[train].mean(0)) / (raw + 1e-6)
    np.testing.assert_allclose(split.X_test, expected, rtol=1e-12)
    assert abs(split.X_test.mean()) > 1e-6  # their own mean is not removed
    np.testing.assert_allclose(split.y_test * split.y_std + split.y_mean, data.y[test], rtol=1e-12)
    assert not rows(split.X_train) & rows(split.X_test)


def test_test_rows_do_not_change_the_training_part() -> None:
    """Never tune on the test split: altering its targets changes nothing the model sees."""
    data = synthetic()
    _, test = random_split(len(data.y), seed=2)
    y = data.y.copy()
    y[test] += 1e3
    a = standardised_split(data, seed=2)
    b = standardised_split(UciSet("altered", data.X, y, ()), seed=2)
    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.y_train, b.y_train)
    assert not np.array_equal(a.y_test, b.y_test)


def test_initial_kernel_is_the_authors_ard_matern32() -> None:
    kernel = acgp_uci.matern32_ard(5)
    spec = kernel.to_spec()
    assert spec["type"] == "matern32"
    np.testing.assert_allclose(spec["lengthscale"], [math.log(2.0)] * 5, rtol=1e-12)
    assert spec["variance"] == pytest.approx(math.log(2.0), rel=1e-12)


def test_sqrt_d_init_puts_lengthscales_at_the_distance_scale() -> None:
    spec = acgp_uci.matern32_ard(32, "sqrt-d").to_spec()
    np.testing.assert_allclose(spec["lengthscale"], [math.sqrt(32.0)] * 32, rtol=1e-12)
    with pytest.raises(ValueError, match="init must be"):
        acgp_uci.matern32_ard(3, "median")


def test_paper_rows_and_units() -> None:
    assert set(acgp_uci.PAPER) == set(acgp_uci.DATASETS)
    assert acgp_uci.PAPER["elevators"]["acgp"]["rmse"] == (34.79, 0.24)
    assert acgp_uci.mean_std([0.3479, 0.3479], acgp_uci.RMSE_UNIT) == pytest.approx((34.79, 0.0))
    assert acgp_uci.within(34.79 + 2 * 0.24 - 1e-9, (34.79, 0.24))
    assert not acgp_uci.within(34.79 + 2 * 0.24 + 1e-6, (34.79, 0.24))


def test_one_shuffle_end_to_end_on_synthetic_data() -> None:
    """ACGP and the exact GP at its θ on a small split: finite scores, M ≤ N, log p finite."""
    data = synthetic(n=240, d=2)
    split = standardised_split(data, seed=0)
    settings = {"block_size": 40, "rel_tol": 0.01, "iterations": 3}
    run, model = acgp_uci.run_acgp(split, 0, settings, torch.device("cpu"))
    a, e = run["acgp"], run["exact_at_theta"]
    assert 80 <= a["M"] <= len(split.y_train) == model.state_dict()["permutation"].size
    assert all(math.isfinite(v) for v in (a["rmse"], a["nlpd"], e["rmse"], e["nlpd"], e["log_p"]))
    if a["M"] == len(split.y_train):  # every point kept: ACGP is the exact GP at its θ
        # up to ACGP's diagonal jitter (1e-8 of the kernel variance, ~1e-6 of σ² here)
        assert a["rmse"] == pytest.approx(e["rmse"], rel=1e-6)


def test_reference_comparison_bookkeeping() -> None:
    """compare_record on a run against itself written in the driver's format agrees everywhere,
    and an extra check at s = 0 shows up as a block only the authors evaluate."""
    gen = torch.Generator().manual_seed(0)
    X = torch.randn(300, 2, generator=gen, dtype=torch.float64)
    y = torch.sin(3.0 * X[:, 0]) + 0.1 * torch.randn(300, generator=gen, dtype=torch.float64)
    kernel = acgp_uci.matern32_ard(2)
    run = stopped_cholesky(kernel, 0.01, X, y, 50, rel_tol=0.0)
    theirs = {
        "variant": "as_is",
        "rel_tol": 0.0,
        "checked_at": [0] + [b.s for b in run.history],
        "bounds": [[1.0, 0.0, 1.0, 0.0]] + [[b.U_D, b.L_D, b.U_Q, b.L_Q] for b in run.history],
        "stopped_at": None,
        "iteration": run.num_points,
        "logdet": run.logdet,
        "quad": run.quad,
    }
    out = acgp_reference.compare_record(run, theirs)
    assert out["stop_agrees"] and out["blocks_only_theirs"] == [0]
    assert max(out["max_rel_diff"].values()) == 0.0
    assert out["blocks_common"] == [b.s for b in run.history]


def test_reference_is_skipped_with_a_reason(tmp_path: Path) -> None:
    assert "no --reference" in acgp_reference.locate(None)
    assert "not a checkout" in acgp_reference.locate(str(tmp_path))


def test_real_split_sizes_when_the_shared_data_is_there() -> None:
    root = data_dir() / "uci"
    if not (root / "pumadyn32nm").is_dir():
        pytest.skip(f"no UCI data under {root}")
    split = standardised_split(load_uci("pumadyn32nm", root), seed=0)
    assert (len(split.y_train), len(split.y_test)) == (5461, 2731)
    assert split.X_train.shape[1] == 32
