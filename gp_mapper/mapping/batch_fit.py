"""The batch pipeline: one model fitted on every sample of a recording.

What ``gp-mapper fit`` runs for a batch model (exact, acgp, cagp, solvegp, gam), ROS-free and
bag-free: the recording's poses and readings in stamp order (``gp_mapper.io.read_bag``) are
paired and thinned exactly as the node would (:func:`~.inputs.collect_samples`), given the
model's auxiliary columns on the whole log, subsampled, checked against the machine's memory,
fitted, predicted on the grid, and saved as a map file. Where the streaming model can carry
the fit on (solvegp), the map file is the streaming model's, so the node's ``~/load_map`` and
``replay --resume`` continue the fitted map live, and the fit keeps its own file beside it.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from gp_mapper.engine import (
    EngineSpec,
    NumericalError,
    build_model,
    model_entry,
    resolve_device,
    saved_model_name,
)
from gp_mapper.engine import cost as engine_cost
from gp_mapper.engine.model import Model, Report
from gp_mapper.engine.settings import setting_by_name
from gp_mapper.mapping.config import (
    PARAMETER_BY_NAME,
    MapperConfig,
    check_components_model,
    parameter_names,
)
from gp_mapper.mapping.errors import ConfigError
from gp_mapper.mapping.grid import extend_box
from gp_mapper.mapping.inputs import CollectedSamples, collect_samples
from gp_mapper.mapping.map_file import MapData, save_map
from gp_mapper.mapping.map_products import map_grid, predict_products
from gp_mapper.mapping.params_file import config_from_params_file
from gp_mapper.mapping.pass_noise import measured_pass_noise
from gp_mapper.mapping.records import FieldReading, Pose
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.mapping.windowing import VECTOR_TARGET

_LOG = logging.getLogger(__name__)

# Bytes per collected sample: inputs, target, stamp and orientation in float64/int64, with
# the lists' overhead (measured ~2x the arrays).
BYTES_PER_SAMPLE = 2 * 8 * (3 + 1 + 1 + 4)
# A fit may use at most this share of the machine's memory for its largest matrix (the exact
# GP's K, ACGP's preallocated factor): the rest is for the process, the grid and the OS.
MEMORY_SHARE = 0.5
# A fit estimated to take longer than this is refused before it starts, with advice; the
# command line's --max-minutes sets another budget (0: none). Half an hour: a fit a user
# waits for at the desk, not one left overnight by mistake.
DEFAULT_MAX_MINUTES = 30.0
# The fitted model's own state, beside the map file, when the map file holds the streaming
# model that continues it.
FITTED_STATE = "fitted_state.npz"


class BatchFit(NamedTuple):
    """A batch model fitted on a recording.

    Attributes:
        model: the fitted model.
        samples: the samples it was fitted on (with its auxiliary columns, subsampled).
        fit: the fit's report.
        snapshot: the map predicted on the grid; None when the fit was not accepted.
        report: the summary ``fit_report.json`` holds.
        config: the mapping parameters (grid, target, inputs).
        spec: the model's settings.
    """

    model: Model
    samples: CollectedSamples
    fit: Report
    snapshot: MapSnapshot | None
    report: dict[str, Any]
    config: MapperConfig
    spec: EngineSpec


# Where `fit`'s default of a batch model's setting differs from the engine's (the paper's).
# acgp.max_points: on dense magnetometer logs ACGP's rule does not fire (benchmarks/acgp_rule.py:
# its bounds' gap on Aalto runs 1-2 is still 0.02-1.5 at 6000 of 17 980 readings, against
# r = 0.01), so without a cap a fit factors every reading (46 h estimated there). Chosen on the
# validation run 4 (fit_models.py --holdout 4): 4000 points gained 4 % RMSE over 2000 (4.92
# against 5.13 µT) and lost NLPD (3.00 against 2.89) at 11× the time (1041 s against 92 s,
# past the quarter hour a fit should take here). The engine's default stays 0 (all points).
FIT_MODEL_DEFAULTS: dict[str, object] = {"acgp.max_points": 2000}


def split_overrides(values: dict[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """Node parameters, and model settings the node does not declare (``acgp.*``, ...); a
    flat name of an earlier release (``acgp_rel_tol``) is read as its new one with a warning.

    Raises:
        ConfigError: a name that is neither.
    """
    values = parameter_names(values)
    node = {k: v for k, v in values.items() if k in PARAMETER_BY_NAME and k != "model"}
    model = {k: v for k, v in values.items() if k not in node}
    unknown = sorted(k for k in model if k not in setting_by_name())
    if unknown:
        raise ConfigError(f"unknown parameter(s): {', '.join(unknown)}")
    return node, model


def model_spec(config: MapperConfig, model: str, settings: dict[str, object]) -> EngineSpec:
    """The node config's engine settings, for ``model``, with the model's own settings.

    Raises:
        ConfigError: a setting out of its range.
    """
    try:
        return config.engine.replace(settings, model=model)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid model settings {settings}: {err}") from err


def fit_config(
    model: str, overrides: dict[str, object], params: Path | None = None
) -> tuple[MapperConfig, EngineSpec]:
    """The mapping parameters and the model's settings of a fit of ``model``.

    ``overrides`` mixes node parameters and model settings (``--set``); a parameters file
    (``params``) goes under them, and ``FIT_MODEL_DEFAULTS`` under both. A streaming model is
    judged by the node's checks (it is the node's model); a batch model's ``gam.components`` are
    its own setting; a model of the field vector maps ``target: vector``.

    Raises:
        ConfigError: an unknown name, a value out of range, or settings that do not go
            together (each says which).
    """
    node_values, model_settings = split_overrides(overrides)
    own = {k: v for k, v in FIT_MODEL_DEFAULTS.items() if model in setting_by_name()[k].models}
    model_settings = {**own, **model_settings}
    entry = model_entry(model)
    if entry.kind == "streaming":
        node_values = {**node_values, "model": model}
    elif "gam.components" in node_values:
        # Not the node's parameter here, which the config would judge against its own model.
        components = node_values.pop("gam.components")
        check_components_model(str(components), model)
        model_settings = {**model_settings, "gam.components": components}
    if entry.target == VECTOR_TARGET:
        # The config says target: vector unless the command line says otherwise, which the
        # config then refuses with the reason.
        node_values = {"target": VECTOR_TARGET, **node_values, "model": model}
    config = config_from_params_file(params, **node_values)
    return config, model_spec(config, model, model_settings)


def available_memory_bytes() -> int:
    """The machine's physical memory (the limit a fit is checked against); 0 if unknown."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def check_memory(spec: EngineSpec, n: int, messages: int) -> None:
    """Refuse, before any work, a fit whose largest matrix would not fit in memory.

    Args:
        spec: the model's settings.
        n: the samples the model will be fitted on.
        messages: the recording's magnetometer readings (0 if unknown).

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
    dense_points = model_entry(spec.model).dense_points
    if dense_points is None:
        return
    points = dense_points(spec, n)
    if spec.model in setting_by_name()["acgp.max_points"].models:
        advice += " or cap its factor with --set acgp.max_points=K"
    if 8.0 * points * points > limit:
        need = 8.0 * points * points / 1e9
        raise ConfigError(
            f"the {spec.model} model on {points} samples needs a {need:.1f} GB matrix, more "
            f"than {limit / 1e9:.1f} GB of this machine's memory: {advice}"
        )


class FitEstimate(NamedTuple):
    """A batch fit's estimated time on this machine, before it starts."""

    seconds: float
    text: str  # "up to 120 L-BFGS evaluations of 2.1 Tflop, ~12 min at 31 Gflop/s"
    rate: float  # this machine's measured rate [flop/s]


def fit_estimate(spec: EngineSpec, n: int) -> FitEstimate | None:
    """The time a fit of ``n`` samples takes here, from the model's cost (``engine.cost``) and
    this machine's measured rate; None for a model without a cost or a fit on a GPU."""
    cost_of = model_entry(spec.model).fit_cost
    if cost_of is None or resolve_device(spec.device).type != "cpu":
        return None
    rate = engine_cost.measured_flop_rate()  # looked up at the call: a test sets one rate
    cost = cost_of(spec, n)
    return FitEstimate(cost.seconds(rate), cost.describe(rate), rate)


def check_time(spec: EngineSpec, n: int, max_minutes: float) -> FitEstimate | None:
    """The fit's estimate, refused past ``max_minutes`` (0: no budget) with advice.

    Raises:
        ConfigError: saying how long the fit would take and how to make it shorter.
    """
    estimate = fit_estimate(spec, n)
    if estimate is None or max_minutes <= 0 or estimate.seconds <= 60.0 * max_minutes:
        return estimate
    cost_of = model_entry(spec.model).fit_cost
    assert cost_of is not None
    budget = 60.0 * max_minutes
    fits = _largest_within(lambda k: cost_of(spec, k).seconds(estimate.rate) <= budget, n)
    raise ConfigError(
        f"the {spec.model} fit on {n} samples would take {estimate.text}: more than "
        f"--max-minutes {max_minutes:g}. Subsample (--max-samples {fits} fits the budget), "
        "stream the bag with a streaming model (--model vips), fit tiles (several bags or "
        "--workers N: each tile its own readings), or allow it with --max-minutes"
    )


def _largest_within(fits: Callable[[int], bool], n: int) -> int:
    """The largest k ≤ n with ``fits(k)`` (monotone), by bisection; 0 if none."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def fit_records(
    records: Iterable[Pose | FieldReading],
    config: MapperConfig,
    spec: EngineSpec,
    *,
    max_samples: int = 0,
    seed: int = 0,
    messages: int = 0,
    source: str = "",
    progress: Callable[[float, str], None] | None = None,
    max_minutes: float = DEFAULT_MAX_MINUTES,
) -> BatchFit:
    """Fit the batch model of ``spec`` on a whole recording and predict its map.

    Args:
        records: poses and readings in stamp order.
        config: the mapping parameters.
        spec: the model's settings (a batch model).
        max_samples: fit on a random subset of this many samples (seeded by ``seed``); 0: all.
        seed: the subset's seed.
        messages: the recording's magnetometer readings, for the memory check (0: unknown).
        source: the recording's name, for messages and the report.
        progress: called with the fit's fraction done and a detail.
        max_minutes: refuse a fit estimated to take longer (0: no budget).

    Raises:
        ConfigError: no sample could be paired, the fit would not fit in memory, or its
            estimate is past ``max_minutes``; ValueError from the model on data it refuses.
    """
    start = time.perf_counter()
    samples = collect_samples(records, config)
    total = len(samples.y)
    gp = build_model(spec, config.input_dims)
    # Auxiliary columns on the whole log before subsampling: run gaps are the log's.
    samples = samples.with_auxiliary_inputs(gp.auxiliary_inputs, spec.get("gam.run_gap"))
    samples = samples.subsample(max_samples, seed)
    n = len(samples.y)
    read_s = time.perf_counter() - start
    _LOG.info("read %d samples from %s in %.1f s (%d used)", total, source, read_s, n)
    if n == 0:
        raise ConfigError(f"{source}: no magnetometer reading could be paired with a pose")
    check_memory(spec, n, messages)
    estimate = check_time(spec, n, max_minutes)
    if estimate is not None:
        _LOG.info("%s fit on %d samples: %s", spec.model, n, estimate.text)
    # What the readings show of the between-pass noise; a batch model fits all of a reading's
    # error as one noise, so it is reported, not added.
    pass_noise = measured_pass_noise(samples, config, spec, gp)
    fit = gp.fit(samples.X, samples.y, progress=progress)
    summary = fit.as_dict()  # log_evidence and bounds are in some models' reports only
    report = {
        "model": spec.model,
        "bag": source,
        "accepted": bool(fit.accepted),
        "reason": fit.reason,
        "samples_total": total,
        "samples_used": n,
        "M": int(fit.m_after or 0),
        "M_over_N": int(fit.m_after or 0) / max(n, 1),
        "seconds_read": read_s,
        "seconds_fit": fit.seconds_total,
        "seconds_estimated": None if estimate is None else estimate.seconds,
        "log_evidence": summary.get("log_evidence"),
        "lower": summary.get("lower"),
        "upper": summary.get("upper"),
        "hyperparameters": gp.hyperparameters(),
        "fit": summary,
        "drops": samples.drops,
        **({} if pass_noise is None else {"pass_noise": pass_noise.as_dict()}),
    }
    snapshot = map_snapshot(gp, config, samples, spec.model) if fit.accepted else None
    return BatchFit(gp, samples, fit, snapshot, report, config, spec)


def save_fit(result: BatchFit, path: Path) -> str | None:
    """Write the map file of an accepted fit; for a model the stream can continue, say whether
    it could.

    Where the streaming model can carry the posterior on (solvegp), ``path`` holds the
    streaming model's state (what ``~/load_map`` and ``replay --resume`` take), with the
    spec's streaming settings (the node's, so the continued map runs as a fresh one would),
    and :data:`FITTED_STATE` beside it the fit's own. If that conversion fails numerically,
    ``path`` holds the fit itself (still a map, just not one the stream can go on with).

    Returns:
        The streaming model that continues the map, ``"failed: <why>"``, or None for a model
        the stream does not continue.

    Raises:
        MapFileError: the file cannot be written.
    """
    gp, samples, config = result.model, result.samples, result.config

    def map_data(state: dict, name: str) -> MapData:
        return map_file_data(state, name, config, samples)

    model = result.spec.model
    to_streaming = model_entry(model).to_streaming
    if to_streaming is None:
        save_map(path, map_data(gp.state_dict(), model))
        return None
    save_map(path.with_name(FITTED_STATE), map_data(gp.state_dict(), model))
    try:
        streaming = to_streaming(gp, result.spec)
    except (NumericalError, ValueError) as err:
        _LOG.warning("the fit cannot be continued by the stream (%s); %s holds it", err, path)
        save_map(path, map_data(gp.state_dict(), model))
        return f"failed: {err}"
    continued = saved_model_name(streaming)
    save_map(path, map_data(streaming, continued))
    return continued


def map_file_data(
    state: dict[str, Any], name: str, config: MapperConfig, samples: CollectedSamples
) -> MapData:
    """A map file's contents for a model fitted on ``samples`` (saved as model ``name``)."""
    box = extend_box(None, samples.X[:, :2])
    node_config = {**config.to_dict(), "model": name}
    stamp_ns = int(samples.stamps_ns.max())
    n = len(samples.y)
    return MapData.of(state, node_config, samples.trajectory_m, box, n, stamp_ns, samples.drops)


def map_snapshot(
    gp: Model, config: MapperConfig, samples: CollectedSamples, model: str
) -> MapSnapshot:
    """The map of a model fitted on ``samples``, predicted on the grid over them."""
    grid = map_grid(config, extend_box(None, samples.X[:, :2]))
    assert grid is not None  # a box is given
    products = predict_products(gp.posterior, grid, config)
    return MapSnapshot.from_products(
        products,
        seq=1,
        stamp_ns=int(samples.stamps_ns.max()),
        trajectory_m=samples.trajectory_m,
        model=model,
        report=gp.report.as_dict() if gp.report is not None else {},
        num_samples=len(samples.y),
    )
