"""One additive component: a name, a kernel on its own input columns, its own inducing inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import Kernel, Product, Sum, kernel_from_spec
from .heading import CompassDeviation
from .run_offset import RunOffset
from .zero_mean import ZeroMeanMatern32, ZeroMeanSE

# How a component without inducing inputs gets them at the first fit: ``random`` rows of the
# data (a map), one per ``distinct`` value of its column (a run label), or a ``grid`` evenly
# spaced over its column's range (time), which also fixes an unset zero-mean Matérn-3/2
# interval there.
DRAW_RULES = ("random", "distinct", "grid")


class Component(nn.Module):
    """``f_c ~ GP(0, k_c)`` on the columns its kernel's ``active_dims`` name.

    The inducing inputs live in the full input space [M_c, D] so the kernel picks its own
    columns from them as from the data; the other columns are ignored (zero by convention).
    Either they are given, or at most ``from_data`` are drawn from the data at the first fit
    by the rule ``draw`` (see :data:`DRAW_RULES`): a map whose extent, the runs, or a time span
    only known from the log.

    Args:
        name: unique within a model ("offset", "map", "x1", ...).
        kernel: k_c; its leaves' ``active_dims`` say which columns the component reads.
        inducing: Z_c [M_c, D], fixed during a fit; None to draw them from the data.
        from_data: how many inducing inputs to draw when ``inducing`` is None (at most).
        draw: the rule they are drawn by; ``distinct`` and ``grid`` need a kernel on one column.
    """

    def __init__(
        self,
        name: str,
        kernel: Kernel,
        inducing: Tensor | None = None,
        from_data: int = 0,
        draw: str = "random",
    ) -> None:
        super().__init__()
        if not name or not name.replace("_", "").isalnum():
            raise ValueError(f"a component name must be alphanumeric (with _), got {name!r}")
        if inducing is None and from_data < 1:
            raise ValueError(f"{name}: give inducing inputs or a positive from_data")
        if inducing is not None and (inducing.ndim != 2 or inducing.shape[0] == 0):
            raise ValueError(f"{name}: inducing inputs must be [M, D], M ≥ 1; got {inducing.shape}")
        if draw not in DRAW_RULES:
            raise ValueError(f"{name}: draw must be one of {DRAW_RULES}, got {draw!r}")
        if draw != "random" and (kernel.active_dims is None or len(kernel.active_dims) != 1):
            raise ValueError(f"{name}: draw {draw!r} needs a kernel on one column")
        self.name = name
        self.kernel = kernel
        self.from_data = int(from_data)
        self.draw = draw
        self.register_buffer("inducing", None if inducing is None else inducing.clone())

    @property
    def num_inducing(self) -> int:
        return self.from_data if self.inducing is None else int(self.inducing.shape[0])

    def to_spec(self) -> dict[str, Any]:
        """Name, kernel, draw count and rule (JSON-able); the inducing inputs are saved apart."""
        spec = {"name": self.name, "kernel": self.kernel.to_spec(), "from_data": self.from_data}
        if self.draw != "random":  # written only when set: older specs read as before
            spec["draw"] = self.draw
        return spec

    def draw_inducing(self, X: Tensor, generator: torch.Generator) -> Tensor:
        """Inducing inputs [M, D] drawn from the data X [N, D] by this component's rule."""
        if self.draw == "random":
            rows = torch.randperm(X.shape[0], generator=generator)[: self.from_data]
            return X[rows.to(X.device)].clone()
        column = self.kernel.active_dims[0]
        values = X[:, column]
        if self.draw == "distinct":
            points = torch.unique(torch.round(values))[: self.from_data]
        else:
            low, high = float(values.min()), float(values.max())
            if not high > low:
                raise ValueError(f"{self.name}: its column is constant; no grid to draw")
            points = torch.linspace(low, high, self.from_data, dtype=X.dtype, device=X.device)
            if isinstance(self.kernel, ZeroMeanMatern32) and self.kernel.interval is None:
                self.kernel.set_interval(low, high)
        return grid_inducing(points[:, None], [column], X.shape[1])


def component_kernel_from_spec(spec: dict[str, Any]) -> Kernel:
    """:func:`core.kernels.kernel_from_spec` that also knows the zero-mean SE kernel.

    Raises:
        ValueError: an unknown kernel type or a malformed field.
    """
    kind = spec.get("type")
    try:
        if kind == ZeroMeanSE.kind:
            return ZeroMeanSE(
                spec["variance"], spec["lengthscale"], spec["active_dims"], tuple(spec["interval"])
            )
        if kind == ZeroMeanMatern32.kind:
            interval = spec["interval"]
            return ZeroMeanMatern32(
                spec["variance"],
                spec["lengthscale"],
                spec["active_dims"],
                None if interval is None else tuple(interval),
            )
        if kind == CompassDeviation.kind:
            return CompassDeviation(spec["variance"], spec["active_dims"])
        if kind == RunOffset.kind:
            return RunOffset(spec["variance"], spec["active_dims"])
        if kind in ("sum", "product"):
            first, second = (component_kernel_from_spec(s) for s in spec["parts"])
            return Sum(first, second) if kind == "sum" else Product(first, second)
    except (KeyError, TypeError) as err:
        raise ValueError(f"kernel spec {spec!r} is missing or has a bad field: {err}") from err
    return kernel_from_spec(spec)


def check_components(components: Sequence[Component]) -> None:
    """Raise ValueError on an empty list, repeated names or inducing sets of different widths."""
    if not components:
        raise ValueError("an additive model needs at least one component")
    names = [c.name for c in components]
    if len(set(names)) != len(names):
        raise ValueError(f"component names must be unique, got {names}")
    widths = {int(c.inducing.shape[1]) for c in components if c.inducing is not None}
    if len(widths) > 1:
        raise ValueError(f"every component's inducing inputs need the same width D, got {widths}")


def grid_inducing(points: Tensor, columns: Sequence[int], input_dim: int) -> Tensor:
    """Embed points [M, len(columns)] in the full input space [M, D] (other columns zero)."""
    out = torch.zeros(points.shape[0], input_dim, dtype=points.dtype, device=points.device)
    out[:, list(columns)] = points
    return out
