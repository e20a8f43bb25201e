"""Run the authors' CaGP-Opt ELBO (GPyTorch ``computation-aware-gps-v2``) on given data and actions.

This script runs with the reference environment's own Python, never with gp_mapper's: GPyTorch's
``computation-aware-gps-v2`` branch and linear_operator's ``sparsity`` branch are installed there
from their own checkouts outside this repository, and only imported from there. It reads the
permuted data, the block entries and θ from an ``.npz`` and, for each kernel variant
(``keops``: ``gpytorch.kernels.keops.MaternKernel``, the paper's; ``dense``:
``gpytorch.kernels.MaternKernel``, the same ELBO code without KeOps), builds
``ComputationAwareGP`` (``ZeroMean``, ``ScaleKernel(Matérn-3/2 ARD)``, ``GaussianLikelihood``) and
``ComputationAwareELBO``, overwrites the action entries with the given ones and writes:

- per case (θ, entries): the ELBO as the authors' code returns it (per datum, to be maximised)
  and its gradient with respect to outputscale, lengthscales and noise (the values, not the
  raw parameters) and to the action entries;
- the constant n·log 2π exactly as their ELBO forms it (in float32: ``torch.as_tensor(2 * math.pi)``
  has torch's default dtype), so that the caller can tell that offset from the rest;
- the wall and CPU seconds of each training epoch (``-mll(model(X), y)``, backward, Adam step,
  ``LinearLR`` step: the loop of the authors' experiments), and the loss of each epoch.

    <ref>/.venv/bin/python benchmarks/reference/cagp_driver.py --inputs case.npz \\
        --output result.json [--threads 1] [--variants keops,dense]

Inputs (``case.npz``): X [N, D] and y [N], permuted so that block b holds rows b·k … b·k + k − 1
(the authors' layout); outputscale [C], lengthscale [C, D], noise [C] and entries [C, I, k], one
per case; epochs, warmup, lr, train_case (the case training starts from).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

LR_END_FACTOR = 0.1  # the paper's LinearLR(end_factor=0.1)


def build(variant: str, X: torch.Tensor, y: torch.Tensor, num_actions: int) -> tuple[Any, Any]:
    """The authors' model and loss on (X, y) with I actions (float64)."""
    import gpytorch

    d = X.shape[1]
    if variant == "keops":
        base = gpytorch.kernels.keops.MaternKernel(nu=1.5, ard_num_dims=d)
    elif variant == "dense":
        base = gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=d)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = gpytorch.models.ComputationAwareGP(
        X,
        y,
        gpytorch.means.ZeroMean(),
        gpytorch.kernels.ScaleKernel(base),
        likelihood,
        projection_dim=num_actions,
        initialization="random",
    )
    model = model.double()
    likelihood = likelihood.double()
    if model.train_targets.shape[0] != y.shape[0]:
        raise ValueError(
            f"the authors' model kept {model.train_targets.shape[0]} of {y.shape[0]} points: "
            "N must be a multiple of I"
        )
    mll = gpytorch.mlls.ComputationAwareELBO(likelihood, model)
    return model, mll


def set_case(model: Any, outputscale: float, lengthscale: np.ndarray, noise: float,
             entries: np.ndarray) -> None:  # fmt: skip
    """θ through GPyTorch's setters (raw parameters by the constraints' inverse transforms) and
    the action entries in place (``actions_op.blocks`` is the same tensor)."""
    covar = model.covar_module
    covar.outputscale = torch.as_tensor(outputscale, dtype=torch.float64)
    covar.base_kernel.lengthscale = torch.as_tensor(lengthscale, dtype=torch.float64)[None, :]
    model.likelihood.noise = torch.as_tensor([noise], dtype=torch.float64)
    with torch.no_grad():
        model.non_zero_action_entries.copy_(torch.as_tensor(entries, dtype=torch.float64))
    assert model.actions_op.blocks is model.non_zero_action_entries


def value_grads(model: Any) -> dict[str, list[float]]:
    """∂/∂value from ∂/∂raw: divide by the constraint's derivative (elementwise transforms)."""
    covar = model.covar_module
    noise_covar = model.likelihood.noise_covar
    out = {}
    for name, raw, constraint in (
        ("outputscale", covar.raw_outputscale, covar.raw_outputscale_constraint),
        ("lengthscale", covar.base_kernel.raw_lengthscale,
         covar.base_kernel.raw_lengthscale_constraint),
        ("noise", noise_covar.raw_noise, noise_covar.raw_noise_constraint),
    ):  # fmt: skip
        with torch.enable_grad():
            r = raw.detach().clone().requires_grad_(True)
            (slope,) = torch.autograd.grad(constraint.transform(r).sum(), r)
        out[name] = (raw.grad / slope).reshape(-1).tolist()
    return out


def evaluate(model: Any, mll: Any, X: torch.Tensor, y: torch.Tensor) -> dict[str, Any]:
    """The ELBO (per datum, as returned) and its gradients at the current θ and entries."""
    model.train()
    model.zero_grad()
    elbo = mll(model(X), y)
    elbo.backward()
    return {
        "elbo": float(elbo.detach()),
        "grad": value_grads(model),
        "grad_entries": model.non_zero_action_entries.grad.detach().reshape(-1).tolist(),
        "theta": {
            "outputscale": float(model.covar_module.outputscale.detach()),
            "lengthscale": model.covar_module.base_kernel.lengthscale.detach().reshape(-1).tolist(),
            "noise": float(model.likelihood.noise.detach()),
        },
    }


def train(model: Any, mll: Any, X: torch.Tensor, y: torch.Tensor, epochs: int, warmup: int,
          lr: float) -> dict[str, list[float]]:  # fmt: skip
    """Adam + LinearLR on −ELBO, one full batch per epoch; the time of each epoch after warm-up."""
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    total = warmup + epochs
    schedule = torch.optim.lr_scheduler.LinearLR(
        optimizer, start_factor=1.0, end_factor=LR_END_FACTOR, total_iters=total
    )
    seconds, cpu_seconds, losses = [], [], []
    for epoch in range(total):
        start, cpu = time.perf_counter(), time.process_time()
        optimizer.zero_grad()
        loss = -mll(model(X), y)
        loss.backward()
        optimizer.step()
        schedule.step()
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        losses.append(float(loss.detach()))
        if epoch >= warmup:
            seconds.append(wall)
            cpu_seconds.append(used)
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "losses": losses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--variants", default="keops,dense")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import gpytorch
    import linear_operator

    case = np.load(args.inputs)
    X = torch.as_tensor(case["X"], dtype=torch.float64)
    y = torch.as_tensor(case["y"], dtype=torch.float64)
    entries = case["entries"]
    num_cases, num_actions = entries.shape[0], entries.shape[1]
    results: dict[str, Any] = {
        "gpytorch": {"version": gpytorch.__version__, "path": str(Path(gpytorch.__file__).parent)},
        "linear_operator": {
            "version": linear_operator.__version__,
            "path": str(Path(linear_operator.__file__).parent),
        },
        "torch": torch.__version__,
        # Their expected log-likelihood's constant as their code forms it (in
        # computation_aware_elbo.py: num_train_data * torch.log(torch.as_tensor(2 * math.pi)),
        # a float32 tensor).
        "n_log_2pi": float(y.shape[0] * torch.log(torch.as_tensor(2 * math.pi))),
        "threads": torch.get_num_threads(),
        "variants": {},
    }
    for variant in args.variants.split(","):
        model, mll = build(variant, X, y, num_actions)
        cases = []
        for c in range(num_cases):
            set_case(model, float(case["outputscale"][c]), case["lengthscale"][c],
                     float(case["noise"][c]), entries[c])  # fmt: skip
            cases.append(evaluate(model, mll, X, y))
        t = int(case["train_case"])
        set_case(model, float(case["outputscale"][t]), case["lengthscale"][t],
                 float(case["noise"][t]), entries[t])  # fmt: skip
        timing = train(model, mll, X, y, int(case["epochs"]), int(case["warmup"]),
                       float(case["lr"]))  # fmt: skip
        results["variants"][variant] = {"cases": cases, "train": timing}
    Path(args.output).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
