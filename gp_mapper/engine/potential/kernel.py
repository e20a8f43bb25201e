"""The curl-free field kernel: B = −∇φ with φ a stationary GP, plus a uniform (Earth) field.

Every input row is a *functional* of the field at a position: ``[x, y, z, tag]`` with

- tag 0: the local potential φ(p) (an inducing variable, inter-domain);
- tags 1, 2, 3: the field component B_x, B_y, B_z at p (a reading's three rows);
- tags 4, 5, 6: the uniform field's component (an inducing variable; the position is unused);
- tags 7, 8, 9: the magnetometer's own offset (hard iron) along the device's x, y, z axes (an
  inducing variable; the position is unused).

A kernel with the offset (``hard_iron_variance`` > 0) takes rows of seven columns, ``[x, y, z,
tag, r_x, r_y, r_z]``: a field row's ``r`` is the row of the device-to-map rotation R for its
component, since a map-frame reading is y = B(p) + R b with b the device-frame offset; other
rows carry r = 0 (a field row with r = 0 is the field alone: what the map predicts).

With ``k(p, p') = σ_φ² g(u)``, ``u = |p − p'|²/ℓ²`` and ``d = p − p'``, the covariances are
closed form (no autograd through the kernel matrix):

- cov(φ, φ') = σ_φ² g;
- cov(B_i, φ') = −∂k/∂p_i = −2σ_φ² g' d_i / ℓ², and cov(φ, B'_j) = +2σ_φ² g' d_j / ℓ²;
- cov(B_i, B'_j) = ∂²k/∂p_i∂p'_j = −σ_φ² (4g'' d_i d_j / ℓ⁴ + 2g' δ_ij / ℓ²) + σ_E² δ_ij;
- the uniform field E adds σ_E² δ_ij between any two of its or the field's components;
- the offset b ~ N(0, σ_H² I) adds σ_H² r·r' between two field rows, σ_H² r_k between a field
  row and b_k, and σ_H² δ_kl between b_k and b_l.

The variance parameter is that of one field component's local part, σ_B² = σ_φ² c / ℓ² with
``c = −2g'(0)`` (1 for SE, 5/3 for Matérn-5/2), so it reads in µT² like every other kernel of
the engine and a scalar map's θ is a sensible start. Matérn-3/2 is once differentiable only:
its Hessian kernel does not exist at d = 0, and it is refused.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from ..core.kernels import (
    VARIANCE_FLOOR,
    Kernel,
    Matern52,
    SquaredExponential,
    Stationary,
    kernel_from_spec,
    register_kernel_type,
)
from ..core.transforms import inverse_softplus_with_floor, softplus_with_floor

POTENTIAL = 0
FIELD = (1, 2, 3)
EARTH = (4, 5, 6)
HARD_IRON = (7, 8, 9)
SPATIAL_DIMS = 3
TAG_COLUMN = 3
# Rows of a kernel with the offset: position, tag, then the rotation row r (module docstring).
ROTATION_COLUMNS = slice(TAG_COLUMN + 1, TAG_COLUMN + 4)
ROW_WIDTHS = (TAG_COLUMN + 1, TAG_COLUMN + 4)
SQRT5 = math.sqrt(5.0)
# r = sqrt(max(u, tiny)): the gradient of r at u = 0 would be infinite (kernels.py does the same).
_U_FLOOR = 1e-36
# −2 g'(0) of each profile: the field component's variance per unit σ_φ²/ℓ².
_FIELD_SCALE = {"se": 1.0, "matern52": 5.0 / 3.0}


def _profile_derivatives(kind: str, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """g, g' and g'' of the correlation as functions of the squared scaled distance u."""
    if kind == "se":
        g = torch.exp(-0.5 * u)
        return g, -0.5 * g, 0.25 * g
    r = torch.sqrt(torch.clamp(u, min=_U_FLOOR))  # finite gradient at u = 0
    e = torch.exp(-SQRT5 * r)
    g = (1.0 + SQRT5 * r + 5.0 * u / 3.0) * e
    return g, -(5.0 / 6.0) * (1.0 + SQRT5 * r) * e, (25.0 / 12.0) * e


class CurlFreeKernel(Kernel):
    """Covariance of potential, field and uniform-field functionals (module docstring).

    Args:
        base: the potential's stationary kernel, SE or Matérn-5/2, isotropic and on all
            columns; its variance is one field component's local variance σ_B² [µT²].
        earth_variance: σ_E², the prior variance of each component of the uniform field [µT²].
        hard_iron_variance: σ_H², the prior variance of each device-frame component of the
            magnetometer's offset [µT²]; 0 leaves the offset out (rows of four columns). A
            prior, not fitted: the offset itself is estimated with the map.
    """

    def __init__(
        self, base: Stationary, earth_variance: float = 1000.0, hard_iron_variance: float = 0.0
    ) -> None:
        super().__init__()
        if not isinstance(base, SquaredExponential | Matern52):
            raise ValueError(
                f"the potential needs a twice-differentiable kernel (se or matern52); got "
                f"{base.to_spec()['type']}"
            )
        if base.ard or base.active_dims is not None:
            raise ValueError("the potential's kernel must be isotropic and on all columns")
        self.base = base
        self.raw_earth_variance = nn.Parameter(
            inverse_softplus_with_floor(earth_variance, VARIANCE_FLOOR)
        )
        if not (hard_iron_variance >= 0.0 and math.isfinite(hard_iron_variance)):
            raise ValueError(f"hard_iron_variance must be finite, >= 0; got {hard_iron_variance}")
        self.hard_iron_variance = float(hard_iron_variance)

    @property
    def has_hard_iron(self) -> bool:
        """Whether the magnetometer's offset is part of the model (rows of seven columns)."""
        return self.hard_iron_variance > 0.0

    @property
    def row_width(self) -> int:
        """Columns of this kernel's rows: 4, or 7 with the offset's rotation row."""
        return ROW_WIDTHS[1] if self.has_hard_iron else ROW_WIDTHS[0]

    num_target_groups = 3  # a reading's x, y and z have their own levels

    def target_groups(self, X: Tensor) -> Tensor:
        """0, 1, 2 for rows of B_x, B_y, B_z (or of the uniform field's or offset's)."""
        _check_rows(X)
        return _component(X[:, TAG_COLUMN].round().long())

    @property
    def earth_variance(self) -> Tensor:
        return softplus_with_floor(self.raw_earth_variance, VARIANCE_FLOOR)

    @property
    def field_variance(self) -> Tensor:
        """σ_B²: one component's local prior variance [µT²]."""
        return self.base.variance

    @property
    def lengthscale(self) -> Tensor:
        return self.base.lengthscale

    def potential_variance(self) -> Tensor:
        """σ_φ² = σ_B² ℓ² / c [µT² m²]."""
        return self.base.variance * self.lengthscale[0] ** 2 / _FIELD_SCALE[self.base.kind]

    def _K(self, X: Tensor, X2: Tensor | None) -> Tensor:
        X2 = X if X2 is None else X2
        _check_rows(X)
        _check_rows(X2)
        ta, tb = X[:, TAG_COLUMN].round().long(), X2[:, TAG_COLUMN].round().long()
        # Each pair of kinds is its own block, computed on its rows only: the engine's largest
        # matrix, K(Z, X), is potential × field alone.
        pot_a, pot_b = _rows_where(ta == POTENTIAL), _rows_where(tb == POTENTIAL)
        field_a = _rows_where((ta >= FIELD[0]) & (ta <= FIELD[-1]))
        field_b = _rows_where((tb >= FIELD[0]) & (tb <= FIELD[-1]))
        vec_a = _rows_where((ta >= FIELD[0]) & (ta <= EARTH[-1]))
        vec_b = _rows_where((tb >= FIELD[0]) & (tb <= EARTH[-1]))
        ls2 = self.lengthscale[0] ** 2
        s_phi = self.potential_variance()
        out = X.new_zeros((X.shape[0], X2.shape[0]))
        if vec_a.numel() and vec_b.numel():  # the uniform field, shared by field rows
            same = (_component(ta[vec_a])[:, None] == _component(tb[vec_b])[None, :]).to(X.dtype)
            out[vec_a[:, None], vec_b[None, :]] = self.earth_variance * same
        if pot_a.numel() and pot_b.numel():
            g, _, _ = self._profile(X[pot_a], X2[pot_b], ls2)
            out[pot_a[:, None], pot_b[None, :]] = s_phi * g
        if field_a.numel() and pot_b.numel():
            d_i = self._offsets(X[field_a], X2[pot_b], _component(ta[field_a]), rows=True)
            _, g1, _ = self._profile(X[field_a], X2[pot_b], ls2)
            out[field_a[:, None], pot_b[None, :]] = -2.0 * s_phi * g1 * d_i / ls2
        if pot_a.numel() and field_b.numel():
            d_j = self._offsets(X[pot_a], X2[field_b], _component(tb[field_b]), rows=False)
            _, g1, _ = self._profile(X[pot_a], X2[field_b], ls2)
            out[pot_a[:, None], field_b[None, :]] = 2.0 * s_phi * g1 * d_j / ls2
        if field_a.numel() and field_b.numel():
            A, B = X[field_a], X2[field_b]
            comp_a, comp_b = _component(ta[field_a]), _component(tb[field_b])
            d_i = self._offsets(A, B, comp_a, rows=True)
            d_j = self._offsets(A, B, comp_b, rows=False)
            _, g1, g2 = self._profile(A, B, ls2)
            same = (comp_a[:, None] == comp_b[None, :]).to(X.dtype)
            s_b = self.base.variance / _FIELD_SCALE[self.base.kind]
            hess = -s_b * (4.0 * g2 * d_i * d_j / ls2 + 2.0 * g1 * same)
            out[field_a[:, None], field_b[None, :]] = out[field_a[:, None], field_b[None, :]] + hess
        if self.has_hard_iron:
            out = out + self.hard_iron_variance * (_offset_loadings(X) @ _offset_loadings(X2).T)
        return out

    def _profile(self, A: Tensor, B: Tensor, ls2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # One axis at a time: a sum over the last axis of [n, m, 3] costs ten times more.
        r2 = A.new_zeros((A.shape[0], B.shape[0]))
        for axis in range(SPATIAL_DIMS):
            d = A[:, axis, None] - B[None, :, axis]
            r2 = torch.addcmul(r2, d, d)
        return _profile_derivatives(self.base.kind, r2 / ls2)

    @staticmethod
    def _offsets(A: Tensor, B: Tensor, comp: Tensor, *, rows: bool) -> Tensor:
        """(p − p')_c [n, m], c each row's component (``rows``) or each column's."""
        if rows:
            own = A[torch.arange(A.shape[0], device=A.device), comp]
            return own[:, None] - B[:, :SPATIAL_DIMS].T[comp]
        own = B[torch.arange(B.shape[0], device=B.device), comp]
        return A[:, :SPATIAL_DIMS][:, comp] - own[None, :]

    def _K_diag(self, X: Tensor) -> Tensor:
        _check_rows(X)
        tag = X[:, TAG_COLUMN].round().long()
        field = self.base.variance + self.earth_variance
        out = torch.where(tag == POTENTIAL, self.potential_variance(), self.earth_variance)
        out = torch.where((tag >= FIELD[0]) & (tag <= FIELD[-1]), field, out)
        if not self.has_hard_iron:
            return out
        loadings = _offset_loadings(X)
        out = torch.where(tag >= HARD_IRON[0], out.new_zeros(()), out)
        return out + self.hard_iron_variance * (loadings * loadings).sum(-1)

    def local_field_variance(self) -> Tensor:
        """One component's prior variance without the uniform field: what "unknown" means."""
        return self.base.variance

    def to_spec(self) -> dict[str, Any]:
        return {
            "type": "curl_free",
            "base": self.base.to_spec(),
            "earth_variance": float(self.earth_variance.detach()),
            "hard_iron_variance": self.hard_iron_variance,
        }

    def hyperparameter_groups(self) -> list[tuple[str, dict[str, Tensor]]]:
        return [*self.base.hyperparameter_groups(), ("earth", {"variance": self.earth_variance})]

    def node_parts(self) -> tuple[Tensor, Stationary]:
        """(σ_E², the base kernel): the node's constant_variance and kernel parameters."""
        return self.earth_variance, self.base


def _rows_where(mask: Tensor) -> Tensor:
    return torch.nonzero(mask).squeeze(-1)


def _component(tag: Tensor) -> Tensor:
    """0, 1, 2 for x, y, z of a field, uniform-field or offset row."""
    return torch.where(
        tag >= HARD_IRON[0],
        tag - HARD_IRON[0],
        torch.where(tag >= EARTH[0], tag - EARTH[0], tag - FIELD[0]),
    )


def _offset_loadings(X: Tensor) -> Tensor:
    """[n, 3] each row's coefficients on the offset b: r for a field row, the unit vector
    e_k for the offset's own row k, zero for every other row (and for rows of four columns)."""
    tag = X[:, TAG_COLUMN].round().long()
    own = X.new_zeros((X.shape[0], len(HARD_IRON)))
    is_offset = tag >= HARD_IRON[0]
    if bool(is_offset.any()):
        rows = _rows_where(is_offset)
        own[rows, tag[rows] - HARD_IRON[0]] = 1.0
    if X.shape[1] == ROW_WIDTHS[0]:
        return own
    field = ((tag >= FIELD[0]) & (tag <= FIELD[-1])).to(X.dtype)[:, None]
    return own + field * X[:, ROTATION_COLUMNS]


def _check_rows(X: Tensor) -> None:
    if X.ndim != 2 or X.shape[1] not in ROW_WIDTHS:
        raise ValueError(
            "curl-free kernel inputs are [n, 4] rows (x, y, z, tag) or [n, 7] with the offset's "
            f"rotation row; got {tuple(X.shape)}"
        )


def _from_spec(spec: dict[str, Any]) -> CurlFreeKernel:
    base = kernel_from_spec(spec["base"])
    if not isinstance(base, Stationary):
        raise ValueError(f"a curl-free kernel's base must be stationary; got {spec['base']!r}")
    # Specs from before the offset: none.
    return CurlFreeKernel(
        base, float(spec["earth_variance"]), float(spec.get("hard_iron_variance", 0.0))
    )


register_kernel_type("curl_free", _from_spec)
