"""Kernels on some input columns, products, unique hyperparameter names and the node's flat θ."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gp_mapper.engine.core import (
    Constant,
    Kernel,
    Matern32,
    Matern52,
    Product,
    SquaredExponential,
    Sum,
    kernel_from_spec,
    node_hyperparameters,
)
from gp_mapper.engine.core.hyperprior import LogNormalHyperprior

DTYPE = torch.float64
REL_TOL = 1e-9  # the posterior's BLOCK_CUTOFF order of magnitude


def inputs(rng: np.random.Generator, n: int, d: int = 3) -> torch.Tensor:
    return torch.as_tensor(rng.normal(size=(n, d)), dtype=DTYPE)


def dense(kernel: Kernel, X: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
    return kernel.K(X, X2).detach()


# ------------------------------------------------------------------ active_dims
def test_active_dims_restrict_the_columns_a_kernel_reads(rng: np.random.Generator) -> None:
    X, X2 = inputs(rng, 5), inputs(rng, 4)
    on_xy = Matern52(2.0, 0.7, active_dims=[0, 1]).double()
    torch.testing.assert_close(dense(on_xy, X, X2), dense(Matern52(2.0, 0.7), X[:, :2], X2[:, :2]))
    # Columns out of order and not adjacent: read in the order given (ARD lengthscales follow).
    on_tx = SquaredExponential(1.5, [0.3, 2.0], ard_dims=2, active_dims=[2, 0]).double()
    reference = SquaredExponential(1.5, [0.3, 2.0], ard_dims=2).double()
    torch.testing.assert_close(dense(on_tx, X, X2), dense(reference, X[:, [2, 0]], X2[:, [2, 0]]))
    torch.testing.assert_close(on_tx.K_diag(X).detach(), torch.full((5,), 1.5, dtype=DTYPE))


def test_active_dims_are_checked_and_round_trip_through_the_spec(
    rng: np.random.Generator,
) -> None:
    k = Constant(3.0) + Matern32(2.0, 0.5, active_dims=[2])
    spec = k.to_spec()
    assert spec["parts"][1]["active_dims"] == [2]
    assert "active_dims" not in spec["parts"][0]  # written only when set
    X = inputs(rng, 6)
    torch.testing.assert_close(dense(kernel_from_spec(spec).double(), X), dense(k.double(), X))
    with pytest.raises(ValueError, match=r"acts on columns \(2,\), but the inputs have 2"):
        k.K(X[:, :2])
    for bad in ([], [0, 0], [-1], [0.5]):
        with pytest.raises(ValueError, match="active_dims must be distinct"):
            Matern52(active_dims=bad)
    with pytest.raises(ValueError, match="ard_dims=3 but active_dims names 2 columns"):
        Matern52(ard_dims=3, active_dims=[0, 1])
    with pytest.raises(ValueError, match="give active_dims to its parts"):
        kernel_from_spec({**spec, "active_dims": [0]})


def test_specs_written_before_active_dims_and_products_still_load() -> None:
    old = {
        "type": "sum",
        "parts": [
            {"type": "constant", "variance": 480.0},
            {"type": "matern52", "variance": 12.0, "lengthscale": [0.5, 0.9], "ard_dims": 2},
        ],
    }
    k = kernel_from_spec(old)
    assert isinstance(k, Sum) and k.second.active_dims is None
    constant, matern = k.to_spec()["parts"]
    assert constant == pytest.approx(old["parts"][0])  # same keys, same values
    assert matern.keys() == old["parts"][1].keys()
    assert matern["lengthscale"] == pytest.approx(old["parts"][1]["lengthscale"], rel=1e-12)


def test_a_kernel_on_some_columns_reports_no_negligible_distance() -> None:
    # Points far apart in (x, y, t) may be close in (x, y): no radius bounds such a kernel.
    assert Matern52(1.0, 1.0, active_dims=[0, 1]).negligible_distance(REL_TOL) is None
    assert Matern52(1.0, 1.0).negligible_distance(REL_TOL) is not None


# ------------------------------------------------------------------ products
def test_product_multiplies_and_round_trips(rng: np.random.Generator) -> None:
    space = Matern52(3.0, 0.8, active_dims=[0, 1])
    time = SquaredExponential(2.0, 5.0, active_dims=[2])
    k = (space * time).double()
    assert isinstance(k, Product)
    X, X2 = inputs(rng, 5), inputs(rng, 3)
    torch.testing.assert_close(dense(k, X, X2), dense(space, X, X2) * dense(time, X, X2))
    torch.testing.assert_close(k.K_diag(X).detach(), torch.full((5,), 6.0, dtype=DTYPE))
    rebuilt = kernel_from_spec(k.to_spec()).double()
    assert rebuilt.to_spec() == k.to_spec()
    torch.testing.assert_close(dense(rebuilt, X, X2), dense(k, X, X2))
    k.K(X).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in k.parameters())


def test_a_constant_factor_scales_instead_of_offsetting(rng: np.random.Generator) -> None:
    matern = Matern52(1.0, 0.7)
    k = (Constant(40.0) * matern).double()
    assert k.constant_variance() == 0.0 and k.constant_part() is None
    assert k.without_constant() is k  # nothing to take out: it is all local
    assert k.negligible_distance(REL_TOL) == pytest.approx(matern.negligible_distance(REL_TOL))
    X = inputs(rng, 4, 2)
    torch.testing.assert_close(dense(k, X), 40.0 * dense(matern.double(), X))


@pytest.mark.parametrize(
    "kernel",
    [
        (Constant(5.0) + Matern52(2.0, 0.6)) * SquaredExponential(3.0, 1.5),
        (Constant(5.0) + Matern52(2.0, 0.6)) * (Constant(7.0) + Matern32(1.0, 2.0)),
        Constant(5.0) * Constant(3.0) + Matern52(2.0, 0.6),
        Constant(2.0) * (Constant(5.0) + Matern52(2.0, 0.6)),
    ],
    ids=["mixed-times-local", "mixed-times-mixed", "constant-product-plus-local", "scaled-mixed"],
)
def test_constant_part_plus_the_rest_is_the_kernel(
    kernel: Kernel, rng: np.random.Generator
) -> None:
    """The decomposition prediction relies on: k = constant_variance + without_constant."""
    kernel = kernel.double()
    X, X2 = inputs(rng, 6, 2), inputs(rng, 5, 2)
    c = kernel.constant_variance()
    rest = kernel.without_constant()
    assert rest is not None
    torch.testing.assert_close(c + dense(rest, X, X2), dense(kernel, X, X2))
    torch.testing.assert_close(c + rest.K_diag(X).detach(), kernel.K_diag(X).detach())
    part = kernel.constant_part()
    assert (part is None) == (c == 0.0)
    if part is not None:
        torch.testing.assert_close(dense(part, X, X2), torch.full((6, 5), c, dtype=DTYPE))
    # The rest vanishes beyond its negligible distance, if it reports one.
    radius = rest.negligible_distance(REL_TOL)
    if radius is not None:
        far = X + 1.01 * radius * torch.tensor([1.0, 0.0], dtype=DTYPE)
        assert (dense(rest, X, far).diagonal() < REL_TOL * rest.K_diag(X).detach()).all()


def test_a_product_is_negligible_where_a_local_factor_is() -> None:
    short, long = Matern52(1.0, 0.5), SquaredExponential(1.0, 3.0)
    assert (short * long).negligible_distance(REL_TOL) == pytest.approx(
        short.negligible_distance(REL_TOL)
    )
    # A factor with an offset never vanishes; the other factor decides.
    offset = Constant(1.0) + Matern52(1.0, 0.5)
    assert (offset * long).negligible_distance(REL_TOL) == pytest.approx(
        long.negligible_distance(REL_TOL)
    )
    assert (offset * Constant(2.0)).negligible_distance(REL_TOL) is None


# ------------------------------------------------------------------ names
def test_todays_kernels_keep_todays_names() -> None:
    k = Constant(480.0) + Matern52(12.0, [0.5, 0.9], ard_dims=2)
    assert k.describe() == pytest.approx(
        {"constant_variance": 480.0, "matern52_variance": 12.0, "matern52_lengthscale": [0.5, 0.9]}
    )
    assert set(SquaredExponential().hyperparameters()) == {"se_variance", "se_lengthscale"}


def test_repeated_kinds_get_unique_stable_names() -> None:
    k = Constant(400.0) + Matern52(10.0, 0.5) + Matern52(2.0, 3.0) + Constant(1.0) * Matern32()
    described = k.describe()
    assert described == pytest.approx(
        {
            "constant_variance": 400.0,
            "matern52_variance": 10.0,
            "matern52_lengthscale": 0.5,
            "matern52_2_variance": 2.0,
            "matern52_2_lengthscale": 3.0,
            "constant_2_variance": 1.0,
            "matern32_variance": 1.0,
            "matern32_lengthscale": 1.0,
        }
    )
    assert list(k.hyperparameters()) == list(described)
    assert list(kernel_from_spec(k.to_spec()).describe()) == list(described)


def test_hyperprior_centres_reach_the_parameter_they_name() -> None:
    k = (Constant(400.0) + Matern52(10.0, 0.5) + Matern52(2.0, 3.0)).double()
    prior = LogNormalHyperprior(1.0, {"matern52_2_lengthscale": 1.0})
    prior.log_density(k).backward()
    second = k.second
    assert isinstance(second, Matern52)
    assert float(second.raw_lengthscale.grad) < 0.0  # pulled from 3.0 towards 1.0
    first = k.first.second
    assert all(p.grad is None for p in first.parameters())


# ------------------------------------------------------------------ node parameters
def test_node_hyperparameters_read_the_flat_forms() -> None:
    iso = node_hyperparameters(Constant(480.0) + Matern52(12.0, 0.7), 0.05)
    assert iso == pytest.approx(
        {
            "kernel": "matern52",
            "kernel_variance": 12.0,
            "lengthscale": 0.7,
            "ard": False,
            "constant_variance": 480.0,
            "noise_variance": 0.05,
        }
    )
    ard = node_hyperparameters(Matern32(3.0, [0.5, 2.0], ard_dims=2) + Constant(9.0), 0.1)
    assert ard["kernel"] == "matern32" and ard["ard"] is True
    assert ard["lengthscale"] == pytest.approx([0.5, 2.0])
    assert ard["constant_variance"] == pytest.approx(9.0)
    alone = node_hyperparameters(SquaredExponential(2.0, 1.5, variance_max=2000.0), 0.2)
    assert alone["kernel"] == "se" and alone["constant_variance"] == 0.0
    assert isinstance(alone["lengthscale"], float)


@pytest.mark.parametrize(
    "kernel",
    [
        Constant(1.0) * Matern52(),
        Matern52() + Matern32(),
        Constant(1.0) + Constant(2.0),
        Constant(1.0) + Matern52() + Matern52(),
        Constant(1.0) + Matern52(active_dims=[0, 1]),
        Constant(1.0),
    ],
    ids=["product", "two-stationary", "two-constant", "three-parts", "active-dims", "constant"],
)
def test_node_hyperparameters_refuse_kernels_without_a_flat_form(kernel: Kernel) -> None:
    with pytest.raises(ValueError, match="node parameters"):
        node_hyperparameters(kernel, 0.1)
