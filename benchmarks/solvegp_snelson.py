"""SOLVE-GP's 1-D figure (Shi, Titsias & Mnih 2020, Sec. 6.1, Fig. 2) as a PNG.

Setting (App. G.1): 100 training points, an RBF kernel started at lengthscale 1 and variance
1, noise variance 0.1, Adam at lr 0.01 with minibatch 20 for 10 000 iterations, q started at the
prior, no whitening, Z, O and θ trained. Methods: SVGP(5), SVGP(10), ODVGP(5+100) and
SOLVE(5+5); bands are ±3 sd of the latent function. The paper's reading: SVGP(5) under-fits and
under-estimates the variance away from the data, ODVGP fits the mean but over-estimates the
variance, SOLVE(5+5) ≈ SVGP(10).

Snelson's data set is not among the shared data, so the points here are synthetic, drawn to the
same shape (100 inputs on [0, 6] with a gap, a wiggly function of unit scale, noise sd 0.3);
the figure's title says so. The dashed line in every panel is the exact GP at SVGP(10)'s fitted
θ, the reference the sparse fits approach.

    python benchmarks/solvegp_snelson.py [--out docs/solvegp_snelson.png] [--iterations 10000]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO_ROOT, add_run_arguments, header, write_json

from gp_mapper.engine.core import SquaredExponential
from gp_mapper.engine.core.device import resolve_device, set_cpu_threads
from gp_mapper.engine.solvegp import SolveGP

# App. G.1.
NUM_POINTS = 100
INITIAL_LENGTHSCALE = 1.0
INITIAL_VARIANCE = 1.0
INITIAL_NOISE = 0.1
ITERATIONS = 10_000
LEARNING_RATE = 0.01
BATCH_SIZE = 20
BAND_SDS = 3.0
# Synthetic stand-in for Snelson's set: its inputs span about [0, 6] and its targets about
# [-2, 2] with noise sd near 0.3; a gap in the inputs shows the variance away from the data.
X_RANGE = (0.0, 6.0)
GAP = (3.4, 4.4)
NOISE_SD = 0.3
DATA_SEED = 0
PLOT_RANGE = (-1.0, 7.0)
PLOT_POINTS = 400
DEFAULT_OUT = REPO_ROOT / "docs" / "solvegp_snelson.png"
# (label, family, M, M2)
METHODS = (
    ("SVGP(5)", "full", 5, 0),
    ("SVGP(10)", "full", 10, 0),
    ("ODVGP(5+100)", "odvgp", 5, 100),
    ("SOLVE(5+5)", "solve", 5, 5),
)


def latent(x: np.ndarray) -> np.ndarray:
    """A smooth function of Snelson's shape: slow swell plus a faster wiggle."""
    return np.sin(1.6 * x) + 0.5 * np.sin(4.3 * x + 0.5) - 0.1 * x


def synthetic_data(seed: int = DATA_SEED) -> tuple[np.ndarray, np.ndarray]:
    """100 inputs on [0, 6] outside the gap, noisy targets: X [N, 1], y [N]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(*X_RANGE, size=4 * NUM_POINTS)
    x = x[(x < GAP[0]) | (x > GAP[1])][:NUM_POINTS]
    x.sort()
    y = latent(x) + NOISE_SD * rng.normal(size=x.size)
    return x[:, None], y


def fit(
    family: str,
    M: int,
    M2: int,
    X: np.ndarray,
    y: np.ndarray,
    iterations: int,
    device: torch.device,
) -> SolveGP:
    """One method under App. G.1's recipe; epochs = iterations / (N / minibatch)."""
    epochs = max(1, round(iterations * BATCH_SIZE / X.shape[0]))
    model = SolveGP(
        SquaredExponential(INITIAL_VARIANCE, INITIAL_LENGTHSCALE),
        INITIAL_NOISE,
        num_inducing=M,
        num_orthogonal=M2,
        family=family,  # type: ignore[arg-type]
        whiten=False,
        batch_size=BATCH_SIZE,
        epochs=epochs,
        learning_rate=LEARNING_RATE,
        init="kmeans",
        validation=0.0,  # the figure trains on all 100 points, as the paper
        optimal_q=False,
        warm_start=False,  # App. G: q starts at the prior
        prefit_points=0,  # the paper trains θ with q from the start (App. G)
        standardise="none",
        device=device,
        dtype=torch.float64,
    )
    report = model.fit(X, y)
    if not report.accepted:
        raise RuntimeError(f"{family} {M}+{M2}: {report.reason}")
    return model


def exact_posterior(
    model: SolveGP, X: np.ndarray, y: np.ndarray, Xs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exact GP's latent mean and variance at Xs under ``model``'s fitted θ."""
    k = model.kernel
    noise = model.noise_variance
    with torch.no_grad():
        Xt, Xst = torch.as_tensor(X), torch.as_tensor(Xs)
        K = k.K(Xt, Xt) + noise * torch.eye(X.shape[0], dtype=torch.float64)
        Ks = k.K(Xst, Xt)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(torch.as_tensor(y)[:, None], L)
        V = torch.linalg.solve_triangular(L, Ks.T, upper=False)
        mean = (Ks @ alpha).squeeze(1)
        var = k.K(Xst, Xst).diagonal() - (V * V).sum(0)
    return mean.numpy(), var.clamp_min(0.0).numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write")
    parser.add_argument("--iterations", type=int, default=ITERATIONS, help="Adam steps")
    add_run_arguments(parser)
    args = parser.parse_args(argv)
    set_cpu_threads(args.threads)
    device = resolve_device(args.device)
    print(header("SOLVE-GP 1-D figure (Shi et al. 2020, Fig. 2)", device, torch.float64, DATA_SEED))

    X, y = synthetic_data()
    Xs = np.linspace(*PLOT_RANGE, PLOT_POINTS)[:, None]
    fits: dict[str, SolveGP] = {}
    results: dict[str, dict[str, float]] = {}
    for label, family, M, M2 in METHODS:
        start = time.perf_counter()
        fits[label] = fit(family, M, M2, X, y, args.iterations, device)
        m = fits[label]
        results[label] = {
            "elbo_per_point": float(m.report.details["elbo_per_point"]),
            "noise_variance": float(m.noise_variance),
            "seconds": time.perf_counter() - start,
        }
        print(
            f"{label:13s} ELBO/N {m.report.details['elbo_per_point']:+.4f}  "
            f"noise {m.noise_variance:.4f}  {time.perf_counter() - start:.1f} s"
        )
    ref_mean, ref_var = exact_posterior(fits["SVGP(10)"], X, y, Xs)

    fig, axes = plt.subplots(1, len(METHODS), figsize=(4.2 * len(METHODS), 3.6), sharey=True)
    for ax, (label, _family, _M, _M2) in zip(axes, METHODS, strict=True):
        model = fits[label]
        mean_t, var_t = model.predict(Xs)
        mean, sd = mean_t.cpu().numpy(), np.sqrt(var_t.cpu().numpy())
        ax.plot(X[:, 0], y, "k.", ms=3, label="data")
        ax.plot(Xs[:, 0], mean, "C0", lw=1.5, label="mean")
        ax.fill_between(
            Xs[:, 0],
            mean - BAND_SDS * sd,
            mean + BAND_SDS * sd,
            color="C0",
            alpha=0.25,
            label="±3 sd",
        )
        ref_sd = np.sqrt(ref_var)
        for sign in (-1.0, 1.0):
            ax.plot(Xs[:, 0], ref_mean + sign * BAND_SDS * ref_sd, "k--", lw=0.7)
        ax.plot(Xs[:, 0], ref_mean, "k--", lw=0.9, label="exact GP")
        p = model.parameters
        bottom = -3.3
        if p is not None:
            ax.plot(p.Z[:, 0].cpu(), np.full(p.Z.shape[0], bottom), "^", color="C3", label="Z")
            if p.Zo.shape[0]:
                ax.plot(
                    p.Zo[:, 0].cpu(),
                    np.full(p.Zo.shape[0], bottom + 0.25),
                    "v",
                    color="C2",
                    ms=4,
                    label="O",
                )
        elbo = model.report.details["elbo_per_point"]
        ax.set_title(f"{label}  ELBO/N {elbo:+.3f}", fontsize=10)
        ax.set_xlim(*PLOT_RANGE)
        ax.set_ylim(-3.5, 3.0)
        ax.set_xlabel("x")
    axes[0].legend(loc="upper right", fontsize=7, ncol=2)
    fig.suptitle(
        "SOLVE-GP 1-D example (Shi et al. 2020, Sec. 6.1) on SYNTHETIC Snelson-shaped data "
        "(not Snelson's set): "
        f"RBF, Adam {LEARNING_RATE}, minibatch {BATCH_SIZE}, {args.iterations} steps; "
        "bands ±3 sd of f; dashed: exact GP at SVGP(10)'s θ",
        fontsize=9,
    )
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    write_json(args.json, {"iterations": args.iterations, "png": str(args.out), "methods": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
