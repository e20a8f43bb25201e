"""One independent offset per run (or sensor): a kernel on an integer label column.

``k(r, r') = v · [r = r']``: the readings of one run share a constant N(0, v) shift (a
per-sensor calibration offset, a re-mounted sensor), those of different runs do not. Labels are
compared after rounding, so they may be stored as floats beside the other inputs. A label the
fit never saw gets the prior: mean 0, variance v (a new run's offset is unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import VARIANCE_FLOOR, Kernel
from ..core.transforms import inverse_softplus_with_floor, softplus_with_floor


class RunOffset(Kernel):
    """``v · [round(r) = round(r')]`` on one column of run labels.

    Args:
        variance: v, the prior variance of each run's offset [µT²].
        active_dims: the one column holding the label.
    """

    kind = "run_offset"

    def __init__(self, variance: float = 1.0, active_dims: Sequence[int] = (0,)) -> None:
        super().__init__(active_dims)
        if self.active_dims is None or len(self.active_dims) != 1:
            raise ValueError(f"a run-offset kernel reads one column, got {active_dims}")
        self.raw_variance = nn.Parameter(inverse_softplus_with_floor(variance, VARIANCE_FLOOR))

    @property
    def variance(self) -> Tensor:
        return softplus_with_floor(self.raw_variance, VARIANCE_FLOOR)

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        X2 = X if X2 is None else X2
        same = torch.round(X[:, 0])[:, None] == torch.round(X2[:, 0])[None, :]
        return self.variance * same.to(X.dtype)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.variance.expand(X.shape[0])

    def to_spec(self) -> dict[str, Any]:
        return self._leaf_spec({"type": self.kind, "variance": float(self.variance.detach())})

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(self.kind, {"variance": self.variance})]
