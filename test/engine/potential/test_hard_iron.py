"""The magnetometer's own offset (hard iron) as a component of the three-axis model.

A map-frame reading is y = B(p) + R b: R the device-to-map rotation of the reading's pose, b
the offset in the device frame. The model estimates b with the map; the map leaves it out.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.engine.auxiliary import ORIENTATION_NAMES, auxiliary_columns
from gp_mapper.engine.core.kernels import SquaredExponential
from gp_mapper.engine.potential import CurlFreeKernel, VectorFieldGP, field_rows
from gp_mapper.engine.potential.functionals import (
    earth_rows,
    hard_iron_rows,
    potential_rows,
    rotation_matrices,
)

from .conftest import DTYPE, dipole_field, lawnmower

OFFSET = (6.0, -4.0, 3.0)  # µT, device frame
NOISE_SD = 0.3  # µT


def kernel(hard_iron_variance: float = 0.0) -> CurlFreeKernel:
    return CurlFreeKernel(SquaredExponential(4.0, [0.6]), 500.0, hard_iron_variance)


def random_quaternions(n: int, seed: int) -> torch.Tensor:
    q = torch.randn(n, 4, dtype=DTYPE, generator=torch.Generator().manual_seed(seed))
    return q / q.norm(dim=1, keepdim=True)


def test_rotation_matrices_are_rotations_and_match_the_quaternion_rule():
    q = random_quaternions(20, 0)
    R = rotation_matrices(q)
    eye = torch.eye(3, dtype=DTYPE).expand(20, 3, 3)
    assert torch.allclose(R @ R.mT, eye, atol=1e-12)
    assert torch.allclose(torch.linalg.det(R), torch.ones(20, dtype=DTYPE))
    # v' = q v q* for one vector, written out (the node's rotate() rule).
    from gp_mapper.mapping.pose_buffer import rotate

    v = np.array([1.0, -2.0, 0.5])
    assert np.allclose(R[3].numpy() @ v, rotate(q[3].numpy(), v), atol=1e-12)


def test_the_offset_adds_sigma_h_squared_times_r_r_between_readings_and_nothing_elsewhere():
    P = torch.tensor([[0.0, 0.0, 0.0], [0.4, 0.1, 0.0]], dtype=DTYPE)
    R = rotation_matrices(random_quaternions(2, 1))
    with_offset, without = kernel(9.0), kernel(0.0)
    rows7 = field_rows(P, R, 7)
    K7 = with_offset.K(rows7)
    K4 = without.K(field_rows(P))
    # Component-major rows: row c·N + i carries R_i[c, :].
    loadings = R.transpose(0, 1).reshape(-1, 3)
    assert torch.allclose(K7, K4 + 9.0 * loadings @ loadings.T, atol=1e-12)
    assert torch.allclose(with_offset.K_diag(rows7), torch.diagonal(K7), atol=1e-12)
    # The offset's own rows: σ_H² δ among them, σ_H² r_k with a reading, 0 with the rest.
    b = hard_iron_rows(P)
    assert torch.allclose(with_offset.K(b), 9.0 * torch.eye(3, dtype=DTYPE))
    assert torch.allclose(with_offset.K(rows7, b), 9.0 * loadings)
    others = torch.cat([potential_rows(P, 7), earth_rows(P, 7), field_rows(P, width=7)])
    assert torch.count_nonzero(with_offset.K(others, b)) == 0
    # A field row without a rotation (what the map predicts) is the field alone.
    assert torch.allclose(with_offset.K(field_rows(P, width=7)), K4, atol=1e-12)
    everything = torch.cat([rows7, others, b])
    with torch.no_grad():
        assert float(torch.linalg.eigvalsh(with_offset.K(everything)).min()) > -1e-8


def synthetic_run(n: int, orientation: str, offset: tuple[float, float, float], seed: int = 0):
    """Readings of the dipole field along a lawnmower path, in the map frame, by a device
    whose offset turns with it: full 3-D attitude (handheld) or yaw only (a planar robot)."""
    gen = torch.Generator().manual_seed(seed)
    xy = lawnmower(n)
    t = torch.linspace(0.0, 1.0, n, dtype=DTYPE)
    yaw = 2.0 * torch.pi * 9.0 * t
    if orientation == "3d":
        roll, pitch = 0.6 * torch.sin(40.0 * t), 0.5 * torch.sin(31.0 * t + 0.7)
    else:
        roll = pitch = torch.zeros_like(t)
    cr, sr = torch.cos(roll / 2), torch.sin(roll / 2)
    cp, sp = torch.cos(pitch / 2), torch.sin(pitch / 2)
    cy, sy = torch.cos(yaw / 2), torch.sin(yaw / 2)
    q = torch.stack(
        [sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy,
         cr * cp * sy - sr * sp * cy, cr * cp * cy + sr * sp * sy], dim=1,
    )  # fmt: skip
    P = torch.cat([xy, torch.zeros(n, 1, dtype=DTYPE)], dim=1)
    B = dipole_field(P)
    y = B + rotation_matrices(q) @ torch.tensor(offset, dtype=DTYPE)
    y = y + NOISE_SD * torch.randn(n, 3, dtype=DTYPE, generator=gen)
    return xy, q, y


def spec(hard_iron_variance: float) -> EngineSpec:
    return EngineSpec(
        model="potential", kernel="se", kernel_variance=4.0, lengthscale=0.6,
        noise_variance=NOISE_SD**2, fit_iterations=0,
        potential_hard_iron_variance=hard_iron_variance,
    )  # fmt: skip


def stream(model: VectorFieldGP, X: torch.Tensor, y: torch.Tensor, windows: int = 3) -> None:
    for part_X, part_y in zip(X.chunk(windows), y.chunk(windows), strict=True):
        assert model.update(part_X, part_y).accepted


def map_rmse(model: VectorFieldGP) -> float:
    grid = lawnmower(150)[::3]
    truth = dipole_field(torch.cat([grid, torch.zeros(grid.shape[0], 1, dtype=DTYPE)], dim=1))
    mean, _ = model.predict_field(grid)
    return float(((mean - truth) ** 2).mean().sqrt())


def test_a_known_offset_is_recovered_within_its_sd_and_the_map_is_as_good_as_without_one():
    xy, q, y = synthetic_run(450, "3d", OFFSET)
    model = build_model(spec(100.0), input_dim=2)
    assert model.auxiliary_inputs == ORIENTATION_NAMES
    stream(model, torch.cat([xy, q], dim=1), y)
    summary = model.nuisance_summary()
    for k, axis in enumerate("xyz"):
        estimate, sd = summary[f"hard_iron_{axis}"], summary[f"hard_iron_{axis}_sd"]
        assert 0.0 < sd < 0.5, (axis, sd)
        assert abs(estimate - OFFSET[k]) < 3.0 * sd, (axis, estimate, sd)
    assert model.report is not None and model.report.nuisance == summary
    # The same readings without an offset, mapped without the component.
    _, _, clean = synthetic_run(450, "3d", (0.0, 0.0, 0.0))
    plain = build_model(spec(0.0), input_dim=2)
    stream(plain, xy, clean)
    assert map_rmse(model) <= 1.1 * map_rmse(plain) + 0.05
    # Ignoring the offset costs the map: the check above can fail.
    ignored = build_model(spec(0.0), input_dim=2)
    stream(ignored, xy, y)
    assert map_rmse(ignored) > 2.0 * map_rmse(model)


def test_a_planar_robot_leaves_the_vertical_offset_in_the_map_and_says_so():
    # Turning about z alone, b_z is a constant in the map frame like the uniform field's z:
    # the model cannot tell them apart and keeps it in the map, as a map without the offset.
    xy, q, y = synthetic_run(300, "yaw", OFFSET)
    model = build_model(spec(100.0), input_dim=2)
    stream(model, torch.cat([xy, q], dim=1), y)
    summary = model.nuisance_summary()
    for k, axis in enumerate("xy"):
        assert abs(summary[f"hard_iron_{axis}"] - OFFSET[k]) < 3.0 * summary[f"hard_iron_{axis}_sd"]
    assert summary["hard_iron_z_sd"] > 0.9 * 10.0  # the prior's sd: not observed
    assert abs(summary["hard_iron_z"]) < 1.0  # 1 % of the vertical sum, the rest in the map
    _, _, vertical_only = synthetic_run(300, "yaw", (0.0, 0.0, OFFSET[2]))
    plain = build_model(spec(0.0), input_dim=2)
    stream(plain, xy, vertical_only)
    # Both maps carry b_z (3 µT on Bz); the split's 1 % adds 0.4 µT to it.
    assert map_rmse(model) <= 1.15 * map_rmse(plain)


def test_the_offset_survives_the_state_and_wrong_inputs_are_refused():
    xy, q, y = synthetic_run(150, "3d", OFFSET)
    model = build_model(spec(100.0), input_dim=2)
    stream(model, torch.cat([xy, q], dim=1), y, windows=1)
    back = VectorFieldGP.from_state(model.state_dict())
    assert back.auxiliary_inputs == ORIENTATION_NAMES
    assert back.kernel.hard_iron_variance == 100.0
    assert back.nuisance_summary() == model.nuisance_summary()
    grid = xy[::10]
    assert torch.equal(back.predict_field(grid)[0], model.predict_field(grid)[0])
    with pytest.raises(ValueError, match="orientation"):
        model.update(xy, y)  # no orientation columns
    with pytest.raises(ValueError, match="unit quaternions"):
        model.update(torch.cat([xy, torch.zeros(150, 4, dtype=DTYPE)], dim=1), y)
    # A model without the offset has no such columns and reports nothing.
    plain = build_model(spec(0.0), input_dim=2)
    assert plain.auxiliary_inputs == ()
    plain.update(xy, y)
    assert plain.nuisance_summary() == {} and plain.report.nuisance == {}


def test_orientation_columns_come_from_the_poses_and_the_identity_where_none():
    q = np.array([[0.0, 0.0, 0.6, 0.8], [np.nan] * 4])
    columns = auxiliary_columns(ORIENTATION_NAMES, np.zeros((2, 2)), np.array([0, 10]), q)
    assert np.array_equal(columns, [[0.0, 0.0, 0.6, 0.8], [0.0, 0.0, 0.0, 1.0]])
