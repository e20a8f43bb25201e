"""What the batch models (exact, acgp, cagp, cagp_cg, solvegp, gam) share: the report, data
checks, and the state I/O, driven by each model's declared settings and tensors.

A state is a flat dict of numpy arrays (no pickle): a header (model, format version, dtype,
kernel, committed fits), the constructor settings the class declares in ``STATE_SETTINGS``,
the jitter, every raw parameter of the modules ``_parameter_modules`` names, and the model's
own fitted arrays (``_fitted_arrays``). ``from_state`` checks the header, rebuilds the model
from its settings, copies θ bit for bit, and lets the model rebuild its posterior from its
arrays (``_load_fitted``); every fault is one :class:`~.errors.StateError` naming the model.
"""

from __future__ import annotations

import copy
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor, nn

from .core.device import resolve_device
from .core.kernels import Kernel, kernel_from_spec
from .core.linalg import Jitter
from .core.noise import GaussianNoise
from .errors import NumericalError, StateError
from .model import Hyperparameters, ModelKind
from .report import FitReport
from .state import (
    StateSetting,
    describe_hyperparameters,
    freeze_parameters,
    load_raw_parameters,
    raw_parameters,
    validate_data,
)


@contextmanager
def state_errors(name: str) -> Iterator[None]:
    """Turn what a malformed state raises into one StateError naming the model."""
    try:
        yield
    except StateError:
        raise
    except NumericalError as err:
        raise StateError(f"{name} state: the fitted model does not factor: {err}") from err
    except (KeyError, ValueError, TypeError, AttributeError, RuntimeError) as err:
        raise StateError(f"{name} state is malformed: {err}") from err


def finite_tensor(
    state: Mapping[str, Any],
    key: str,
    dtype: torch.dtype,
    device: torch.device,
    model: str,
) -> Tensor:
    """``state[key]`` as a tensor; floating values must be finite.

    Raises:
        StateError: non-finite values.
    """
    value = torch.as_tensor(np.asarray(state[key]), device=device).to(dtype)
    if value.is_floating_point() and not torch.isfinite(value).all():
        raise StateError(f"{model} state field {key!r} has non-finite values")
    return value


class BatchModelBase(ABC):
    """Base of the batch models: one ``fit`` on all data, then a frozen posterior.

    A subclass sets ``name``, ``STATE_VERSION`` (and ``READABLE_VERSIONS`` for older formats
    it still reads), ``STATE_SETTINGS``; holds ``device``, ``dtype``, ``jitter`` (where
    ``TAKES_JITTER``) and ``_report``; and implements ``num_updates``, ``_parameter_modules``,
    ``_fitted_arrays``, ``_load_fitted`` and, when its first constructor argument is not one
    kernel, ``_state_model_args`` / ``_constructor_args``.
    """

    name: ClassVar[str]
    kind: ClassVar[ModelKind] = "batch"
    STATE_VERSION: ClassVar[int] = 1
    READABLE_VERSIONS: ClassVar[tuple[int, ...]] = ()
    STATE_SETTINGS: ClassVar[tuple[StateSetting, ...]] = ()
    # Whether the constructor takes a ``jitter`` (the first rung of its Cholesky ladder).
    TAKES_JITTER: ClassVar[bool] = True
    auxiliary_inputs: tuple[str, ...] = ()

    device: torch.device
    dtype: torch.dtype
    jitter: Jitter
    _report: FitReport | None

    @property
    def report(self) -> FitReport | None:
        """The report of the last fit (None before the first)."""
        return self._report

    def _validate(self, X: Tensor | np.ndarray, y: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        return validate_data(X, y, self.dtype, self.device)

    # ------------------------------------------------------------------ what a model declares
    @abstractmethod
    def _parameter_modules(self) -> dict[str, nn.Module]:
        """The modules whose raw parameters (θ) the state holds, by field prefix."""

    @abstractmethod
    def _fitted_arrays(self) -> dict[str, np.ndarray]:
        """The arrays the posterior is rebuilt from ({} before a fit)."""

    @abstractmethod
    def _load_fitted(self, state: Mapping[str, Any], num_updates: int) -> None:
        """Rebuild the posterior from ``_fitted_arrays``'s fields (θ is already loaded)."""

    def _state_model_args(self) -> dict[str, np.ndarray]:
        """The fields the constructor's positional arguments are rebuilt from."""
        kernel = self._parameter_modules()["kernel."]
        assert isinstance(kernel, Kernel)
        return {"kernel_spec": np.array(json.dumps(kernel.to_spec()))}

    @classmethod
    def _constructor_args(cls, state: Mapping[str, Any], dtype: torch.dtype) -> tuple[Any, ...]:
        """The constructor's positional arguments from the state."""
        return (kernel_from_spec(json.loads(str(np.asarray(state["kernel_spec"])))),)

    @property
    @abstractmethod
    def num_updates(self) -> int:
        """Committed fits (1 once fitted)."""

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """Settings, θ and the fitted arrays, as numpy arrays (no pickle). The posterior is
        not stored: :meth:`from_state` rebuilds it by the same code, bit for bit."""
        out: dict[str, np.ndarray] = {
            "model": np.array(self.name),
            "format_version": np.array(self.STATE_VERSION),
            "dtype": np.array(str(self.dtype).removeprefix("torch.")),
            **self._state_model_args(),
            **{s.field: np.array(s.read_from(self)) for s in self.STATE_SETTINGS},
            "num_updates": np.array(self.num_updates),
        }
        if self.TAKES_JITTER:
            out["jitter"] = np.array(self.jitter.value)
            out["jitter_relative"] = np.array(self.jitter.relative)
        for prefix, module in self._parameter_modules().items():
            out.update({prefix + k: v for k, v in raw_parameters(module).items()})
        out.update(self._fitted_arrays())
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any], device: str | torch.device = "auto") -> Any:
        """Rebuild from :meth:`state_dict` output (or ``np.load`` of it).

        Raises:
            StateError: another model's state, a format it cannot read, a missing, malformed
                or non-finite field, or a fitted model that no longer factors.
        """
        with state_errors(cls.name):
            found = str(np.asarray(state["model"]))
            if found != cls.name:
                raise StateError(f"the state holds a {found!r} model, not {cls.name!r}")
            version = int(np.asarray(state["format_version"]))
            readable = (cls.STATE_VERSION, *cls.READABLE_VERSIONS)
            if version not in readable:
                raise StateError(
                    f"{cls.name} state format {version}, expected one of {sorted(readable)}"
                )
            cls._check_version(state, version)
            dtype = getattr(torch, str(np.asarray(state["dtype"])))
            settings = {s.name: s.parse(state) for s in cls.STATE_SETTINGS}
            if cls.TAKES_JITTER:
                settings["jitter"] = Jitter(
                    float(np.asarray(state["jitter"])), bool(np.asarray(state["jitter_relative"]))
                )
            settings.update(cls._versioned_settings(state, version))
            model = cls(
                *cls._constructor_args(state, dtype),
                device=device,
                dtype=dtype,
                **settings,
            )
            for prefix, module in model._parameter_modules().items():
                load_raw_parameters(module, state, prefix, model.dtype, model.device)
            model._load_fitted(state, int(np.asarray(state["num_updates"])))
        return model

    @classmethod
    def _check_version(cls, state: Mapping[str, Any], version: int) -> None:
        """Refuse an older format this model's settings cannot be read from (none by
        default)."""
        return None

    @classmethod
    def _versioned_settings(cls, state: Mapping[str, Any], version: int) -> dict[str, Any]:
        """Constructor settings whose field depends on the format (none by default)."""
        return {}


class CommittedFit(BatchModelBase):
    """A batch model whose fit commits one frozen record ``_state`` (holding ``kernel``,
    ``noise``, ``posterior`` and ``num_updates``), replaced whole, so a failed fit leaves the
    last one as it was."""

    _state: Any

    def _init_parameters(
        self,
        kernel: Kernel,
        noise_variance: float,
        device: str | torch.device,
        dtype: torch.dtype,
        jitter: float | Jitter,
    ) -> tuple[Kernel, GaussianNoise]:
        """Set the device, dtype and jitter; a frozen copy of the kernel and a noise at the
        initial θ, on them."""
        self.device = resolve_device(device)
        self.dtype = dtype
        self.jitter = Jitter.coerce(jitter)
        self._report = None
        kernel = copy.deepcopy(kernel).to(device=self.device, dtype=dtype)
        noise = GaussianNoise(noise_variance).to(device=self.device, dtype=dtype)
        freeze_parameters(kernel, noise)
        return kernel, noise

    @property
    def posterior(self) -> Any:
        """The prediction cache of the last fit (None before the first)."""
        return self._state.posterior

    @property
    def num_updates(self) -> int:
        return int(self._state.num_updates)

    @property
    def kernel(self) -> Kernel:
        return self._state.kernel

    @property
    def noise_variance(self) -> float:
        return float(self._state.noise.variance)

    def hyperparameters(self) -> Hyperparameters:
        """θ in the node's parameter names (``kernel``, ``kernel_variance``, ...)."""
        return describe_hyperparameters(self.kernel, self.noise_variance)

    def _parameter_modules(self) -> dict[str, nn.Module]:
        return {"kernel.": self._state.kernel, "noise.": self._state.noise}
