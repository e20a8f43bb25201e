"""Rows of functionals for the curl-free kernel: readings, potential points, the uniform field."""

from __future__ import annotations

import torch
from torch import Tensor

from .kernel import EARTH, FIELD, POTENTIAL, SPATIAL_DIMS, TAG_COLUMN


def spatial(X: Tensor) -> Tensor:
    """Positions [N, 3] from map inputs [N, D], D = 2 (z = 0, a planar robot) or 3."""
    if X.shape[1] == SPATIAL_DIMS:
        return X
    if X.shape[1] == 2:
        return torch.cat([X, X.new_zeros((X.shape[0], 1))], dim=1)
    raise ValueError(f"positions must be [N, 2] or [N, 3]; got {tuple(X.shape)}")


def tagged(P: Tensor, tag: int) -> Tensor:
    """[N, 4] rows of one functional at positions P [N, 3]."""
    return torch.cat([P, P.new_full((P.shape[0], 1), float(tag))], dim=1)


def field_rows(P: Tensor) -> Tensor:
    """The three field components at positions P [N, 3], component-major: [3N, 4].

    Rows ``c·N + i`` are component c of reading i, so each component's rows keep the path's
    order (the outlier screen's agreement test and the health check read neighbours).
    """
    return torch.cat([tagged(P, tag) for tag in FIELD])


def field_targets(B: Tensor) -> Tensor:
    """Readings [N, 3] as the targets of :func:`field_rows`: [3N]."""
    return B.mT.reshape(-1)


def potential_rows(P: Tensor) -> Tensor:
    """Potential inducing variables at positions P [M, 3]: [M, 4]."""
    return tagged(P, POTENTIAL)


def earth_rows(like: Tensor) -> Tensor:
    """The uniform field's three components as inducing variables [3, 4] (dtype of ``like``)."""
    tags = torch.tensor(EARTH, dtype=like.dtype, device=like.device)[:, None]
    return torch.cat([like.new_zeros((len(EARTH), SPATIAL_DIMS)), tags], dim=1)


def is_earth(rows: Tensor) -> Tensor:
    """[M] bool: the rows that are the uniform field's components."""
    return rows[:, TAG_COLUMN].round() >= EARTH[0]
