"""One additive component: a name, a kernel on its own input columns, its own inducing inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import Kernel, Product, Sum, kernel_from_spec
from .zero_mean import ZeroMeanSE


class Component(nn.Module):
    """``f_c ~ GP(0, k_c)`` on the columns its kernel's ``active_dims`` name.

    The inducing inputs live in the full input space [M_c, D] so the kernel picks its own
    columns from them as from the data; the other columns are ignored (zero by convention).
    Either they are given, or ``from_data`` of the data's rows are drawn at the first fit (a
    map whose extent is only known from the log).

    Args:
        name: unique within a model ("offset", "map", "x1", ...).
        kernel: k_c; its leaves' ``active_dims`` say which columns the component reads.
        inducing: Z_c [M_c, D], fixed during a fit; None to draw them from the data.
        from_data: how many data rows to draw when ``inducing`` is None.
    """

    def __init__(
        self, name: str, kernel: Kernel, inducing: Tensor | None = None, from_data: int = 0
    ) -> None:
        super().__init__()
        if not name or not name.replace("_", "").isalnum():
            raise ValueError(f"a component name must be alphanumeric (with _), got {name!r}")
        if inducing is None and from_data < 1:
            raise ValueError(f"{name}: give inducing inputs or a positive from_data")
        if inducing is not None and (inducing.ndim != 2 or inducing.shape[0] == 0):
            raise ValueError(f"{name}: inducing inputs must be [M, D], M ≥ 1; got {inducing.shape}")
        self.name = name
        self.kernel = kernel
        self.from_data = int(from_data)
        self.register_buffer("inducing", None if inducing is None else inducing.clone())

    @property
    def num_inducing(self) -> int:
        return self.from_data if self.inducing is None else int(self.inducing.shape[0])

    def to_spec(self) -> dict[str, Any]:
        """Name, kernel and draw count (JSON-able); the inducing inputs are saved apart."""
        return {"name": self.name, "kernel": self.kernel.to_spec(), "from_data": self.from_data}


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
