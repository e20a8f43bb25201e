"""One fit pipeline for every model: a ``FitJob`` in, a ``FitResult`` out (the map, its typed
``FitSummary`` and the files written), whatever the route.

Three routes, chosen from the job and the model's kind: a batch model fitted on a whole bag
(:mod:`gp_mapper.mapping.batch_fit`); a streaming model streamed through the mapping pipeline
as ``replay`` streams it, the map the node would make, its θ handed back by the pipeline; a
tiled map whose tiles are fitted as independent tasks (:mod:`gp_mapper.mapping.tiled_fit`),
with either kind of model. Each ends in the same summary and the same files: ``map.png``,
``map.yaml`` (Nav2), ``grids.npz``, ``map_state.npz``, ``fit_report.json`` and ``theta.yaml``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from gp_mapper.engine import EngineSpec, build_model, set_cpu_threads
from gp_mapper.engine.registry import model_kind
from gp_mapper.io import bag_info, write_grids_npz, write_nav2_map, write_png
from gp_mapper.io.bag_writer import DEFAULT_MAG_TOPIC, DEFAULT_POSE_TOPIC
from gp_mapper.mapping import MapperConfig, MapSnapshot
from gp_mapper.mapping.batch_fit import (
    DEFAULT_MAX_MINUTES,
    fit_config,
    fit_records,
    map_file_data,
    map_snapshot,
    save_fit,
)
from gp_mapper.mapping.errors import ConfigError
from gp_mapper.mapping.inputs import collect_samples, concat_samples
from gp_mapper.mapping.map_file import save_map
from gp_mapper.mapping.params_file import theta_yaml
from gp_mapper.mapping.tiled_fit import RayRuntime, fit_tiled

from .bag_input import bag_records
from .progress import Progress
from .replay import replay_bag

# Tile fits in parallel on a local Ray runtime: the two cores of a small machine.
DEFAULT_WORKERS = 2
ROUTES = ("batch", "streaming", "tiled")


@dataclass(frozen=True)
class FitJob:
    """A fit of one model on one or several bags, written into ``out``.

    Attributes:
        bags: rosbag2 directories or .mcap files; several make a tiled map.
        out: the output directory.
        model: the registered model's name.
        params: a node parameters YAML, under ``overrides``.
        overrides: node parameters and model settings by name (``--set``).
        max_samples: a batch fit on a random subset of this many samples; 0 = all.
        seed: the subset's seed.
        mag_topic, pose_topic: the bag's topics.
        progress: a progress bar on the terminal.
        workers: a tiled fit's workers on a local Ray runtime (0: one after another here);
            None: ``DEFAULT_WORKERS`` for several bags, one bag streams or fits whole.
        ray_address: the tiles on this Ray cluster instead.
        max_minutes: refuse a batch fit estimated to take longer (0: no limit).
    """

    bags: tuple[Path, ...]
    out: Path
    model: str = "acgp"
    params: Path | None = None
    overrides: Mapping[str, object] = field(default_factory=dict)
    max_samples: int = 0
    seed: int = 0
    mag_topic: str = DEFAULT_MAG_TOPIC
    pose_topic: str = DEFAULT_POSE_TOPIC
    progress: bool = True
    workers: int | None = None
    ray_address: str | None = None
    max_minutes: float = DEFAULT_MAX_MINUTES

    def __post_init__(self) -> None:
        bags = (self.bags,) if isinstance(self.bags, str | Path) else self.bags
        object.__setattr__(self, "bags", tuple(Path(b) for b in bags))
        object.__setattr__(self, "out", Path(self.out))
        if not self.bags:
            raise ConfigError("a fit needs a bag")

    def route(self, config: MapperConfig) -> str:
        """ "tiled", "streaming" or "batch" under the job's mapping parameters.

        Raises:
            ConfigError: several bags that make no tiled map.
        """
        as_tasks = len(self.bags) > 1 or self.workers is not None or self.ray_address is not None
        if as_tasks and config.tile_layout() is not None:
            return "tiled"
        if len(self.bags) > 1:
            raise ConfigError(
                f"{len(self.bags)} bags: several bags make one tiled map (tile_size > 0); "
                "replay them one after another with --resume otherwise"
            )
        return "streaming" if model_kind(self.model) == "streaming" else "batch"


@dataclass(frozen=True)
class FitSummary:
    """What a fit did, the same for every route (``fit_report.json`` is ``report()``).

    Attributes:
        model: the model's name.
        route: "batch", "streaming" or "tiled".
        bags: the bags fitted.
        accepted: whether the fit made a map.
        reason: why the fit stopped or was refused (None: nothing to say).
        samples_used: the samples the map holds.
        support: the map's support: inducing points, kept points or data points (M).
        hyperparameters: the fitted θ (the node's parameter names).
        drops: readings dropped on the way in, by cause.
        details: the route's own figures (the log-evidence and its bounds, the tiles, the
            updates, the nuisance, the timings) as ``fit_report.json`` holds them.
    """

    model: str
    route: str
    bags: tuple[str, ...]
    accepted: bool
    reason: str | None = None
    samples_used: int = 0
    support: int = 0
    hyperparameters: Mapping[str, Any] = field(default_factory=dict)
    drops: Mapping[str, int] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        """The summary as ``fit_report.json``: one bag by its path, several as a list."""
        bag: str | list[str] = self.bags[0] if self.route != "tiled" else list(self.bags)
        out: dict[str, Any] = {
            "model": self.model,
            "route": self.route,
            "bag": bag,
            "accepted": self.accepted,
            "reason": self.reason,
        }
        fitted = self.accepted or self.samples_used > 0  # a refused batch fit read its data
        if fitted:
            out |= {
                "samples_used": self.samples_used,
                "M": self.support,
                "M_over_N": self.support / max(self.samples_used, 1),
            }
        out |= dict(self.details)
        if fitted:
            out |= {"hyperparameters": dict(self.hyperparameters), "drops": dict(self.drops)}
        return out

    def lines(self) -> list[str]:
        """What the command prints of it."""
        if not self.accepted:
            return [f"fit {self.model}: rejected ({self.reason})"]
        out = [
            f"model {self.model}: {self.samples_used} samples used, M = {self.support} "
            f"(M/N = {self.support / max(self.samples_used, 1):.3f})",
        ]
        if self.reason:  # how the fit stopped (ACGP: whether its rule fired, and the gap)
            out.append(f"fit: {self.reason}")
        evidence = self.details.get("log_evidence")
        if evidence is not None:
            lower, upper = self.details.get("lower"), self.details.get("upper")
            bounds = "" if lower is None or upper is None else f" in [{lower:.1f}, {upper:.1f}]"
            out.append(f"log-evidence estimate {evidence:.1f}{bounds}")
        out.append(f"hyperparameters: {dict(self.hyperparameters)}")
        return out


class FitOutputs(NamedTuple):
    """The files a fit writes into its output directory."""

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
    """A fit's map (None when refused), its summary and its files."""

    snapshot: MapSnapshot | None
    summary: FitSummary
    outputs: FitOutputs

    @property
    def report(self) -> dict[str, Any]:
        """The summary as ``fit_report.json`` holds it."""
        return self.summary.report()

    def text(self) -> str:
        """What ``gp-mapper fit`` prints."""
        if self.snapshot is None:
            return f"{self.summary.lines()[0]}; see {self.outputs.report}"
        return "\n".join(self.summary.lines() + [f"wrote {p}" for p in self.outputs])


def run_fit_job(job: FitJob) -> FitResult:
    """Fit ``job.model`` on ``job.bags`` by the job's route and write the products.

    Raises:
        ConfigError, BagError, MapFileError: bad parameters, bag or output (each names the
            file and the fault); TileFitError: tiles that failed twice; ValueError from the
            model on data it refuses.
    """
    config, spec = fit_config(job.model, dict(job.overrides), job.params)
    set_cpu_threads(config.torch_threads)
    route = job.route(config)
    fit = {"tiled": _fit_tiled, "streaming": _fit_streaming, "batch": _fit_batch}[route]
    snapshot, summary, hyperparameters = fit(job, config, spec)
    outputs = FitOutputs.in_dir(job.out)
    job.out.mkdir(parents=True, exist_ok=True)
    if snapshot is not None and route != "streaming":  # a replay wrote its own map products
        write_png(outputs.png, snapshot, unknown_ratio=config.unknown_variance_ratio)
        write_nav2_map(outputs.nav2_yaml, snapshot)
        write_grids_npz(outputs.grids, snapshot)
    outputs.report.write_text(json.dumps(summary.report(), indent=2, default=str))
    if snapshot is not None:
        outputs.theta.write_text(theta_yaml(hyperparameters))
    return FitResult(snapshot, summary, outputs)


_Fitted = tuple[MapSnapshot | None, FitSummary, dict[str, Any]]


def _fit_batch(job: FitJob, config: MapperConfig, spec: EngineSpec) -> _Fitted:
    """A batch model fitted on the whole bag."""
    bag = job.bags[0]
    messages = int(bag_info(bag).topics.get(job.mag_topic, ("", 0))[1])
    config, records = bag_records(bag, config, job.mag_topic, job.pose_topic)
    # A model reports between its steps (an epoch, an evaluation): the heartbeat shows a long one.
    bar = Progress(f"fit {job.model}", heartbeat=True) if job.progress else None
    if bar is not None:  # a first line at once: reading the bag takes seconds
        bar.start(f"reading {messages} readings of {bag.name}")
    with bar if bar is not None else contextlib.nullcontext():
        result = fit_records(
            records, config, spec, max_samples=job.max_samples, seed=job.seed,
            messages=messages, source=str(bag), progress=None if bar is None else bar.update,
            max_minutes=job.max_minutes,
        )  # fmt: skip
    if bar is not None:
        bar.done(f"accepted={result.fit.accepted} M={result.fit.m_after}")
    report = dict(result.report)
    common = ("model", "bag", "accepted", "reason", "samples_used", "M", "M_over_N",
              "hyperparameters", "drops")  # fmt: skip
    details = {k: v for k, v in report.items() if k not in common}
    if result.snapshot is not None:
        job.out.mkdir(parents=True, exist_ok=True)
        continuation = save_fit(result, FitOutputs.in_dir(job.out).state)
        if continuation is not None:
            details["streaming_continuation"] = continuation
    theta = result.model.hyperparameters()
    summary = FitSummary(
        job.model, "batch", (str(bag),), bool(report["accepted"]), report["reason"],
        int(report["samples_used"]), int(report["M"]), theta, report["drops"], details,
    )  # fmt: skip
    return result.snapshot, summary, theta


def _fit_tiled(job: FitJob, config: MapperConfig, spec: EngineSpec) -> _Fitted:
    """A tiled map of the model on every sample of the bags, the tile fits as tasks."""
    start = time.perf_counter()
    auxiliary = build_model(spec, config.input_dims).auxiliary_inputs
    workers = DEFAULT_WORKERS if job.workers is None else job.workers
    workers = workers if job.ray_address is None else max(workers, 1)
    # Ray's runtime starts first: its workers import the engine while the bags are read. The
    # heartbeat shows a long read or a long tile.
    bar = Progress(f"fit {spec.model} tiles", heartbeat=True) if job.progress else None
    if bar is not None:
        bar.start(f"reading {len(job.bags)} bag(s)")
    with (
        RayRuntime(workers, job.ray_address) if workers > 0 else contextlib.nullcontext(),
        bar if bar is not None else contextlib.nullcontext(),
    ):
        parts = []
        for bag in job.bags:
            bag_config, records = bag_records(bag, config, job.mag_topic, job.pose_topic)
            parts.append(collect_samples(records, bag_config))
        samples = concat_samples(parts).with_auxiliary_inputs(auxiliary, spec.get("gam.run_gap"))
        if len(samples.y) == 0:
            names = ", ".join(map(str, job.bags))
            raise ConfigError(f"{names}: no reading could be paired with a pose")
        read_s = time.perf_counter() - start
        fitted = fit_tiled(
            samples, config, spec=spec, workers=workers, ray_address=job.ray_address,
            progress=None if bar is None else bar.update, max_minutes=job.max_minutes,
        )  # fmt: skip
    if bar is not None:
        bar.done(f"{fitted.report['tiles']} tiles")
    job.out.mkdir(parents=True, exist_ok=True)
    name = spec.model
    snapshot = map_snapshot(fitted.model, config, samples, name)
    state = fitted.model.state_dict()
    save_map(FitOutputs.in_dir(job.out).state, map_file_data(state, name, config, samples))
    theta = fitted.model.hyperparameters()
    summary = FitSummary(
        name, "tiled", tuple(str(b) for b in job.bags), True, None, len(samples.y),
        snapshot.num_support, theta, samples.drops, {"seconds_read": read_s, **fitted.report},
    )  # fmt: skip
    return snapshot, summary, theta


def _fit_streaming(job: FitJob, config: MapperConfig, spec: EngineSpec) -> _Fitted:
    """A streaming model streams the bag through the pipeline, as ``replay`` does."""
    config = dataclasses.replace(config, engine=spec)
    start = time.perf_counter()
    bag = job.bags[0]
    result = replay_bag(
        bag, job.out, overrides=config.to_dict(), mag_topic=job.mag_topic,
        pose_topic=job.pose_topic, progress=job.progress,
    )  # fmt: skip
    d = result.diagnostics
    if result.snapshot is None:
        summary = FitSummary(spec.model, "streaming", (str(bag),), False,
                             "not one window was mapped", details={"diagnostics": d})  # fmt: skip
        return None, summary, {}
    details: dict[str, Any] = {
        "updates": int(d["updates"]),
        "seconds": time.perf_counter() - start,
        "last_update": result.snapshot.report,
    }
    if result.nuisance:  # an additive model: its heading curve, drift and run offset
        details["nuisance"] = result.nuisance
    drops = {k.removeprefix("drop_"): v for k, v in d.items() if k.startswith("drop_")}
    summary = FitSummary(
        spec.model, "streaming", (str(bag),), True, None, int(d["samples"]),
        int(d["inducing_points"]), result.hyperparameters, drops, details,
    )  # fmt: skip
    return result.snapshot, summary, dict(result.hyperparameters)


def fit_bag(bag: Path | Sequence[Path], out: Path, **settings: Any) -> FitResult:
    """``run_fit_job`` of a ``FitJob`` of ``bag`` (one, or several for a tiled map) written
    into ``out``; ``settings`` are the job's other fields."""
    bags = (Path(bag),) if isinstance(bag, str | Path) else tuple(Path(b) for b in bag)
    return run_fit_job(FitJob(bags, Path(out), **settings))
