"""A window's readings per spatial cell (core/cells.py) and the stream that takes them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.engine.core.cells import aggregate_cells, scatter_log_likelihood
from gp_mapper.engine.core.linalg import Jitter
from gp_mapper.engine.core.noise import GaussianNoise
from gp_mapper.engine.vips import OnlineSparseGP
from gp_mapper.engine.vips.bound import online_bound

JITTER = Jitter(1e-6, True)


def repeated_readings(copies: int = 4, places: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    places_xy = rng.uniform(0.0, 5.0, (places, 2))
    X = torch.as_tensor(np.repeat(places_xy, copies, 0))
    y = (
        torch.sin(X[:, 0])
        + torch.cos(X[:, 1])
        + 0.1
        * torch.randn(
            X.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(seed)
        )
    )
    return X, y


def test_cells_hold_the_mean_the_count_and_the_scatter():
    X = torch.tensor([[0.01, 0.02], [0.03, 0.04], [1.5, 0.0]], dtype=torch.float64)
    y = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float64)
    cells = aggregate_cells(X, y, 0.1, 2)
    assert cells.counts.tolist() == [2.0, 1.0]
    assert torch.allclose(cells.X[0], torch.tensor([0.02, 0.03], dtype=torch.float64))
    assert cells.y.tolist() == [2.0, 7.0]
    assert cells.scatter.tolist() == [2.0, 0.0]
    assert cells.aggregated


def test_cells_do_not_depend_on_the_order_of_the_readings():
    X, y = repeated_readings()
    order = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(1))
    a, b = aggregate_cells(X, y, 0.05, 2), aggregate_cells(X[order], y[order], 0.05, 2)
    for u, v in zip(a, b, strict=True):
        assert torch.allclose(u, v, rtol=0.0, atol=1e-12)


def test_columns_past_the_positions_keep_cells_apart():
    # The potential model's rows: (x, y, z, component tag); a reading's three components
    # share a position and must stay three observations.
    X = torch.tensor(
        [[0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 2.0], [0.01, 0.0, 0.0, 1.0]], dtype=torch.float64
    )
    cells = aggregate_cells(X, torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), 0.1, 3)
    assert sorted(cells.counts.tolist()) == [1.0, 2.0]
    assert set(cells.X[:, 3].tolist()) == {1.0, 2.0}


def test_the_bound_of_cells_is_the_bound_of_their_readings():
    """Repeated inputs, no pass noise: the cells' bound plus their scatter term is the
    readings' bound (the sufficient statistics of the Gaussian likelihood)."""
    X, y = repeated_readings()
    kernel = build_model(EngineSpec(kernel="se"), input_dim=2).kernel
    Z = X[::17]
    noise = GaussianNoise(0.05)
    raw = online_bound(kernel, noise.variance, Z, X, y, None, JITTER)[0].value
    cells = aggregate_cells(X, y, 0.01, 2)
    assert cells.counts.unique().tolist() == [4.0]
    value = online_bound(kernel, noise.cell_variance(cells.counts), Z, cells.X, cells.y, None,
                         JITTER)[0].value  # fmt: skip
    total = value + scatter_log_likelihood(cells, noise.fitted_variance)
    assert float(total.detach()) == pytest.approx(float(raw.detach()), rel=1e-10)


def test_pass_noise_caps_what_one_cell_weighs():
    noise = GaussianNoise(0.1, pass_variance=2.0)
    counts = torch.tensor([1.0, 10.0, 1000.0], dtype=torch.float64)
    variance = noise.cell_variance(counts).detach()
    assert float(variance[0]) == pytest.approx(2.1)
    assert float(variance[2]) == pytest.approx(2.0001)


def test_a_stream_of_cells_reports_them_and_saves_its_rule():
    X, y = repeated_readings(copies=5)
    model = build_model(EngineSpec(kernel="se", vips_cell_size=0.05), input_dim=2)
    report = model.update(X.numpy(), y.numpy())
    assert report.accepted and report.n == X.shape[0]
    assert report.num_cells == 60
    again = OnlineSparseGP.from_state(model.state_dict(), device="cpu")
    assert (again.cell_size, again.cell_columns) == (0.05, 2)


def test_without_repeated_places_cells_change_nothing():
    """A window whose cells each hold one reading runs on its readings, bit for bit."""
    X, y = repeated_readings(copies=1)
    maps = []
    for size in (0.0, 0.001):
        model = build_model(EngineSpec(kernel="se", vips_cell_size=size), input_dim=2)
        report = model.update(X.numpy(), y.numpy())
        assert report.num_cells == 0
        maps.append(model.predict(X[:10]))
    assert torch.equal(maps[0][0], maps[1][0]) and torch.equal(maps[0][1], maps[1][1])


def test_the_potential_model_takes_cells_per_component():
    X, _ = repeated_readings(copies=5, places=30)
    B = torch.stack([torch.sin(X[:, 0]), torch.cos(X[:, 1]), 0.5 * X[:, 0]], 1) * 10.0
    model = build_model(
        EngineSpec(kernel="se", model="potential", vips_cell_size=0.05), input_dim=2
    )
    report = model.update(X.numpy(), B.numpy())
    assert report.accepted
    assert report.num_cells == 3 * 30


def test_direction_columns_are_binned_and_averaged_not_matched_exactly():
    # Two readings in one cube whose rotation rows differ by less than a bin: one cell with
    # their mean row; a third turned by 90 degrees stays apart.
    X = torch.tensor(
        [
            [0.01, 0.02, 1.0, 0.999, 0.030, 0.0],
            [0.03, 0.04, 1.0, 0.998, 0.040, 0.0],
            [0.02, 0.03, 1.0, 0.001, 0.999, 0.0],
        ],
        dtype=torch.float64,
    )
    y = torch.tensor([1.0, 3.0, 7.0], dtype=torch.float64)
    cells = aggregate_cells(X, y, 0.1, 2, direction_columns=3)
    assert sorted(cells.counts.tolist()) == [1.0, 2.0]
    pair = int(torch.argmax(cells.counts))
    assert torch.allclose(cells.X[pair, 3:], X[:2, 3:].mean(0))
    assert float(cells.y[pair]) == 2.0
    # Without direction columns the rows must match exactly: three cells.
    assert aggregate_cells(X, y, 0.1, 2).counts.shape[0] == 3
