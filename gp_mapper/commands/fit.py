"""``gp-mapper fit``: fit any model on a whole bag, write the map products and a tuned θ.

The loop a robotics user wants: record a bag once, fit a model offline (its hyperparameters,
and for a batch model its posterior on the whole log), and launch the node with the fitted
values (``theta.yaml``). The bag is read with the same pairing and thinning as ``replay`` and
the node. A streaming model (vips, potential) is fitted by streaming the bag (``replay``), a
batch model (exact, acgp, solvegp) by one ``fit`` on every sample; the scalar-potential model
of the field vector (potential) implies ``target: vector``. Where the streaming model can carry a
batch model's posterior on (solvegp), the map file written is the streaming model's, so the
node's ``~/load_map`` and ``replay --resume`` continue the fitted map live. The additive model
(gam) with nuisance components also reads each sample's heading, run and time
(``io/model_inputs.py``); its map products are the map layer (offset + map) and its fit report
holds the fitted heading curve, run offsets and drift.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gp_mapper.engine import (
    EngineSpec,
    NumericalError,
    build_model,
    model_entry,
    model_names,
    saved_model_name,
    set_cpu_threads,
)
from gp_mapper.engine.settings import SETTING_BY_NAME
from gp_mapper.io import bag_info, read_bag, write_grids_npz, write_nav2_map, write_png
from gp_mapper.io.errors import IoLayerError
from gp_mapper.io.model_inputs import with_auxiliary_inputs
from gp_mapper.mapping import PARAMETER_BY_NAME, MapperConfig, MapSnapshot
from gp_mapper.mapping.config import check_components_model
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.grid import extend_box
from gp_mapper.mapping.inputs import CollectedSamples, collect_samples
from gp_mapper.mapping.map_file import MapData, save_map
from gp_mapper.mapping.map_products import map_grid, predict_products
from gp_mapper.mapping.persistence import load_model_map
from gp_mapper.mapping.windowing import VECTOR_TARGET

from .params_file import NODE_NAME, config_from_params_file
from .progress import Progress
from .replay import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC, parse_overrides, replay_bag

_LOG = logging.getLogger(__name__)

# Bytes per collected sample: inputs, target, stamp and orientation in float64/int64, with
# the lists' overhead (measured ~2x the arrays).
BYTES_PER_SAMPLE = 2 * 8 * (3 + 1 + 1 + 4)
# A fit may use at most this share of the machine's memory for its largest matrix (the exact
# GP's K, ACGP's preallocated factor): the rest is for the process, the grid and the OS.
MEMORY_SHARE = 0.5
# The fitted model's own state, beside map_state.npz, when map_state.npz holds the streaming
# model that continues it.
FITTED_STATE = "fitted_state.npz"
# The node's parameters that hold θ, written to theta.yaml.
THETA_PARAMETERS = ("kernel", "constant_variance", "kernel_variance", "lengthscale",
                    "noise_variance")  # fmt: skip

EXAMPLES = """examples:
  gp-mapper fit run.mcap --model acgp --out out/acgp
  gp-mapper fit run.mcap --model exact --max-samples 5000 --out out/exact
  gp-mapper fit run.mcap --model solvegp --set solve_inducing=256 --out out/solve
  gp-mapper fit run.mcap --model vips --params config/gp_mapper.yaml --out out/vips
  gp-mapper fit run.mcap --model potential --out out/potential   # the field vector
  gp-mapper fit run.mcap --model acgp --set acgp_rel_tol=0.005 --set kernel=matern32 --out out/a
  gp-mapper fit run.mcap --model gam --set components=offset+map+heading+run --out out/gam

then launch the node with the fitted hyperparameters:
  ros2 launch gp_mapper gp_mapper.launch.py params_file:=out/acgp/theta.yaml
"""


class FitOutputs(NamedTuple):
    """The files ``fit`` writes into its output directory."""

    png: Path
    nav2_yaml: Path
    grids: Path
    state: Path
    report: Path
    theta: Path

    @classmethod
    def in_dir(cls, out: Path) -> FitOutputs:
        return cls(
            out / "map.png",
            out / "map.yaml",
            out / "grids.npz",
            out / "map_state.npz",
            out / "fit_report.json",
            out / "theta.yaml",
        )


class FitResult(NamedTuple):
    snapshot: MapSnapshot | None
    report: dict[str, Any]
    outputs: FitOutputs


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = (
        "Fit any model (acgp, exact, solvegp, vips, potential, ...) on a whole bag, write the\n"
        "map products, a report and theta.yaml: the fitted hyperparameters as a parameter\n"
        "file for the node."
    )
    parser.epilog = EXAMPLES
    parser.add_argument("bag", type=Path, help="rosbag2 directory (MCAP or sqlite3) or .mcap file")
    parser.add_argument(
        "--model", default="acgp", choices=model_names(), help="the model to fit (default acgp)"
    )
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--params", type=Path, help="node parameters YAML (config/gp_mapper.yaml)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a parameter or a model setting, e.g. --set acgp_rel_tol=0.005",
    )
    parser.add_argument(
        "--max-samples",
        type=int,
        default=0,
        metavar="N",
        help="fit on a random subset of N samples (seeded by --seed); 0 = all",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --max-samples (default 0)")
    parser.add_argument("--mag-topic", default=DEFAULT_MAG_TOPIC, help="magnetometer topic")
    parser.add_argument("--pose-topic", default=DEFAULT_POSE_TOPIC, help="pose topic")


def split_overrides(
    values: dict[str, object],
) -> tuple[dict[str, object], dict[str, object]]:
    """Node parameters, and model settings the node does not declare (``acgp_*``, ...).

    Raises:
        ConfigError: a name that is neither.
    """
    node = {k: v for k, v in values.items() if k in PARAMETER_BY_NAME and k != "model"}
    model = {k: v for k, v in values.items() if k not in node}
    unknown = sorted(k for k in model if k not in SETTING_BY_NAME)
    if unknown:
        raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
    return node, model


def model_spec(config: MapperConfig, model: str, settings: dict[str, object]) -> EngineSpec:
    """The node config's engine settings, for ``model``, with the model's own settings.

    Raises:
        ConfigError: a setting out of its range.
    """
    try:
        return config.engine.replace(model=model, **settings)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid model settings {settings}: {err}") from err


def subsample(samples: CollectedSamples, max_samples: int, seed: int) -> CollectedSamples:
    """A random subset of ``max_samples`` samples (seeded), in their original order."""
    n = len(samples.y)
    if max_samples <= 0 or n <= max_samples:
        return samples
    keep = np.sort(np.random.default_rng(seed).choice(n, size=max_samples, replace=False))
    return samples._replace(
        X=samples.X[keep],
        y=samples.y[keep],
        stamps_ns=samples.stamps_ns[keep],
        orientation_xyzw=samples.orientation_xyzw[keep],
    )


def available_memory_bytes() -> int:
    """The machine's physical memory (the limit a fit is checked against)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0  # unknown: no check


def check_memory(model: str, spec: EngineSpec, n: int, messages: int) -> None:
    """Refuse, before any work, a fit whose largest matrix would not fit in memory.

    Raises:
        ConfigError: saying how much would be needed and how to subsample.
    """
    limit = MEMORY_SHARE * available_memory_bytes()
    if limit <= 0:
        return
    advice = "subsample with --max-samples N (random, seeded by --seed)"
    if messages * BYTES_PER_SAMPLE > limit:
        raise ConfigError(
            f"the bag has {messages} magnetometer readings, "
            f"~{messages * BYTES_PER_SAMPLE / 1e9:.1f} GB once paired; more than "
            f"{limit / 1e9:.1f} GB of this machine's memory: {advice}"
        )
    dense_points = model_entry(model).dense_points
    if dense_points is None:
        return
    points = dense_points(spec, n)
    if model in SETTING_BY_NAME["acgp_max_points"].models:
        advice += " or cap its factor with --set acgp_max_points=K"
    if 8.0 * points * points > limit:
        need = 8.0 * points * points / 1e9
        raise ConfigError(
            f"the {model} model on {points} samples needs a {need:.1f} GB matrix, more than "
            f"{limit / 1e9:.1f} GB of this machine's memory: {advice}"
        )


def theta_yaml(hyperparameters: dict[str, Any]) -> str:
    """A ``gp_mapper`` parameter file holding θ, every value inside the node's ranges."""
    lines = [
        "# Hyperparameters fitted by gp-mapper fit; the node takes this file as",
        "#   gp_mapper_node --ros-args --params-file theta.yaml",
        "#   ros2 launch gp_mapper gp_mapper.launch.py params_file:=theta.yaml",
        f"{NODE_NAME}:",
        "  ros__parameters:",
    ]
    for name in THETA_PARAMETERS:
        if name not in hyperparameters:
            continue
        value = hyperparameters[name]
        info = PARAMETER_BY_NAME[name]
        note = ""
        if isinstance(value, list):  # ARD: the node takes one initial lengthscale
            value = float(math.exp(np.mean(np.log(value))))
            note = "  # geometric mean of the fitted ARD lengthscales"
        if isinstance(value, float):
            clipped = min(max(value, info.min), info.max)
            if clipped != value:
                note = f"  # fitted {value:.6g}, clipped to the node's range"
            value = clipped
            lines.append(f"    {name}: {value!r}{note}")
        else:
            lines.append(f'    {name}: "{value}"{note}')
    return "\n".join(lines) + "\n"


def fit_bag(
    bag: Path,
    out: Path,
    *,
    model: str = "acgp",
    params: Path | None = None,
    overrides: dict[str, object] | None = None,
    max_samples: int = 0,
    seed: int = 0,
    mag_topic: str = DEFAULT_MAG_TOPIC,
    pose_topic: str = DEFAULT_POSE_TOPIC,
    progress: bool = True,
) -> FitResult:
    """Fit ``model`` on ``bag`` and write the products into ``out``.

    Raises:
        ConfigError, BagError, MapFileError: bad parameters, bag or output (each names the
            file and the fault); ValueError from the model on data it refuses.
    """
    node_values, model_settings = split_overrides(overrides or {})
    entry = model_entry(model)
    if entry.kind == "streaming":
        # The node config runs this model: its checks (target, components) judge it.
        node_values = {**node_values, "model": model}
    elif "components" in node_values:
        # A batch model's components are its own setting, not the node's (whose model the
        # config would judge them against).
        components = node_values.pop("components")
        check_components_model(str(components), model)
        model_settings = {**model_settings, "components": components}
    if entry.target == VECTOR_TARGET:
        # A model of the field vector maps target: vector; the config says so (unless the
        # command line says otherwise, which the config then refuses with the reason).
        node_values = {"target": VECTOR_TARGET, **node_values, "model": model}
    config = config_from_params_file(params, **node_values)
    spec = model_spec(config, model, model_settings)
    set_cpu_threads(config.torch_threads)
    if entry.kind == "streaming":
        return _fit_streaming(bag, out, config, spec, mag_topic, pose_topic, progress)
    info = bag_info(bag)
    messages = int(info.topics.get(mag_topic, ("", 0))[1])
    start = time.perf_counter()
    records = read_bag(bag, mag_topic=mag_topic, pose_topic=pose_topic, pose_type="auto")
    samples = collect_samples(records, config)
    total = len(samples.y)
    gp = build_model(spec, config.input_dims)
    # Heading, run and time columns for a model with nuisance components (gam), taken on the
    # whole log before subsampling, so run gaps are the log's, not the subset's.
    auxiliary = gp.auxiliary_inputs
    samples = with_auxiliary_inputs(samples, auxiliary, spec.gam_run_gap)
    samples = subsample(samples, max_samples, seed)
    n = len(samples.y)
    read_s = time.perf_counter() - start
    _LOG.info("read %d samples from %s in %.1f s (%d used)", total, bag, read_s, n)
    if n == 0:
        raise ConfigError(f"{bag}: no magnetometer reading could be paired with a pose")
    check_memory(model, spec, n, messages)
    bar = Progress(f"fit {model}") if progress else None
    fit_report = gp.fit(samples.X, samples.y, progress=None if bar is None else bar.update)
    if bar is not None:
        bar.done(f"accepted={fit_report.accepted} M={fit_report.m_after}")
    out.mkdir(parents=True, exist_ok=True)
    outputs = FitOutputs.in_dir(out)
    if not fit_report.accepted:
        report = _report(model, bag, total, n, read_s, fit_report.as_dict(), gp, samples)
        outputs.report.write_text(json.dumps(report, indent=2, default=str))
        return FitResult(None, report, outputs)
    box = extend_box(None, samples.X[:, :2])
    snapshot = _snapshot(gp, config, box, samples, model)
    stamp_ns = int(samples.stamps_ns.max())

    def map_data(state: dict[str, np.ndarray], name: str) -> MapData:
        node_config = {**config.to_dict(), "model": name}
        return MapData(state, node_config, samples.trajectory_m, box, n, stamp_ns, samples.drops)

    continuation = _save_states(model, gp, spec, outputs, map_data)
    report = _report(model, bag, total, n, read_s, fit_report.as_dict(), gp, samples)
    if continuation is not None:
        report["streaming_continuation"] = continuation
    _write_products(outputs, snapshot, config, report, gp.hyperparameters())
    return FitResult(snapshot, report, outputs)


def _save_states(
    model: str,
    gp: Any,
    spec: EngineSpec,
    outputs: FitOutputs,
    map_data: Callable[[dict, str], MapData],
) -> str | None:
    """Write the map file(s); for a model the stream can continue, say whether it could.

    Where the streaming model can carry the posterior on (solvegp), map_state.npz is the
    streaming model's state (what ~/load_map and replay --resume take), with the spec's
    streaming settings (the node's, so the continued map runs as a fresh one would), and the
    fit keeps its own file. If that conversion fails numerically, map_state.npz holds the fit
    itself (it is still a map; it just cannot be streamed on) and the report says why.
    """
    to_streaming = model_entry(model).to_streaming
    if to_streaming is None:
        save_map(outputs.state, map_data(gp.state_dict(), model))
        return None
    save_map(outputs.state.with_name(FITTED_STATE), map_data(gp.state_dict(), model))
    try:
        streaming = to_streaming(gp, spec)
    except (NumericalError, ValueError) as err:
        _LOG.warning("the fit cannot be continued by the stream (%s); map_state.npz holds it", err)
        save_map(outputs.state, map_data(gp.state_dict(), model))
        return f"failed: {err}"
    continued = saved_model_name(streaming)
    save_map(outputs.state, map_data(streaming, continued))
    return continued


def _fit_streaming(
    bag: Path,
    out: Path,
    config: MapperConfig,
    spec: EngineSpec,
    mag_topic: str,
    pose_topic: str,
    progress: bool,
) -> FitResult:
    """A streaming model is fitted by streaming the bag through the pipeline (``replay``)."""
    config = MapperConfig(**{**_mapping_fields(config), "engine": spec})
    start = time.perf_counter()
    result = replay_bag(
        bag, out, overrides=config.to_dict(), mag_topic=mag_topic, pose_topic=pose_topic,
        progress=progress,
    )  # fmt: skip
    outputs = FitOutputs.in_dir(out)
    if result.snapshot is None:
        report = {
            "model": spec.model,
            "bag": str(bag),
            "accepted": False,
            "reason": "not one window was mapped",
            "diagnostics": result.diagnostics,
        }
        outputs.report.write_text(json.dumps(report, indent=2, default=str))
        return FitResult(None, report, outputs)
    gp, _ = load_model_map(result.outputs.state, config)
    d = result.diagnostics
    report = {
        "model": spec.model,
        "bag": str(bag),
        "accepted": True,
        "samples_used": int(d["samples"]),
        "M": int(d["inducing_points"]),
        "M_over_N": int(d["inducing_points"]) / max(int(d["samples"]), 1),
        "updates": int(d["updates"]),
        "seconds": time.perf_counter() - start,
        "hyperparameters": gp.hyperparameters(),
        "last_update": gp.report.as_dict() if gp.report is not None else result.snapshot.report,
        "drops": {k.removeprefix("drop_"): v for k, v in d.items() if k.startswith("drop_")},
    }
    nuisance = gp.nuisance_summary()
    if nuisance:  # an additive model: its heading curve, drift and run offset
        report["nuisance"] = nuisance
    outputs.report.write_text(json.dumps(report, indent=2, default=str))
    outputs.theta.write_text(theta_yaml(gp.hyperparameters()))
    return FitResult(result.snapshot, report, outputs)


def _mapping_fields(config: MapperConfig) -> dict[str, Any]:
    return {k: v for k, v in config.__dict__.items() if k != "engine"}


def _snapshot(
    gp: Any, config: MapperConfig, box: tuple[float, float, float, float],
    samples: CollectedSamples, model: str,
) -> MapSnapshot:  # fmt: skip
    grid = map_grid(config, box)
    assert grid is not None  # a box is given
    products = predict_products(gp.posterior, grid, config)
    return MapSnapshot(
        seq=1,
        stamp_ns=int(samples.stamps_ns.max()),
        grid=products.grid,
        mean=products.mean,
        variance=products.variance,
        prior_variance=products.prior_variance,
        support_m=products.support_m,
        layers=products.layers,
        field_mean=products.field_mean,
        field_variance=products.field_variance,
        trajectory_m=samples.trajectory_m,
        report=gp.report.as_dict(),
        num_samples=len(samples.y),
        model=model,
    )


def _report(
    model: str, bag: Path, total: int, n: int, read_s: float, fit: dict[str, Any], gp: Any,
    samples: CollectedSamples,
) -> dict[str, Any]:  # fmt: skip
    m = int(fit.get("m_after", 0) or 0)
    return {
        "model": model,
        "bag": str(bag),
        "accepted": bool(fit.get("accepted")),
        "reason": fit.get("reason"),
        "samples_total": total,
        "samples_used": n,
        "M": m,
        "M_over_N": m / max(n, 1),
        "seconds_read": read_s,
        "seconds_fit": fit.get("seconds_total"),
        "log_evidence": fit.get("log_evidence"),
        "lower": fit.get("lower"),
        "upper": fit.get("upper"),
        "hyperparameters": gp.hyperparameters(),
        "fit": fit,
        "drops": samples.drops,
    }


def _write_products(
    outputs: FitOutputs, snapshot: MapSnapshot, config: MapperConfig, report: dict[str, Any],
    hyperparameters: dict[str, Any],
) -> None:  # fmt: skip
    write_png(outputs.png, snapshot, unknown_ratio=config.unknown_variance_ratio)
    write_nav2_map(outputs.nav2_yaml, snapshot)
    write_grids_npz(outputs.grids, snapshot)
    outputs.report.write_text(json.dumps(report, indent=2, default=str))
    outputs.theta.write_text(theta_yaml(hyperparameters))


def summary(result: FitResult) -> str:
    r = result.report
    if result.snapshot is None:
        return f"fit {r['model']}: rejected ({r.get('reason')}); see {result.outputs.report}"
    lines = [
        f"model {r['model']}: {r['samples_used']} samples used, M = {r['M']} "
        f"(M/N = {r['M_over_N']:.3f})",
    ]
    if r.get("log_evidence") is not None:
        bounds = ""
        if r.get("lower") is not None and r.get("upper") is not None:
            bounds = f" in [{r['lower']:.1f}, {r['upper']:.1f}]"
        lines.append(f"log-evidence estimate {r['log_evidence']:.1f}{bounds}")
    lines.append(f"hyperparameters: {r['hyperparameters']}")
    lines += [f"wrote {p}" for p in result.outputs]
    return "\n".join(lines)


def run_fit(args: argparse.Namespace) -> int:
    try:
        result = fit_bag(
            args.bag,
            args.out,
            model=args.model,
            params=args.params,
            overrides=parse_overrides(args.set),
            max_samples=args.max_samples,
            seed=args.seed,
            mag_topic=args.mag_topic,
            pose_topic=args.pose_topic,
        )
    except (ConfigError, MapFileError, IoLayerError, ValueError) as err:
        print(f"gp-mapper fit: error: {err}", file=sys.stderr)
        return 2
    print(summary(result))
    return 0 if result.snapshot is not None else 1
