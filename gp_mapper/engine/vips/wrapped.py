"""What every model built on the streaming engine reads straight from it.

The three-axis model (``potential``) and the streamed additive map (``gam.stream``) run
:class:`~.online_sgp.OnlineSparseGP` over tagged rows of their own; these views are theirs
unchanged.
"""

from __future__ import annotations

import torch

from ..model import PlainInputs
from .online_sgp import OnlineSparseGP


class EngineViews(PlainInputs):
    """Read-only views of the wrapped stream ``self._stream``."""

    _engine: OnlineSparseGP

    @property
    def device(self) -> torch.device:
        return self._stream.device

    @property
    def dtype(self) -> torch.dtype:
        return self._stream.dtype

    @property
    def engine(self) -> OnlineSparseGP:
        """The engine over the model's tagged rows (do not update it directly)."""
        return self._stream

    @property
    def noise_variance(self) -> float:
        return self._stream.noise_variance

    @property
    def num_updates(self) -> int:
        return self._stream.num_updates

    @property
    def max_inducing(self) -> int:
        return self._stream.max_inducing

    @property
    def awaits_first_fit(self) -> bool:
        return self._stream.awaits_first_fit

    @property
    def pass_noise_variance(self) -> float:
        return self._stream.pass_noise_variance

    def set_pass_noise_variance(self, variance: float) -> None:
        self._stream.set_pass_noise_variance(variance)

    def release_caches(self) -> None:
        self._stream.release_caches()
