"""The exact GP: every datum in one Cholesky, the reference every approximation is measured by."""

from .gp import ExactGP

__all__ = ["ExactGP"]
