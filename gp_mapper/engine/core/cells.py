"""Readings of one window that fall in one small spatial cell, as one observation.

At 50–200 Hz consecutive readings lie millimetres apart: the Aalto robot drives ~0.2 m/s, so
its 50 Hz readings are ~4 mm apart and a 9-second window of 469 readings covers 2 m of path.
They are one pass over each place, and the part of a reading's error that stays the same
along a pass (σ²_pass, ``noise.py``) is shared by all of them. Treated as independent, the
window's evidence grows with the sampling rate while the information about the field does
not: every fit of θ and every VIPS bound sees hundreds of copies of the same pass.

A cell's readings become one observation: the centroid of their positions, the mean of
their targets ȳ and their count n. With ``y_j = f(x) + p + e_j`` (p the pass error shared in
the cell, e_j white), ȳ ~ N(f(x), σ²/n + σ²_pass) and the deviations from ȳ are independent
of it with ``Σ (y_j − ȳ)² ~ σ² χ²_{n−1}``: the likelihood of the cell is exactly that of ȳ
under the noise σ²/n + σ²_pass times the scatter term of :func:`scatter_log_likelihood`.
With σ²_pass = 0 and repeated inputs this is the likelihood of the n readings themselves;
within a cell of a fraction of a lengthscale the field's change across it is of second
order about the centroid.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from .kernels import Kernel, Stationary
from .linalg import LOG_2PI

# Bin width of the direction columns in a cell's key: a rotation row's entries move by ~0.1 over
# 6 degrees of turn, so a robot driving on keeps its cells whole and a device turned on the
# spot (what tells its own offset from the field) keeps its headings apart.
DIRECTION_BIN = 0.1


class Cells(NamedTuple):
    """A window's readings grouped by cell (rows in the order of ``torch.unique``)."""

    X: Tensor  # [C, D] centroid of each cell's inputs (non-position columns exact)
    y: Tensor  # [C] mean target
    counts: Tensor  # [C] readings per cell
    scatter: Tensor  # [C] Σ (y − ȳ)² of each cell

    @property
    def aggregated(self) -> bool:
        """Whether any cell holds more than one reading."""
        return bool((self.counts > 1).any())


def shortest_lengthscale(kernel: Kernel) -> float | None:
    """The smallest lengthscale of the kernel's stationary parts (None: it has none)."""
    scales = [
        float(m.lengthscale.detach().min()) for m in kernel.modules() if isinstance(m, Stationary)
    ]
    return min(scales) if scales else None


def aggregate_cells(
    X: Tensor, y: Tensor, size: float, position_columns: int, direction_columns: int = 0
) -> Cells:
    """Group rows whose first ``position_columns`` inputs fall in one cube of side ``size``,
    whose last ``direction_columns`` inputs fall in one bin of :data:`DIRECTION_BIN` and whose
    other inputs are equal (a component tag) into one row each.

    The direction columns are a reading's loadings on a linear term (a rotation row: the
    target is linear in them), so their mean over a cell is that of the cell's mean target.
    Deterministic: the cells come out sorted by their integer keys, whatever the row order.
    """
    positions = X[:, :position_columns]
    keys = torch.floor(positions / size).to(torch.int64)
    exact_end = X.shape[1] - direction_columns
    if position_columns < exact_end:  # these columns must match exactly: their bits
        rest = X[:, position_columns:exact_end].to(torch.float64).contiguous().view(torch.int64)
        keys = torch.cat([keys, rest], dim=1)
    if direction_columns:
        bins = torch.floor(X[:, exact_end:] / DIRECTION_BIN).to(torch.int64)
        keys = torch.cat([keys, bins], dim=1)
    _, cell = torch.unique(keys, dim=0, return_inverse=True)
    C = int(cell.max()) + 1
    counts = X.new_zeros(C).index_add_(0, cell, torch.ones_like(y))
    X_sum = X.new_zeros((C, X.shape[1])).index_add_(0, cell, X)
    y_mean = X.new_zeros(C).index_add_(0, cell, y) / counts
    resid = y - y_mean[cell]
    scatter = X.new_zeros(C).index_add_(0, cell, resid * resid)
    return Cells(X_sum / counts[:, None], y_mean, counts, scatter)


def scatter_log_likelihood(cells: Cells, white_variance: Tensor) -> Tensor:
    """``Σ_cells [−(n − 1)/2 · log(2πσ²) − S/(2σ²) − ½ log n]``: what the readings' likelihood
    holds beyond their cells' means (module docstring), σ² the white (fitted) noise."""
    extra = cells.counts - 1.0
    return (
        -0.5 * extra.sum() * (LOG_2PI + torch.log(white_variance))
        - 0.5 * cells.scatter.sum() / white_variance
        - 0.5 * torch.log(cells.counts).sum()
    )


def cell_size_m(kernel: Kernel, lengthscales: float) -> float:
    """A cell's side [m] at ``lengthscales`` of the kernel's shortest lengthscale (0: none)."""
    if lengthscales <= 0.0:
        return 0.0
    ell = shortest_lengthscale(kernel)
    return 0.0 if ell is None or not math.isfinite(ell) else lengthscales * ell
