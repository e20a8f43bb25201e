"""The VIPS paper's UCI stream (benchmarks/uci_data.py) and a short run of its benchmark."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from uci_data import UciSet, continual_stream, load_uci, num_batches


def synthetic(n: int = 203, d: int = 3, seed: int = 1) -> UciSet:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 5.0, 0.1][:d] + 3.0
    return UciSet("synthetic", X, X @ np.arange(1.0, d + 1.0) + rng.normal(size=n), ())


def rows(*arrays: np.ndarray) -> set[bytes]:
    return {r.tobytes() for a in arrays for r in a}


def test_stream_is_sorted_contiguous_batches_with_the_remainder_last() -> None:
    data = synthetic()
    stream = continual_stream(data, fold=0)
    assert len(stream) == 20
    sizes = [len(b.y_train) + len(b.y_test) for b in stream]
    assert sizes == [10] * 19 + [13]  # floor size; the last batch takes the rest
    highs = [max(b.X_train[:, 0].max(), b.X_test[:, 0].max()) for b in stream]
    lows = [min(b.X_train[:, 0].min(), b.X_test[:, 0].min()) for b in stream]
    assert all(h <= lo for h, lo in zip(highs[:-1], lows[1:], strict=True))


def test_folds_partition_every_batch_and_standardise_with_full_data_statistics() -> None:
    data = synthetic()
    folds = [continual_stream(data, fold=k) for k in range(5)]
    for b in range(20):
        tests = [folds[k][b] for k in range(5)]
        whole = rows(tests[0].X_train, tests[0].X_test)
        assert rows(*(t.X_test for t in tests)) == whole  # the test parts cover the batch
        assert sum(len(t.y_test) for t in tests) == len(whole)  # ... and are disjoint
        for t in tests:
            assert not rows(t.X_train) & rows(t.X_test)
    everything = np.concatenate([np.concatenate([b.X_train, b.X_test]) for b in folds[0]])
    np.testing.assert_allclose(everything.mean(0), 0.0, atol=1e-12)
    raw_std = data.X.std(0)  # the authors' normalise divides by std + 1e-6
    np.testing.assert_allclose(everything.std(0), raw_std / (raw_std + 1e-6), rtol=1e-12)


def test_stream_is_reproducible_and_the_seed_changes_the_split() -> None:
    data = synthetic()
    a, b = continual_stream(data, 2, seed=0), continual_stream(data, 2, seed=0)
    c = continual_stream(data, 2, seed=1)
    assert all(np.array_equal(x.y_test, y.y_test) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x.y_test, y.y_test) for x, y in zip(a, c, strict=True))
    with pytest.raises(ValueError, match="fold"):
        continual_stream(data, 5)


def test_batch_count_rule_and_constant_inputs_dropped(tmp_path: Path) -> None:
    assert (num_batches(12000), num_batches(12001)) == (20, 50)
    folder = tmp_path / "toy"
    folder.mkdir()
    table = np.column_stack([np.arange(6.0), np.full(6, 7.0), np.arange(6.0) ** 2, np.ones(6)])
    with gzip.open(folder / "data.csv.gz", "wt") as f:
        np.savetxt(f, table, delimiter=",")
    data = load_uci("toy", tmp_path)
    assert data.dropped == (1,) and data.X.shape == (6, 2)
    np.testing.assert_array_equal(data.y, np.ones(6))
    with pytest.raises(FileNotFoundError):
        load_uci("missing", tmp_path)


@pytest.mark.slow
def test_vips_on_one_skillcraft_fold_meets_the_paper_targets(
    uci_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """End to end: the stream, VIPS, the exact reference, the tables and the JSON."""
    if not (uci_dir / "skillcraft").is_dir():
        pytest.skip(f"no skillcraft data under {uci_dir}")
    import uci_streaming

    out = tmp_path / "uci.json"
    argv = ["--datasets", "skillcraft", "--methods", "vips", "--folds", "1"]
    assert uci_streaming.main([*argv, "--exact-fit-points", "500", "--json", str(out)]) == 0
    assert "skillcraft: RMSE%" in capsys.readouterr().out
    vips = json.loads(out.read_text())["datasets"]["skillcraft"]["summary"]["vips"]
    paper_m = uci_streaming.PAPER["rmse"]["skillcraft"]["vips"][0]
    assert vips["rmse_pct"] <= uci_streaming.THRESHOLD_PCT
    assert abs(vips["M_mean"] / paper_m - 1.0) <= uci_streaming.M_TOLERANCE
