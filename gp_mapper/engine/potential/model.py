"""The three-axis field map: readings of B in, a curl-free posterior streamed by VIPS out.

A reading's three components are three scalar observations of functionals of one potential
(``kernel.py``); the VIPS stream (``vips.OnlineSparseGP``: the Bui bound, L*,
the selection, the fit, atomic commits, the state) runs over them unchanged, with the curl-free
kernel and the potential selector (``selector.py``). This class turns map inputs and field
vectors into those functionals and the posterior back into field and ‖B‖ predictions.

With the magnetometer's own offset in the kernel (``hard_iron_variance`` > 0) a window's
inputs carry, after the position, the pose orientation that rotated each reading into the map
frame (``auxiliary_inputs``: the quaternion's four components), and the offset is estimated
with the map (``nuisance_summary``); the map's predictions leave it out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from ..auxiliary import ORIENTATION_NAMES
from ..errors import StateError
from ..model import Hyperparameters, ModelKind
from ..state import StateSetting
from ..vips import OnlineSparseGP, Posterior, UpdateReport
from ..vips.options import StreamOptions
from ..vips.selectors import Selector
from ..vips.wrapped import EngineViews
from .functionals import field_rows, field_targets, rotation_matrices, spatial
from .kernel import CurlFreeKernel
from .posterior import FieldPosterior
from .selector import PotentialVips, num_potential

INPUT_DIMS = (2, 3)


class VectorFieldGP(EngineViews):
    """Streaming map of the field vector B(p) from a scalar potential (module docstring).

    Args:
        kernel: the curl-free kernel at the initial θ.
        noise_variance: initial noise variance of each component [µT²].
        selector: :class:`~.selector.PotentialVips` (default) or
            :class:`~.selector.FieldReadings`.
        input_dim: 2 (positions (x, y), z = 0) or 3 (x, y, z) [m].
        options: the options of the :class:`~..vips.OnlineSparseGP` that runs the update
            (``max_inducing`` counts the uniform field's three variables too; the outlier
            screen judges each component).
    """

    name: ClassVar[str] = "potential"
    kind: ClassVar[ModelKind] = "streaming"
    # This model's own setting in a state, beside the stream's (``OnlineSparseGP``'s).
    STATE_SETTINGS: ClassVar[tuple[StateSetting, ...]] = (
        StateSetting("input_dim", int, key="potential.input_dim"),
    )

    def __init__(
        self,
        kernel: CurlFreeKernel,
        noise_variance: float = 0.1,
        selector: Selector | None = None,
        *,
        input_dim: int = 2,
        options: StreamOptions | None = None,
    ) -> None:
        if not isinstance(kernel, CurlFreeKernel):
            raise TypeError(f"the potential model needs a CurlFreeKernel; got {type(kernel)}")
        if input_dim not in INPUT_DIMS:
            raise ValueError(f"input_dim must be 2 or 3; got {input_dim}")
        self.input_dim = input_dim
        self._stream = OnlineSparseGP(
            kernel,
            noise_variance,
            selector if selector is not None else PotentialVips(),
            **(options if options is not None else StreamOptions()).as_kwargs(),
        )
        self._posterior: FieldPosterior | None = None
        self._report: UpdateReport | None = None

    @classmethod
    def _wrap(cls, stream: OnlineSparseGP, input_dim: int) -> VectorFieldGP:
        model = cls.__new__(cls)
        model.input_dim = input_dim
        model._stream = stream
        model._posterior = None
        model._report = None
        return model

    def empty_copy(self) -> VectorFieldGP:
        """The same model at this θ holding no inducing points (a new map tile)."""
        return self._wrap(self._stream.empty_copy(), self.input_dim)

    # ------------------------------------------------------------------ read-only views
    @property
    def kernel(self) -> CurlFreeKernel:
        kernel = self._stream.kernel
        assert isinstance(kernel, CurlFreeKernel)
        return kernel

    @property
    def posterior(self) -> FieldPosterior | None:
        inner = self._stream.posterior
        if inner is None:
            return None
        if self._posterior is None or self._posterior.inner is not inner:
            self._posterior = FieldPosterior(inner, self.input_dim)
        return self._posterior

    @property
    def num_inducing(self) -> int:
        """Potential (or field) inducing variables, the uniform field's three left out."""
        carried = self._stream.carried
        return 0 if carried is None else num_potential(carried.Z)

    @property
    def report(self) -> UpdateReport | None:
        return self._report

    @property
    def auxiliary_inputs(self) -> tuple[str, ...]:  # type: ignore[override]
        """The orientation's quaternion (x, y, z, w) after the position, for a model of the
        magnetometer's offset; none otherwise."""
        return ORIENTATION_NAMES if self.kernel.has_hard_iron else ()

    def nuisance_summary(self) -> dict[str, float | list[float]]:
        """The magnetometer's offset in the device frame [µT] and its sd, hard_iron_x ..
        hard_iron_z_sd; {} for a model without it or before the first update."""
        return dict(self._hard_iron_estimate())

    def _hard_iron_estimate(self) -> dict[str, float]:
        posterior = self.posterior
        estimate = None if posterior is None else posterior.hard_iron()
        if estimate is None:
            return {}
        mean, cov = estimate
        sd = torch.sqrt(torch.diagonal(cov))
        out: dict[str, float] = {}
        for k, axis in enumerate("xyz"):
            out[f"hard_iron_{axis}"] = float(mean[k])
            out[f"hard_iron_{axis}_sd"] = float(sd[k])
        return out

    def hyperparameters(self) -> Hyperparameters:
        """θ in the node's names: kernel_variance = one component's local variance [µT²],
        constant_variance = the uniform field's variance per component [µT²]."""
        return self._stream.hyperparameters()

    # ------------------------------------------------------------------ operations
    def update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[FieldPosterior], None] | None = None,
        *,
        fit: bool = True,
        theta_of: VectorFieldGP | None = None,
    ) -> UpdateReport:
        """Absorb a window: positions X [N, D] (then the orientation's quaternion, with the
        offset: ``auxiliary_inputs``) and field readings y [N, 3] in map_frame [µT];
        ``theta_of``: start from that model's θ (``OnlineSparseGP.update``).

        Returns:
            The stream's report with ``n`` in readings and ``m_before``/``m_after`` in
            potential inducing variables; if not accepted the state is unchanged.

        Raises:
            ValueError: wrong shapes, no rows, NaN or inf.
        """
        X_t, y_t = self._validate(X, y)
        P = spatial(X_t[:, : self.input_dim])
        has_rotation = self.kernel.has_hard_iron
        rotation = rotation_matrices(X_t[:, self.input_dim :]) if has_rotation else None
        m_before = self.num_inducing
        hook = None
        if on_selected is not None:

            def hook(inner: Posterior) -> None:
                on_selected(FieldPosterior(inner, self.input_dim))

        report = self._stream.update(
            field_rows(P, rotation, self.kernel.row_width), field_targets(y_t), hook, fit=fit,
            theta_of=None if theta_of is None else theta_of._stream,
        )  # fmt: skip
        self._report = dataclasses.replace(
            report, n=X_t.shape[0], m_before=m_before, m_after=self.num_inducing,
            nuisance=self._hard_iron_estimate() if report.accepted else {},
        )  # fmt: skip
        return self._report

    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """‖B‖: latent mean and variance [S] at map inputs Xs [S, D]."""
        return self._require_posterior().predict(self._as_inputs(Xs))

    def predict_field(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        """Latent field mean [S, 3] and covariance [S, 3, 3] at map inputs Xs [S, D]."""
        return self._require_posterior().predict_field(self._as_inputs(Xs))

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """The stream's state over the functionals, under this model's name."""
        return {
            **self._stream.state_dict(),
            "model": np.array(self.name),
            **{f.field: np.array(f.read_from(self)) for f in self.STATE_SETTINGS},
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], device: str | torch.device = "auto"
    ) -> VectorFieldGP:
        """Rebuild from :meth:`state_dict`.

        Raises:
            StateError: another model's state, or a malformed one.
        """
        saved = str(np.asarray(state.get("model", "")))
        if saved != cls.name:
            raise StateError(f"the state holds a {saved!r} model, not a {cls.name!r} one")
        try:
            settings = {f.name: f.parse(state) for f in cls.STATE_SETTINGS}
        except (KeyError, TypeError, ValueError) as err:
            raise StateError(f"potential state has no valid input_dim: {err}") from err
        input_dim = settings["input_dim"]
        if input_dim not in INPUT_DIMS:
            raise StateError(f"potential state's input_dim must be 2 or 3; got {input_dim}")
        own = {f.field for f in cls.STATE_SETTINGS}
        inner = {k: v for k, v in state.items() if k not in own}
        inner["model"] = np.array(OnlineSparseGP.name)
        stream = OnlineSparseGP.from_state(inner, device)
        if not isinstance(stream.kernel, CurlFreeKernel):
            raise StateError("potential state does not hold a curl-free kernel")
        return cls._wrap(stream, input_dim)

    # ------------------------------------------------------------------ validation
    def _require_posterior(self) -> FieldPosterior:
        posterior = self.posterior
        if posterior is None:
            raise RuntimeError("the model has no data yet: call update() first")
        return posterior

    def _as_inputs(self, X: Tensor | np.ndarray) -> Tensor:
        X_t = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        if X_t.ndim != 2 or X_t.shape[1] != self.input_dim:
            raise ValueError(f"inputs must be [N, {self.input_dim}]; got {tuple(X_t.shape)}")
        return X_t

    def _validate(self, X: Tensor | np.ndarray, y: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        X_t = torch.as_tensor(X, dtype=self.dtype, device=self.device)
        width = self.input_dim + len(self.auxiliary_inputs)
        y_t = torch.as_tensor(y, dtype=self.dtype, device=self.device)
        if X_t.ndim != 2 or X_t.shape[1] != width or y_t.shape != (X_t.shape[0], 3):
            columns = ", ".join([f"position ({self.input_dim})", *self.auxiliary_inputs])
            raise ValueError(
                f"expected X [N, {width}] ({columns}) and y [N, 3]; got {tuple(X_t.shape)} and "
                f"{tuple(y_t.shape)}"
            )
        if X_t.shape[0] == 0:
            raise ValueError("empty batch: X and y have no rows")
        if not torch.isfinite(X_t).all():
            raise ValueError(f"X has {int((~torch.isfinite(X_t)).any(1).sum())} rows with NaN/inf")
        if not torch.isfinite(y_t).all():
            raise ValueError(f"y has {int((~torch.isfinite(y_t)).any(1).sum())} rows with NaN/inf")
        if self.auxiliary_inputs and not bool((X_t[:, self.input_dim :].norm(dim=1) > 0.5).all()):
            raise ValueError("the orientation columns must hold unit quaternions (x, y, z, w)")
        return X_t, y_t
