"""The exact GP: every datum in one Cholesky, the reference every approximation is measured by."""

from __future__ import annotations

from .gp import ExactGP

__all__ = [
    "ExactGP",
]
