"""Three-axis field maps: the curl-free potential against per-axis and ‖B‖ streams.

Aalto invensense readings B = (Bx, By, Bz) in µT (room frame, already orientation-compensated
by the authors) at (x, y) in m, two splits:

* ``runs``: every 10th sample of runs 1, 2, 4 and 5 (N = 3365), streamed in time order in
  batches of the node's default ``batch_size`` (400 readings: 9 batches, the last 165); tested
  on all 9404 readings of run 3;
* ``stream``: the VIPS paper's streaming split (``magnetic_streaming.py``): run 3 (9404 readings)
  in its 20 time-ordered batches, tested on all 33 625 readings of runs 1, 2, 4 and 5.

``--splits validation`` is where settings are chosen (never on the two above): runs 6 and 7 at
50 Hz, every reading, cut into 10-second blocks from each run's start; every 5th block (phase
4) is held out and scored, the others are streamed in time order in windows of the node's
``batch_size``.

Rows: ``independent`` (three scalar VIPS streams, one per component; ‖B‖ = the norm of the three
means), ``norm`` (one VIPS stream on ‖B‖; it has no components), ``potential`` (the curl-free
scalar-potential model, inducing variables on φ chosen by VIPS), ``exact_potential`` (the
exact vector GP of the same kernel on an evenly spaced subset of the training readings, θ by
L-BFGS from the same start) and ``exact_independent`` (three exact scalar GPs, one per
component, on the same readings, fitted the same way: the two models without the streaming
approximation). Every model starts from the node's default θ (the VIPS paper's
magnetometer init, as in ``magnetic_streaming.py``: constant/uniform-field variance 500 µT²,
kernel variance 1 µT², lengthscale 1 m, noise 0.1 µT²), the node's δ = 0.035, hyperprior 0.5,
``fit_iterations`` (100 per fit) and ``cell_size`` (a window's readings within a quarter
lengthscale are one observation, ``engine/core/cells.py``; ``--set vips.cell_size=0`` for every
reading, the paper's protocol), with kernel SE (``--kernel matern52`` for Matérn-5/2).

The streams run as the node runs them: θ is re-fitted on the node's schedule (its first 5
windows, then every 20th or when the bound says θ is stale; ``--fit-every-batch`` for the
VIPS paper's every batch), and each stream's ``pass_noise_variance`` is its target's
between-pass excess variance, measured on the training readings alone: readings within 1 cm
of each other, 10 s or more apart, less the same within a pass, where a window spans less
than 10 s (the ``stream`` split's 9 s batches at 50 Hz; the ``runs`` split's thinned windows
span 80 s and several passes, whose discrepancy the fit then sees as noise itself;
``--pass-noise on|0`` to force it). Within a 9-second batch the noise a fit sees is ~0.1 µT²
per component, between passes of the same place it is 2-10 µT² (orientation and calibration
residue that turns with the pass); the potential model, which must explain all three
components by one curl-free field, turns that discrepancy into wild field where it is missing.

Columns: RMSE of each component and of ‖B‖ [µT]; NLPD (vector rows: of the three components,
the mean over components and test points, each under N(mean, var + σ²); the norm row: of
‖B‖); the NLPD of ‖B‖ for every row (vector rows by the delta method of
``potential.norm_moments`` on the predictive covariance plus σ² I); the 95 % coverage and
mean 95 % interval width of the same two predictives (``cov95 / width95``: the components' as
the NLPD's, ‖B‖'s as the NLPD ‖B‖'s); final M (independent: the sum and each axis); engine
seconds in total and the median per batch (independent: the three streams' seconds of a batch
summed). The exact row's seconds are its fit.

    python benchmarks/vector_field.py [--splits runs,stream] [--models ...] [--kernel se]
        [--exact-points 1200] [--set kernel_variance=100] [--fit-every-batch]
        [--pass-noise auto|0] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    aalto_dir,
    add_run_arguments,
    coverage95,
    format_table,
    header,
    nlpd,
    rmse,
    warm_up,
    width95,
    write_json,
)
from magnetic_streaming import batches as stream_batches

from gp_mapper.engine import EngineSpec, build_model
from gp_mapper.engine.auxiliary import heading_from_track, yaw_to_quaternion
from gp_mapper.engine.core.device import resolve_device, set_cpu_threads
from gp_mapper.engine.exact import ExactGP
from gp_mapper.engine.potential import ExactFieldGP, norm_moments
from gp_mapper.io.aalto import load_aalto_sequence
from gp_mapper.mapping.config import NODE_ENGINE_DEFAULTS, MapperConfig
from gp_mapper.mapping.fit_schedule import FitSchedule
from gp_mapper.mapping.params_file import parse_overrides
from gp_mapper.mapping.pass_noise import same_place_pairs

MODELS = ("independent", "norm", "potential", "exact_potential", "exact_independent")
SPLITS = ("runs", "stream")
VALIDATION_RUNS = (6, 7)
VALIDATION_BLOCK_S = 10.0
VALIDATION_EVERY = 5
COMPONENTS = ("x", "y", "z")
TRAIN_RUNS = (1, 2, 4, 5)
TEST_RUN = 3
THIN = 10
# The node's default window: samples per engine update.
BATCH_SIZE = MapperConfig().batch_size
# The exact vector GP: 1200 readings = 3600 observations (a 3600² factor, a few seconds per
# evidence and gradient on one core); L-BFGS iterations from the common start.
EXACT_POINTS = 1200
EXACT_ITERATIONS = 40
# Pass-noise pairs: readings this close are at the same place (a tenth of the lengthscales
# fitted here), and this far apart in time on different passes.
PAIR_RADIUS_M = 0.01
PASS_GAP_S = 10.0
# Runs are laid on one time line this far apart, so no pair spans two runs within PASS_GAP_S.
RUN_SPACING_S = 1.0e5
# Test points per prediction call (the exact GP's cross-covariance is [3·chunk, 3N]).
CHUNK = 1000
# A reference measured outside this script: independent exact GPs per component on the runs
# split, θ by grid search.
EXACT_REFERENCE = {"x": 4.82, "y": 3.92, "z": 3.56, "norm": 4.18}
# --quick: a smoke run.
QUICK_BATCHES = 3
QUICK_TEST_EVERY = 20
QUICK_EXACT_POINTS = 200
QUICK_EXACT_ITERATIONS = 5


@dataclass(frozen=True)
class Split:
    X: np.ndarray  # [N, 2] m
    B: np.ndarray  # [N, 3] µT
    t: np.ndarray  # [N] s, runs laid on one time line
    Xt: np.ndarray  # [S, 2]
    Bt: np.ndarray  # [S, 3]
    windows: list[slice]
    describe: str
    # The training readings the pass noise is measured on: the stream split's before
    # --stream-thin (thinned to every 8th reading, run 3 keeps one pair within PAIR_RADIUS_M).
    X_all: np.ndarray
    B_all: np.ndarray
    t_all: np.ndarray


def load(run: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    seq = load_aalto_sequence(aalto_dir(), seq=run)
    return seq.loc_m, seq.mag_ut, seq.time_s - seq.time_s[0] + RUN_SPACING_S * run


def stack(runs: tuple[int, ...], thin: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = [load(r) for r in runs]
    return tuple(np.concatenate([p[i][::thin] for p in parts]) for i in range(3))  # type: ignore[return-value]


def pass_noise_estimates(split: Split) -> dict[str, float]:
    """Half the mean squared difference of training readings at the same place (within
    PAIR_RADIUS_M) on different passes (PASS_GAP_S or more apart), per component and of ‖B‖
    [µT²], less the same within a pass: the error that stays the same along a pass (orientation
    and calibration residue), which no window can tell from the field. From the
    training readings only (the stream split's all of them, before --stream-thin)."""
    i, j, apart = same_place_pairs(split.X_all, split.t_all, PAIR_RADIUS_M, PASS_GAP_S)
    targets = {
        **{c: split.B_all[:, k] for k, c in enumerate(COMPONENTS)},
        "norm": np.linalg.norm(split.B_all, axis=1),
    }
    out: dict[str, float] = {"pairs_between": int(apart.sum())}
    for name, y in targets.items():
        d2 = 0.5 * (y[i] - y[j]) ** 2
        between, within = d2[apart], d2[~apart]
        excess = (between.mean() if between.size else 0.0) - (within.mean() if within.size else 0.0)
        out[name] = float(max(excess, 0.0))
    out["potential"] = float(np.mean([out[c] for c in COMPONENTS]))
    return out


def make_split(name: str, quick: bool, test_every: int, stream_thin: int = 1) -> Split:
    if name == "validation":
        X_all, B_all, t_all = stack(VALIDATION_RUNS)
        block = np.floor((t_all % RUN_SPACING_S) / VALIDATION_BLOCK_S).astype(int)
        held = block % VALIDATION_EVERY == VALIDATION_EVERY - 1
        X, B, t = X_all[~held], B_all[~held], t_all[~held]
        Xt, Bt = X_all[held], B_all[held]
        X_all, B_all, t_all = X, B, t
        windows = [slice(i, min(i + BATCH_SIZE, len(X))) for i in range(0, len(X), BATCH_SIZE)]
        train = f"runs {VALIDATION_RUNS} less every {VALIDATION_EVERY}th 10-s block"
        test = "the held-out blocks"
    elif name == "runs":
        X, B, t = stack(TRAIN_RUNS, THIN)
        X_all, B_all, t_all = X, B, t
        Xt, Bt, _ = stack((TEST_RUN,))
        windows = [slice(i, min(i + BATCH_SIZE, len(X))) for i in range(0, len(X), BATCH_SIZE)]
        train = f"runs {TRAIN_RUNS} every {THIN}th sample in batches of {BATCH_SIZE}"
        test = f"run {TEST_RUN}"
    else:
        X_all, B_all, t_all = stack((TEST_RUN,))
        X, B, t = X_all[::stream_thin], B_all[::stream_thin], t_all[::stream_thin]
        Xt, Bt, _ = stack(TRAIN_RUNS)
        windows = stream_batches(len(X))
        every = "" if stream_thin == 1 else f" every {stream_thin}th reading,"
        train = f"run {TEST_RUN},{every} in {len(windows)} batches (magnetic_streaming.batches)"
        test = f"runs {TRAIN_RUNS}"
    if quick:
        windows = windows[:QUICK_BATCHES]
        test_every = max(test_every, QUICK_TEST_EVERY)
        X, B, t = X[: windows[-1].stop], B[: windows[-1].stop], t[: windows[-1].stop]
        keep = t_all <= t[-1]
        X_all, B_all, t_all = X_all[keep], B_all[keep], t_all[keep]
    Xt, Bt = Xt[::test_every], Bt[::test_every]
    every = "" if test_every == 1 else f", every {test_every}th"
    describe = (
        f"train {train}: N = {len(X)} readings, {len(windows)} batches; "
        f"test {test}{every}: {len(Xt)} readings"
    )
    return Split(X, B, t, Xt, Bt, windows, describe, X_all, B_all, t_all)


def chunked(predict, Xt: np.ndarray, dtype: torch.dtype) -> list[np.ndarray]:
    """Run ``predict`` on CHUNK test points at a time; its outputs concatenated as numpy."""
    outs = []
    for i in range(0, len(Xt), CHUNK):
        res = predict(torch.as_tensor(Xt[i : i + CHUNK], dtype=dtype))
        outs.append([t.detach().cpu().numpy() for t in res])
    return [np.concatenate(parts) for parts in zip(*outs, strict=True)]


def vector_scores(mean: np.ndarray, var: np.ndarray, cov_y: np.ndarray, Bt: np.ndarray) -> dict:
    """Scores of a field prediction: mean [S, 3], component variances var_y [S, 3] (noise in),
    the predictive covariance of a reading cov_y [S, 3, 3] (for ‖B‖)."""
    norm_t = np.linalg.norm(Bt, axis=1)
    nm, nv = (t.numpy() for t in norm_moments(torch.as_tensor(mean), torch.as_tensor(cov_y)))
    return {
        "rmse": {
            **{c: rmse(mean[:, i], Bt[:, i]) for i, c in enumerate(COMPONENTS)},
            "norm": rmse(nm, norm_t),
        },
        "nlpd": nlpd(mean, var, Bt),
        "nlpd_components": {
            c: nlpd(mean[:, i], var[:, i], Bt[:, i]) for i, c in enumerate(COMPONENTS)
        },
        "nlpd_norm": nlpd(nm, nv, norm_t),
        # Over components and test readings, as the NLPD; ‖B‖'s as the NLPD ‖B‖.
        "coverage95": coverage95(mean, var, Bt),
        "coverage95_components": {
            c: coverage95(mean[:, i], var[:, i], Bt[:, i]) for i, c in enumerate(COMPONENTS)
        },
        "width95": width95(var),
        "coverage95_norm": coverage95(nm, nv, norm_t),
        "width95_norm": width95(nv),
    }


def per_axis_scores(mean: np.ndarray, var_y: np.ndarray, Bt: np.ndarray) -> dict:
    """``vector_scores`` of three independent per-axis maps: a reading's predictive
    covariance is the diagonal of the component variances var_y [S, 3] (noise in)."""
    return vector_scores(mean, var_y, np.apply_along_axis(np.diag, 1, var_y), Bt)


@dataclass(frozen=True)
class Protocol:
    """How the streams run: θ re-fitted on every batch (else on the node's schedule), and the
    pass noise of each row (None: 0, the paper's white noise)."""

    fit_every_batch: bool
    pass_noise: dict[str, float] | None

    def spec(self, spec: EngineSpec, row: str) -> EngineSpec:
        """The engine spec of one stream (row: x, y, z, norm or potential)."""
        if self.pass_noise is None:
            return spec
        return spec.replace(vips_pass_noise_variance=round(self.pass_noise[row], 3))


def travel_orientation(split: Split) -> np.ndarray:
    """[N, 4] the pose orientations a replay of the split's runs sees: ``gp-mapper convert
    aalto`` writes each run's heading of travel (the Aalto robot's attitude was not recorded)."""
    run = np.floor(split.t / RUN_SPACING_S)
    yaw = np.empty(len(split.t))
    for r in np.unique(run):
        own = run == r
        yaw[own] = heading_from_track(split.t[own], split.X[own])
    return yaw_to_quaternion(yaw)


def stream(
    spec: EngineSpec, split: Split, y: np.ndarray, label: str, every_batch: bool
) -> tuple[Any, list[dict]]:
    """Stream the split's batches through a fresh model; per-batch (M, seconds, accepted).

    θ is re-fitted when the node would re-fit it (``mapping.fit_schedule`` at the node's
    defaults), or on every batch with ``--fit-every-batch`` (the VIPS paper's protocol).
    """
    model = build_model(spec, input_dim=2)
    cfg = MapperConfig()
    schedule = FitSchedule(
        *(
            (len(split.windows), 0, 0.0)
            if every_batch
            else (cfg.fit_first_windows, cfg.fit_every_windows, cfg.refit_bound_drop)
        )
    )
    log = []
    # A model of the magnetometer's offset reads the orientation after the position.
    X = (
        np.concatenate([split.X, travel_orientation(split)], axis=1)
        if model.auxiliary_inputs
        else split.X
    )
    for b, sl in enumerate(split.windows):
        decision = schedule.decide(model.num_updates)
        report = model.update(X[sl], y[sl], fit=decision.fit)
        if report.accepted:
            schedule.record(decision.fit, report.bound_after_fit, int(report.n))
        log.append(
            {
                "M": model.num_inducing,
                "seconds": report.seconds_total,
                "accepted": report.accepted,
                "reason": report.reason,
                "fit_refused": report.fit_refused,
                "fitted": decision.fit and report.accepted,
            }
        )
        print(
            f"    {label} batch {b + 1}/{len(split.windows)}: n {sl.stop - sl.start} "
            f"M {model.num_inducing} {report.seconds_total:.2f} s"
            + (f" θ fitted ({decision.reason})" if decision.fit else "")
            + ("" if report.accepted else f" REJECTED ({report.reason})")
            + (f" θ refused ({report.fit_refused})" if report.fit_refused else ""),
            file=sys.stderr,
            flush=True,
        )
    return model, log


def timing(seconds: list[float], fitted: list[bool]) -> dict:
    """Total and median seconds per batch; also the medians of the batches that kept θ and of
    those that fitted it: the median of all lands on one kind or the other as the split's fit
    schedule falls, so only like against like is a row's cost against another's."""

    def median(keep: bool) -> float | None:
        own = [s for s, f in zip(seconds, fitted, strict=True) if f != keep]
        return float(np.median(own)) if own else None

    return {
        "seconds": float(np.sum(seconds)),
        "seconds_per_batch": [float(s) for s in seconds],
        "seconds_batch_median": float(np.median(seconds)),
        "seconds_batch_median_kept": median(True),
        "seconds_batch_median_fitted": median(False),
    }


def run_independent(spec: EngineSpec, split: Split, dtype: torch.dtype, how: Protocol) -> dict:
    means, variances, noises, sizes, logs, thetas = [], [], [], {}, {}, {}
    for i, c in enumerate(COMPONENTS):
        model, log = stream(
            how.spec(spec, c).replace(model="vips"),
            split,
            split.B[:, i],
            f"independent {c}",
            how.fit_every_batch,
        )
        mean, var = chunked(model.predict, split.Xt, dtype)
        means.append(mean)
        variances.append(var)
        noises.append(model.noise_variance)
        sizes[c] = model.num_inducing
        logs[c] = log
        thetas[c] = model.hyperparameters()
    out = per_axis_scores(np.stack(means, 1), np.stack(variances, 1) + np.asarray(noises), split.Bt)
    batches = range(len(split.windows))
    per_batch = [sum(logs[c][b]["seconds"] for c in COMPONENTS) for b in batches]
    return {
        **out,
        "M": int(sum(sizes.values())),
        "M_components": sizes,
        **timing(per_batch, [any(logs[c][b]["fitted"] for c in COMPONENTS) for b in batches]),
        "M_per_batch": {c: [e["M"] for e in logs[c]] for c in COMPONENTS},
        "rejected": sum(not e["accepted"] for c in COMPONENTS for e in logs[c]),
        "fits": {c: sum(e["fitted"] for e in logs[c]) for c in COMPONENTS},
        "fits_refused": {c: sum(bool(e["fit_refused"]) for e in logs[c]) for c in COMPONENTS},
        "hyperparameters": thetas,
    }


def run_norm(spec: EngineSpec, split: Split, dtype: torch.dtype, how: Protocol) -> dict:
    y = np.linalg.norm(split.B, axis=1)
    model, log = stream(
        how.spec(spec, "norm").replace(model="vips"), split, y, "norm", how.fit_every_batch
    )
    mean, var = chunked(model.predict, split.Xt, dtype)
    var_y = var + model.noise_variance
    yt = np.linalg.norm(split.Bt, axis=1)
    return {
        "rmse": {"x": None, "y": None, "z": None, "norm": rmse(mean, yt)},
        "nlpd": nlpd(mean, var_y, yt),
        "nlpd_norm": nlpd(mean, var_y, yt),
        "coverage95": coverage95(mean, var_y, yt),
        "width95": width95(var_y),
        "coverage95_norm": coverage95(mean, var_y, yt),
        "width95_norm": width95(var_y),
        "M": model.num_inducing,
        **timing([e["seconds"] for e in log], [e["fitted"] for e in log]),
        "M_per_batch": [e["M"] for e in log],
        "rejected": sum(not e["accepted"] for e in log),
        "fits": sum(e["fitted"] for e in log),
        "fits_refused": sum(bool(e["fit_refused"]) for e in log),
        "hyperparameters": model.hyperparameters(),
    }


def field_result(mean: np.ndarray, cov: np.ndarray, noise: float, Bt: np.ndarray) -> dict:
    cov_y = cov + noise * np.eye(3)
    var_y = np.diagonal(cov_y, axis1=1, axis2=2)
    return vector_scores(mean, var_y, cov_y, Bt)


def run_potential(spec: EngineSpec, split: Split, dtype: torch.dtype, how: Protocol) -> dict:
    model, log = stream(
        how.spec(spec, "potential").replace(model="potential"),
        split,
        split.B,
        "potential",
        how.fit_every_batch,
    )
    mean, cov = chunked(model.predict_field, split.Xt, dtype)
    return {
        **field_result(mean, cov, model.noise_variance, split.Bt),
        "M": model.num_inducing,
        **timing([e["seconds"] for e in log], [e["fitted"] for e in log]),
        "M_per_batch": [e["M"] for e in log],
        "rejected": sum(not e["accepted"] for e in log),
        "fits": sum(e["fitted"] for e in log),
        "fits_refused": sum(bool(e["fit_refused"]) for e in log),
        "hyperparameters": model.hyperparameters(),
        "hard_iron": model.nuisance_summary(),
    }


def evenly_spaced(n: int, points: int) -> np.ndarray:
    """Indices of ``points`` (at most n) evenly spaced rows of n: the exact rows' readings."""
    return np.unique(np.linspace(0, n - 1, min(points, n)).round().astype(int))


def run_exact(
    spec: EngineSpec, split: Split, points: int, iterations: int, dtype: torch.dtype
) -> dict:
    idx = evenly_spaced(len(split.X), points)
    # The potential model's kernel at the common initial θ (uniform field, base kernel).
    kernel = build_model(spec.replace(model="potential"), input_dim=2).kernel
    X = torch.as_tensor(split.X[idx], dtype=dtype)
    B = torch.as_tensor(split.B[idx], dtype=dtype)
    gp = ExactFieldGP(kernel, spec.noise_variance, X, B)
    start = time.perf_counter()
    fit = gp.fit(iterations)
    fit_s = time.perf_counter() - start
    start = time.perf_counter()
    mean, cov = chunked(gp.predict_field, split.Xt, dtype)
    predict_s = time.perf_counter() - start
    noise = float(gp.noise.variance.detach())
    return {
        **field_result(mean, cov, noise, split.Bt),
        "M": None,
        "points": int(idx.size),
        "observations": 3 * int(idx.size),
        "seconds": fit_s,
        "seconds_predict": predict_s,
        "fit_iterations": iterations,
        "fit": fit._asdict(),
        "hyperparameters": {
            "kernel_variance": float(kernel.base.variance.detach()),
            "lengthscale": float(kernel.lengthscale.detach()[0]),
            "constant_variance": float(kernel.earth_variance.detach()),
            "noise_variance": noise,
        },
    }


def run_exact_independent(
    spec: EngineSpec, split: Split, points: int, iterations: int, dtype: torch.dtype
) -> dict:
    """Three exact scalar GPs, one per component, on the exact potential's readings, θ of
    each by the same L-BFGS from the same start: what per-axis maps reach without the
    streaming approximation, beside what the curl-free model reaches (``exact_potential``)."""
    idx = evenly_spaced(len(split.X), points)
    X = torch.as_tensor(split.X[idx], dtype=dtype)
    means, variances, thetas = [], [], {}
    seconds = 0.0
    for i, c in enumerate(COMPONENTS):
        kernel = build_model(spec.replace(model="vips"), input_dim=2).kernel
        y = torch.as_tensor(split.B[idx, i], dtype=dtype)
        gp = ExactGP(kernel, spec.noise_variance, X, y, fit_iterations=iterations)
        start = time.perf_counter()
        report = gp.fit()
        seconds += time.perf_counter() - start
        if not report.accepted:
            raise RuntimeError(f"exact GP on {c} refused: {report.reason}")
        mean, var = chunked(gp.predict, split.Xt, dtype)
        means.append(mean)
        variances.append(var + gp.noise_variance)
        thetas[c] = gp.hyperparameters()
    out = per_axis_scores(np.stack(means, 1), np.stack(variances, 1), split.Bt)
    return {
        **out,
        "M": None,
        "points": int(idx.size),
        "seconds": seconds,
        "fit_iterations": iterations,
        "hyperparameters": thetas,
    }


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(results: dict[str, dict]) -> str:
    rows = []
    for name, r in results.items():
        if name == "independent":
            m = f"{r['M']} ({' + '.join(str(r['M_components'][c]) for c in COMPONENTS)})"
        elif name in ("exact_potential", "exact_independent"):
            m = f"- ({r['points']} readings)"
        else:
            m = str(r["M"])
        per_batch = (
            "-"
            if "seconds_batch_median" not in r
            else " / ".join(
                fmt(r.get(key), 3)
                for key in (
                    "seconds_batch_median",
                    "seconds_batch_median_kept",
                    "seconds_batch_median_fitted",
                )
            )
        )
        seconds = fmt(r["seconds"], 1) + (" (fit)" if name.startswith("exact") else "")
        refused = r.get("fits_refused", "-")
        if isinstance(refused, dict):
            refused = " + ".join(str(refused[c]) for c in COMPONENTS)
        rows.append(
            [
                name,
                *(fmt(r["rmse"][c]) for c in (*COMPONENTS, "norm")),
                fmt(r["nlpd"]),
                fmt(r["nlpd_norm"]),
                f"{fmt(r['coverage95'], 3)} / {fmt(r['width95'], 1)}",
                f"{fmt(r['coverage95_norm'], 3)} / {fmt(r['width95_norm'], 1)}",
                m,
                seconds,
                per_batch,
                str(refused),
            ]
        )
    columns = [
        "model", "RMSE Bx", "RMSE By", "RMSE Bz", "RMSE ‖B‖", "NLPD¹", "NLPD ‖B‖",
        "cov95 / width95 µT¹", "cov95 / width95 ‖B‖", "final M", "engine s total",
        "s/batch median: all / θ kept / θ fitted", "θ refused²",
    ]  # fmt: skip
    return format_table(columns, rows)


def targets(results: dict[str, dict[str, dict]]) -> list[tuple[str, bool, str]]:
    """The targets, where the rows they need were run: (what, met, the figures)."""
    checks = []
    for split, r in results.items():
        if split == "validation":
            continue
        if "potential" in r and "independent" in r:
            p, i = r["potential"]["rmse"], r["independent"]["rmse"]
            diffs = {c: p[c] - i[c] for c in (*COMPONENTS, "norm")}
            checks.append(
                (
                    f"{split}: potential RMSE below independent on x, y, z and ‖B‖",
                    all(d < 0 for d in diffs.values()),
                    ", ".join(f"{c} {p[c]:.2f} vs {i[c]:.2f}" for c in diffs),
                )
            )
        if "potential" in r and "norm" in r:
            pn, nn = r["potential"]["rmse"]["norm"], r["norm"]["rmse"]["norm"]
            checks.append(
                (f"{split}: potential ‖B‖ RMSE no worse than the norm stream's", pn <= nn,
                 f"{pn:.2f} vs {nn:.2f}")
            )  # fmt: skip
            for kind, key in (("", ""), (" (θ kept)", "_kept"), (" (θ fitted)", "_fitted")):
                sp = r["potential"]["seconds_batch_median" + key]
                sn = r["norm"]["seconds_batch_median" + key]
                if sp is None or sn is None:
                    continue
                checks.append(
                    (
                        f"{split}: median s/batch{kind} potential ≤ 3 × norm",
                        sp <= 3 * sn,
                        f"{sp:.3f} vs 3 × {sn:.3f} = {3 * sn:.3f} (ratio {sp / sn:.1f})",
                    )
                )
        if "potential" in r:
            cov = r["potential"]["coverage95_components"]
            checks.append(
                (
                    f"{split}: potential 95 % coverage of each component in [0.90, 0.98]",
                    all(0.90 <= v <= 0.98 for v in cov.values()),
                    ", ".join(f"{c} {v:.3f}" for c, v in cov.items()),
                )
            )
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_arguments(parser)
    parser.add_argument(
        "--splits", default=",".join(SPLITS),
        help="comma-separated: runs, stream, validation (where settings are chosen)",
    )  # fmt: skip
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated rows")
    parser.add_argument("--kernel", default="se", choices=("se", "matern52"))
    parser.add_argument(
        "--exact-points", type=int, default=EXACT_POINTS,
        help=f"readings of the exact vector GP's evenly spaced subset (default {EXACT_POINTS})",
    )  # fmt: skip
    parser.add_argument(
        "--exact-iterations", type=int, default=EXACT_ITERATIONS,
        help=f"L-BFGS iterations of the exact GP's fit (default {EXACT_ITERATIONS})",
    )  # fmt: skip
    parser.add_argument("--test-every", type=int, default=1, help="test on every k-th reading")
    parser.add_argument(
        "--stream-thin", type=int, default=1, metavar="K",
        help="stream split: train every row on every K-th reading of run 3 (the engine-level "
        "form of the node's min_spacing; 50 Hz readings at walking speed lie ~2 cm apart)",
    )  # fmt: skip
    parser.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help="an engine setting for every model (the common start), e.g. --set "
        "kernel_variance=100 (repeatable; default: the node's defaults)",
    )  # fmt: skip
    parser.add_argument(
        "--fit-every-batch", action="store_true",
        help="re-fit θ on every batch (the VIPS paper's protocol); default: when the node "
        "would (its first windows, then every fit_every_windows-th or when stale)",
    )  # fmt: skip
    parser.add_argument(
        "--pass-noise", default="auto", choices=("auto", "on", "0"),
        help="on: each stream's pass_noise_variance = its target's between-pass excess "
        "variance at the same place in the training readings; auto: on where a window spans "
        "less than a pass (10 s: the stream split), else 0; 0: white noise only",
    )  # fmt: skip
    parser.add_argument(
        "--quick", action="store_true",
        help=f"smoke run: {QUICK_BATCHES} batches, every {QUICK_TEST_EVERY}th test reading, "
        f"exact GP on {QUICK_EXACT_POINTS} readings with {QUICK_EXACT_ITERATIONS} iterations",
    )  # fmt: skip
    args = parser.parse_args(argv)
    splits, models = args.splits.split(","), args.models.split(",")
    for value, known in ((splits, (*SPLITS, "validation")), (models, MODELS)):
        if unknown := set(value) - set(known):
            parser.error(f"unknown {sorted(unknown)}; choose from {', '.join(known)}")
    if not (aalto_dir() / "invensense" / "3-mag.csv").is_file():
        print(f"no Aalto invensense data under {aalto_dir()} (set GP_MAPPER_DATA): skipped")
        return 0
    set_cpu_threads(args.threads)
    device, dtype = resolve_device(args.device), torch.float64
    if device.type != "cpu":
        parser.error("the script predicts on the CPU: use --device cpu")
    exact_points = QUICK_EXACT_POINTS if args.quick else args.exact_points
    exact_iterations = QUICK_EXACT_ITERATIONS if args.quick else args.exact_iterations
    # The node's engine defaults but its measured pass noise: each row's is measured here.
    node = {k: v for k, v in NODE_ENGINE_DEFAULTS.items() if k != "vips.pass_noise_variance"}
    spec = EngineSpec(kernel=args.kernel, device=str(device), **node).replace(
        **parse_overrides(args.set)
    )
    theta = {
        k: spec.get(k)
        for k in (
            "kernel", "constant_variance", "kernel_variance", "lengthscale", "noise_variance",
            "fit_iterations", "vips.delta", "vips.hyperprior_scale", "vips.max_inducing",
            "vips.cell_size",
        )
    }  # fmt: skip
    print(header("three-axis field maps on the Aalto invensense runs", device, dtype))
    source = "node defaults" + (", --set " + " ".join(args.set) if args.set else "")
    print(f"initial θ ({source}) " + ", ".join(f"{k} {v}" for k, v in theta.items()))
    quick = "  [--quick]" if args.quick else ""
    print(
        f"exact_potential, exact_independent: {exact_points} evenly spaced training readings, "
        f"{exact_iterations} L-BFGS iterations{quick}"
    )
    warm_up(device, dtype)
    runners = {
        "independent": lambda s, how: run_independent(spec, s, dtype, how),
        "norm": lambda s, how: run_norm(spec, s, dtype, how),
        "potential": lambda s, how: run_potential(spec, s, dtype, how),
        "exact_potential": lambda s, how: run_exact(spec, s, exact_points, exact_iterations, dtype),
        "exact_independent": lambda s, how: run_exact_independent(
            spec, s, exact_points, exact_iterations, dtype
        ),
    }
    results: dict[str, dict[str, dict]] = {}
    described, pass_noise = {}, {}
    for name in splits:
        split = make_split(name, args.quick, args.test_every, args.stream_thin)
        described[name] = split.describe
        pass_noise[name] = pass_noise_estimates(split)
        # A window that spans several passes fits their discrepancy as noise itself; only
        # windows shorter than a pass need it added.
        span = float(np.median([split.t[w.stop - 1] - split.t[w.start] for w in split.windows]))
        pass_noise[name]["window_span_s"] = span
        use = args.pass_noise == "on" or (args.pass_noise == "auto" and span < PASS_GAP_S)
        how = Protocol(args.fit_every_batch, pass_noise[name] if use else None)
        print(f"split {name}: {split.describe}", file=sys.stderr, flush=True)
        results[name] = {}
        for model in models:
            print(f"  {name}: {model} ...", file=sys.stderr, flush=True)
            start = time.perf_counter()
            results[name][model] = runners[model](split, how)
            r = results[name][model]
            print(
                f"  {name}/{model}: RMSE "
                + ", ".join(f"{c} {fmt(v)}" for c, v in r["rmse"].items())
                + f", NLPD {r['nlpd']:.3f}, M {r['M']}, {time.perf_counter() - start:.0f} s wall",
                file=sys.stderr,
                flush=True,
            )
        print(f"\n## split {name}: {split.describe}")
        estimate = pass_noise[name]
        print(
            f"pass noise ({'used' if how.pass_noise else 'not used'}; between-pass excess at "
            f"the same place, {estimate['pairs_between']} pairs of training readings): "
            + ", ".join(f"{k} {estimate[k]:.2f}" for k in (*COMPONENTS, "norm", "potential"))
            + " µT²; θ fitted "
            + ("on every batch" if how.fit_every_batch else "on the node's schedule")
        )
        print(table(results[name]))
    print(
        "\n¹ NLPD, cov95 / width95: vector rows, the three components' (mean over components "
        "and test readings, each under N(mean, var + σ²)); norm row, ‖B‖'s. NLPD ‖B‖, cov95 / "
        "width95 ‖B‖: every row's ‖B‖ (vector rows by the delta method on the predictive "
        "covariance + σ² I)."
    )
    print(
        "² batches whose fitted θ the engine's health check refused (committed under the "
        "previous θ; vips/health.py)."
    )
    if "runs" in results:
        e = EXACT_REFERENCE
        print(
            f"reference, runs split (independent exact GPs, θ by grid search): "
            f"Bx {e['x']}, By {e['y']}, Bz {e['z']}, ‖B‖ {e['norm']} µT RMSE"
        )
    checks = targets(results)
    if checks:
        print("\ntargets:")
        for what, met, figures in checks:
            print(f"  [{'met' if met else 'MISSED'}] {what}: {figures}")
    print("\nfinal hyperparameters:")
    for name, rows in results.items():
        for model, r in rows.items():
            print(f"  {name}/{model}: {r['hyperparameters']}")
    write_json(
        args.json,
        {
            "device": str(device),
            "initial_theta": theta,
            "set": args.set,
            "quick": args.quick,
            "splits_described": described,
            "exact": {"points": exact_points, "iterations": exact_iterations},
            "fit_every_batch": args.fit_every_batch,
            "pass_noise": {"mode": args.pass_noise, "estimates": pass_noise},
            "targets": [{"what": w, "met": m, "figures": f} for w, m, f in checks],
            "splits": results,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
