"""The additive model as one kernel over tagged rows, so the streaming engine runs it unchanged.

Our streaming design (Adam, Durrande & John 2018 is batch only): every row is
``[p (d columns), ψ, run, t, tag]``, the position, the heading [rad], the run label, the time [s]
and what the row stands for:

- tag 0 (:data:`OBSERVATION`): the predictor ρ(x) = Σ_c f_c(x^(c)) at a reading;
- tag c > 0 (:data:`COMPONENT_TAGS`): one component's value f_c at the row's own input, an
  inducing variable (or a prediction of that component alone).

So ``k(ρ(x), ρ(x')) = Σ_c k_c(x^(c), x'^(c))``, ``k(f_c(z), ρ(x)) = k_c(z^(c), x^(c))`` and
``k(f_c(z), f_c'(z')) = 0`` for c ≠ c': K_aa, K_bb and K_ba are block-diagonal by component
and the Bui bound over the union of the components' inducing sets is the additive model's,
with a full coupled posterior over all of them.

The ``map`` component carries the offset: its kernel is the node's ``Constant + stationary``
on the position (the constant is rank one, so any map inducing point represents it). With
``map`` alone an observation *is* its map value, the tag plays no part, and every matrix is the
map kernel's on the position columns, computed exactly as the plain VIPS engine computes it.

The field's level is shared by the offset, the run offsets and the drift: left free, the fit
hands part of it to the nuisance and the published map layer (offset + map) is off by that
much (12 µT in a one-run stream fitted without a hyperprior). The batch model makes the drift
zero-mean over the log, whose span a stream does not know; here the nuisance is anchored to
the stream's start instead: the first run is the reference (:class:`LaterRunOffset`: an
offset per later run) and the drift is zero at the first reading (:class:`AnchoredMatern32`),
so the map layer's level is the first run's at the start, and later runs and times are
measured against it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import Kernel, Matern32, register_kernel_type
from .component import component_kernel_from_spec
from .run_offset import RunOffset

OBSERVATION = 0
# One tag per component, in the order the model holds them (gam/settings.py).
COMPONENT_TAGS: Mapping[str, int] = {"map": 1, "heading": 2, "run": 3, "drift": 4}
# The columns after the position, in this order; the tag is the last column.
AUXILIARY_COLUMNS = ("yaw", "run", "time")
# The column (after the position) each nuisance component reads.
COMPONENT_COLUMN: Mapping[str, str] = {"heading": "yaw", "run": "run", "drift": "time"}


def row_width(input_dim: int) -> int:
    """Columns of a row: position, ψ, run, t, tag."""
    return input_dim + len(AUXILIARY_COLUMNS) + 1


def tagged_rows(positions: Tensor, yaw: Tensor, run: Tensor, time: Tensor, tag: int) -> Tensor:
    """Rows [N, d + 4] of one kind at positions [N, d], headings, run labels and times [N]."""
    tags = positions.new_full((positions.shape[0],), float(tag))
    return torch.cat([positions, torch.stack([yaw, run, time, tags], dim=1)], dim=1)


def tags_of(rows: Tensor) -> Tensor:
    """The tag of each row [N] (integers)."""
    return rows[:, -1].round().long()


class LaterRunOffset(RunOffset):
    """``v · [round(r) = round(r') ≠ 0]``: an offset per run after the first, run 0 the
    reference (its readings carry no run offset; module docstring)."""

    kind = "later_run_offset"

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        other = X if X2 is None else X2
        later = (torch.round(X[:, 0]) != 0)[:, None] & (torch.round(other[:, 0]) != 0)[None, :]
        return super()._K(X, X2) * later.to(X.dtype)

    def _K_diag(self, X: Tensor) -> Tensor:
        return self.variance * (torch.round(X[:, 0]) != 0).to(X.dtype)

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(RunOffset.kind, {"variance": self.variance})]  # named as the batch model's


class AnchoredMatern32(Matern32):
    """Matérn-3/2 in time conditioned on f(0) = 0: ``k(t, t') − k(t, 0) k(0, t') / σ²``.

    The drift since the stream's first reading (time 0; module docstring). Far from 0 (beyond a
    few lengthscales) it is the stationary kernel again: the drift may wander, but the level at
    the start belongs to the offset.
    """

    kind = "anchored_matern32"

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        other = X if X2 is None else X2
        origin = X.new_zeros((1, X.shape[1]))
        to_a, to_b = super()._K(X, origin), super()._K(origin, other)
        return super()._K(X, X2) - to_a @ to_b / self.variance

    def _K_diag(self, X: Tensor) -> Tensor:
        k0 = super()._K(X, X.new_zeros((1, X.shape[1])))[:, 0]
        return self.variance - k0 * k0 / self.variance

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [(Matern32.kind, {"variance": self.variance, "lengthscale": self.lengthscale})]


class BlockKernel(Kernel):
    """``Σ_c k_c`` between observations, ``k_c`` to component c's rows, 0 across components.

    Args:
        components: the component kernels by name (keys of :data:`COMPONENT_TAGS`, ``map``
            required). ``map`` reads the position columns (all of them: it is the node's map
            kernel); each nuisance kernel reads its one column (:data:`COMPONENT_COLUMN`) as
            its column 0.
        input_dim: d, the number of position columns (2 or 3).
    """

    def __init__(self, components: Mapping[str, Kernel], input_dim: int) -> None:
        super().__init__()
        unknown = [name for name in components if name not in COMPONENT_TAGS]
        if unknown or "map" not in components:
            raise ValueError(
                f"components must include map and be among {tuple(COMPONENT_TAGS)}; got "
                f"{tuple(components)}"
            )
        if input_dim < 1:
            raise ValueError(f"input_dim must be positive, got {input_dim}")
        self.input_dim = input_dim
        ordered = [name for name in COMPONENT_TAGS if name in components]
        self.parts = nn.ModuleDict({name: components[name] for name in ordered})

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.parts.keys())

    @property
    def single(self) -> bool:
        """Only the map: an observation and its map value are the same variable."""
        return len(self.parts) == 1

    def part(self, name: str) -> Kernel:
        return self.parts[name]

    def columns(self, rows: Tensor, name: str) -> Tensor:
        """The inputs component ``name`` reads from rows [N, d + 4]."""
        if name == "map":
            return rows[:, : self.input_dim]
        c = self.input_dim + AUXILIARY_COLUMNS.index(COMPONENT_COLUMN[name])
        return rows[:, c : c + 1]

    def _check(self, rows: Tensor) -> None:
        if rows.ndim != 2 or rows.shape[1] != row_width(self.input_dim):
            raise ValueError(
                f"additive rows must be [N, {row_width(self.input_dim)}] (position, yaw, run, "
                f"time, tag); got {tuple(rows.shape)}"
            )

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        self._check(X)
        if X2 is not None:
            self._check(X2)
        if self.single:  # the plain map kernel, call for call (bit-for-bit the VIPS engine)
            kernel = self.parts["map"]
            return kernel.K(self.columns(X, "map"), None if X2 is None else self.columns(X2, "map"))
        other = X if X2 is None else X2
        ta, tb = tags_of(X), tags_of(other)
        out = X.new_zeros((X.shape[0], other.shape[0]))
        for name, kernel in self.parts.items():
            ia = _rows_of(ta, COMPONENT_TAGS[name])
            ib = _rows_of(tb, COMPONENT_TAGS[name])
            if ia.numel() == 0 or ib.numel() == 0:
                continue
            whole = ia.numel() == X.shape[0] and ib.numel() == other.shape[0]
            A = self.columns(X if whole else X[ia], name)
            B = self.columns(other if whole else other[ib], name)
            block = kernel.K(A, B)
            if whole:
                out = out + block
            else:
                out = out.index_put((ia[:, None], ib[None, :]), block, accumulate=True)
        return out

    def _K_diag(self, X: Tensor) -> Tensor:
        self._check(X)
        if self.single:
            return self.parts["map"].K_diag(self.columns(X, "map"))
        tags = tags_of(X)
        out = X.new_zeros(X.shape[0])
        for name, kernel in self.parts.items():
            idx = _rows_of(tags, COMPONENT_TAGS[name])
            if idx.numel():
                diag = kernel.K_diag(self.columns(X[idx], name))
                out = out.index_put((idx,), diag, accumulate=True)
        return out

    def to_spec(self) -> dict[str, Any]:
        return {
            "type": "additive_block",
            "input_dim": self.input_dim,
            "parts": {name: kernel.to_spec() for name, kernel in self.parts.items()},
        }

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [group for kernel in self.parts.values() for group in kernel.hyperparameter_groups()]

    def floor_checked_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        """The map's groups only, for the engine's health check (``vips.health``): a nuisance
        variance on its floor says the data have no heading bias, run offset or drift, which is
        an answer, not a collapse."""
        return self.parts["map"].hyperparameter_groups()


def _rows_of(tags: Tensor, tag: int) -> Tensor:
    """Indices of the observations and of component ``tag``'s rows."""
    return torch.nonzero((tags == OBSERVATION) | (tags == tag)).squeeze(-1)


def _part_from_spec(spec: dict[str, Any]) -> Kernel:
    if spec.get("type") == LaterRunOffset.kind:
        return LaterRunOffset(spec["variance"], spec["active_dims"])
    if spec.get("type") == AnchoredMatern32.kind:
        return AnchoredMatern32(spec["variance"], spec["lengthscale"])
    return component_kernel_from_spec(spec)


def _from_spec(spec: dict[str, Any]) -> BlockKernel:
    parts = {name: _part_from_spec(s) for name, s in dict(spec["parts"]).items()}
    return BlockKernel(parts, int(spec["input_dim"]))


register_kernel_type("additive_block", _from_spec)
