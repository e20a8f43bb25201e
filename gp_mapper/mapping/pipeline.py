"""The mapping pipeline: poses and field readings in, map snapshots out.

The ROS node and the offline replay both drive this class. Data flows one way:
readings + poses -> samples (pairing) -> windows (windowing) -> model update (worker thread,
or inline when `background=False`) -> `MapSnapshot` (grid prediction) -> `on_snapshot` and
`latest()`. This module wires the stages and keeps the map's statistics; the stages live in
their own modules: `inputs` (pairing, windowing, drops), `worker` (the single-flight thread),
`map_products` (grid and prediction), `persistence` (map files to models). With provisional
maps a window gives two snapshots: one under the previous hyperparameters as soon as its
inducing points are chosen, then the fitted one. Offline, with `draw_each_window=False`, the
map is drawn once, when `latest()` asks for it, instead of after every window.

Locks: `_input_lock` guards the pairing/windowing side and the drop counts; `_model_lock`
guards the model and the map's counters; `_snapshot_lock` guards the latest snapshot and the
statistics that `diagnostics()` reads, so diagnostics never wait on a model update. The one
nesting is `_model_lock` -> `_snapshot_lock` (a provisional snapshot is published during an
update); nothing takes `_model_lock` while holding another lock.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gp_mapper.engine import build_model, model_names
from gp_mapper.engine.registry import model_kind
from gp_mapper.engine.tiled import UNANCHORED, TiledModel, TileLayout
from gp_mapper.mapping.config import MapperConfig
from gp_mapper.mapping.errors import ConfigError, MapFileError
from gp_mapper.mapping.fit_schedule import FitSchedule
from gp_mapper.mapping.grid import Box, extend_box
from gp_mapper.mapping.inputs import InputRecord, InputStage
from gp_mapper.mapping.map_file import MapData, PathLike, save_map
from gp_mapper.mapping.map_products import (
    MapProducts,
    full_resolution_grid,
    map_grid,
    predict_products,
)
from gp_mapper.mapping.pass_noise import MIN_BETWEEN_PAIRS, PassNoiseEstimator
from gp_mapper.mapping.persistence import load_model_map
from gp_mapper.mapping.records import (
    HEALTH_OK,
    DropCounts,
    FieldReading,
    Pose,
    Transform,
    Window,
    update_health,
)
from gp_mapper.mapping.snapshot import MapSnapshot
from gp_mapper.mapping.windowing import window_model_inputs
from gp_mapper.mapping.worker import SingleFlightWorker, WindowJob

if TYPE_CHECKING:
    from gp_mapper.engine import ModelPosterior, StreamingModel

logger = logging.getLogger(__name__)

# Windows with readings the map could not take between two warnings in the log.
LOST_LOG_EVERY = 20


class MappingPipeline:
    """Continual magnetic-field mapping from pose and magnetometer streams.

    Args:
        config: Every parameter (the node's).
        model: A model to start from; default a fresh one built from `config.engine`.
        background: Run model updates in a worker thread (the node); False runs them inline
            in the caller's thread (offline replay, tests).
        on_snapshot: Called with each new snapshot (in the worker thread when `background`);
            exceptions it raises are logged. A provisional snapshot is handed over during the
            model update, with the model lock held: the callback must not call `save`,
            `load` or `reset`.
        draw_each_window: Draw the map (grids, field, full-resolution products) after every
            window (the node: each is published). False, offline only: draw it when
            `latest()` asks, from the newest committed model. The map is the same; a replay
            that writes only its last map so skips a whole-room drawing per window (half
            of a three-axis replay's time).
        on_commit: Called with the report of each window the map took (the model's update
            report, the window's stamps and its lost readings), drawn or not; exceptions it
            raises are logged.
    """

    def __init__(
        self,
        config: MapperConfig,
        *,
        model: StreamingModel | None = None,
        background: bool = True,
        on_snapshot: Callable[[MapSnapshot], None] | None = None,
        draw_each_window: bool = True,
        on_commit: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if background and not draw_each_window:
            raise ValueError("draw_each_window=False is for offline use (background=False)")
        self._config = config
        self._on_snapshot = on_snapshot
        self._on_commit = on_commit
        self._draw_each_window = draw_each_window
        # Input side (under self._inputs.lock, which is `_input_lock` below).
        self._inputs = InputStage(config)
        self._input_lock = self._inputs.lock
        self._model_lock = threading.Lock()
        self._snapshot_lock = threading.Lock()
        # The map (under _model_lock).
        self._model = model if model is not None else self._new_model()
        self._inputs.await_first_fit(self._model.awaits_first_fit)
        self._schedule = self._new_schedule()
        # pass_noise_variance: auto: the readings the between-pass noise is measured on.
        self._pass_noise = self._new_pass_noise(self._model)
        self._explored_box: Box | None = None
        # The last committed map's posterior and arrays: the next redraws what changed.
        self._drawn: tuple[ModelPosterior, MapProducts] | None = None
        self._drawn_fine: tuple[ModelPosterior, MapProducts] | None = None  # full resolution
        # draw_each_window=False: the committed map not drawn yet (under _model_lock).
        self._undrawn: _Undrawn | None = None
        self._num_samples = 0
        self._stamp_ns = 0
        # Published state and statistics (under _snapshot_lock).
        self._latest: MapSnapshot | None = None
        self._committed: MapSnapshot | None = None  # the newest one that is not provisional
        self._seq = 0
        self._stats: dict[str, Any] = self._fresh_stats(self._model)
        self._resolution_logged = config.resolution
        self._worker = (
            # Windows closing while the model is busy merge into waiting windows of at most
            # merge_limit, so none is dropped; only past backlog_limit are they thinned
            # (counted).
            SingleFlightWorker(
                self._process, merge_cap=config.merge_limit, backlog_cap=config.backlog_limit
            )
            if background
            else None
        )

    @property
    def config(self) -> MapperConfig:
        """The configuration."""
        return self._config

    # ----------------------------------------------------------------- input side

    @property
    def _generation(self) -> int:
        return self._inputs.generation

    def add_pose(self, pose: Pose) -> None:
        """Add a pose (map frame). Cheap; never waits for the model in background mode."""
        with self._input_lock:
            if self._inputs.closed:
                return
            jobs = self._inputs.add_pose(pose)
            self._submit(jobs)
        self._run_inline(jobs)

    def add_field(self, reading: FieldReading) -> None:
        """Add a magnetometer reading; it becomes a sample once a pose brackets its stamp."""
        with self._input_lock:
            if self._inputs.closed:
                return
            jobs = self._inputs.add_field(reading)
            self._submit(jobs)
        self._run_inline(jobs)

    def add_transform(self, transform: Transform, *, static: bool) -> None:
        """Add one TF edge's transform (pose_source tf; ``/tf_static`` when ``static``).
        Cheap; never waits for the model in background mode."""
        with self._input_lock:
            if self._inputs.closed:
                return
            jobs = self._inputs.add_transform(transform, static=static)
            self._submit(jobs)
        self._run_inline(jobs)

    def add(self, record: InputRecord) -> None:
        """Any input record (a reading, a pose, a transform), by its type: a bag's records."""
        with self._input_lock:
            if self._inputs.closed:
                return
            jobs = self._inputs.add(record)
            self._submit(jobs)
        self._run_inline(jobs)

    def flush(self) -> None:
        """End of input: give up on readings still waiting for a pose (no_pose) and close the
        open window now."""
        with self._input_lock:
            if self._inputs.closed:
                return
            jobs = self._inputs.flush()
            self._submit(jobs)
        self._run_inline(jobs)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every handed window has been processed; False on timeout (s)."""
        if self._worker is None:
            return True
        return self._worker.wait_idle(timeout)

    def drops(self) -> DropCounts:
        """A copy of the drop counts."""
        with self._input_lock:
            return self._inputs.drops.copy()

    def _submit(self, jobs: list[WindowJob]) -> None:
        # Under _input_lock, so that windows reach the worker in stamp order.
        if self._worker is None:
            return
        for job in jobs:
            dropped = self._worker.submit(job)
            if dropped:
                self._inputs.drops.window_overflow += dropped
                logger.warning(
                    "model busy: thinned %d samples out of the waiting window (%d so far)",
                    dropped,
                    self._inputs.drops.window_overflow,
                )

    def _run_inline(self, jobs: list[WindowJob]) -> None:
        if self._worker is not None:
            return
        for job in jobs:
            try:
                self._process(job)
            except Exception:  # as in the worker thread: logged, and the map stands
                logger.exception(
                    "processing a window of %d samples failed; the previous map stands",
                    len(job.window.y),
                )

    # ----------------------------------------------------------------- the map

    def _new_schedule(self) -> FitSchedule:
        config = self._config
        return FitSchedule(
            config.fit_first_windows, config.fit_every_windows, config.refit_bound_drop
        )

    def _new_pass_noise(self, model: StreamingModel) -> PassNoiseEstimator | None:
        if not self._config.pass_noise_auto:
            return None
        return PassNoiseEstimator(with_heading="yaw" in model.auxiliary_inputs)

    def _measure_pass_noise(self, model: StreamingModel) -> dict[str, Any]:
        """Before a fit of θ: measure σ²_pass on the readings so far and give it to the model
        (once enough passes overlap; until then the model keeps its own: none for a new map,
        the saved one for a loaded map). Only with a fit: the fitted white noise moves with it,
        while between fits a σ²_pass that fell would leave the map with almost no noise (a
        map started at 1 µT² and measured at 0 between fits went from 0.55 to 5.9 µT on the
        demo's floor)."""
        if self._pass_noise is None:
            return {}
        estimate = self._pass_noise.estimate()
        if estimate.between_pairs >= MIN_BETWEEN_PAIRS:
            model.set_pass_noise_variance(estimate.variance)
        return {
            "pass_noise_variance": float(model.pass_noise_variance),
            "pass_noise_pairs": estimate.between_pairs,
            "pass_noise_length_m": estimate.length,
            "pass_noise_along_variance": estimate.along,
            "pass_noise_white_variance": estimate.white,
        }

    def _new_model(self) -> StreamingModel:
        name = self._config.engine.model
        if model_kind(name) != "streaming":
            raise ConfigError(
                f"model {name!r} is a batch model: fit it with `gp-mapper fit --model {name}`; "
                f"the mapping pipeline streams with a streaming model "
                f"({', '.join(model_names('streaming'))})"
            )
        model = build_model(self._config.engine, input_dim=self._config.input_dims)
        layout = self._config.tile_layout()
        if layout is None:
            return model
        return TiledModel(model, TileLayout(*layout, UNANCHORED))  # centred on the 1st reading

    def _process(self, job: WindowJob) -> None:
        """Update the model with one window and publish the new snapshot.

        With ``provisional_map`` (background only), a first snapshot shows the window under the
        previous hyperparameters as soon as its inducing points are chosen; the fitted one
        follows. The committed map is the same either way. A window that does not re-fit θ
        (``fit_schedule.FitSchedule``) is committed under the current θ at once, in one
        snapshot.
        """
        window = job.window
        n = len(window.y)
        products = None
        undrawn: _Undrawn | None = None  # draw_each_window=False: the map to draw later
        num_support = 0
        lost = 0
        first_map_s: list[float] = []
        with self._input_lock:
            trajectory = self._inputs.trajectory()
        with self._model_lock:
            if job.generation != self._generation:
                return  # reset or load happened since this window closed
            model = self._model
            box = extend_box(self._explored_box, window.X[:, :2])
            # The map's counters if this window is accepted: shown by both snapshots.
            samples, stamp_ns = self._num_samples + n, max(self._stamp_ns, window.end_ns)
            # Re-fit θ on this window or only join it to the map under the current θ.
            decision = self._schedule.decide(int(model.num_updates))
            skip_fit = not decision.fit
            on_selected = None
            # Without a fit the committed map is the provisional one: no need to draw it twice.
            if self._worker is not None and self._config.provisional_map and not skip_fit:

                def on_selected(posterior: ModelPosterior) -> None:
                    # Runs inside model.update: a failure here must not reject the window.
                    try:
                        shown = self._predict(posterior, box)
                        report = {"reason": "provisional", "provisional": 1}
                        if shown is not None and self._publish(
                            shown, trajectory, report, samples, stamp_ns, job, model, True
                        ):
                            first_map_s.append(time.perf_counter() - job.closed_s)
                    except Exception:
                        logger.exception("the provisional map failed; the fitted one follows")

            pass_noise_before = model.pass_noise_variance
            try:
                pass_noise = self._measure_pass_noise(model) if not skip_fit else {}
                X = window_model_inputs(window, model.auxiliary_inputs)
                report = model.update(X, window.y, on_selected, fit=not skip_fit)
                reason = report.reason
                accepted = report.accepted
            except Exception as err:  # counted and logged below; the previous map stands
                logger.exception("model update on %d samples raised", n)
                reason, accepted = f"{type(err).__name__}: {err}", False
            if not accepted:  # the map as it was, its noise too
                model.set_pass_noise_variance(pass_noise_before)
            if accepted:
                self._num_samples, self._stamp_ns, self._explored_box = samples, stamp_ns, box
                bound = report.bound_after_fit
                at_cap = report.m_after >= model.max_inducing
                self._schedule.record(not skip_fit, bound, int(report.n), at_cap)
                fit_stats = {
                    "fits": self._schedule.fits,
                    "last_update_fitted": int(not skip_fit),
                    "last_fit_reason": decision.reason if not skip_fit else "",
                    "bound_per_sample": bound / report.n if bound is not None else math.nan,
                    # An additive model's nuisance estimates (heading curve, drift, run offset).
                    **report.nuisance,
                    **pass_noise,
                }
                self._keep_for_pass_noise(window, X)
                if window.stamps_ns is not None:  # the map's variance keeps the passes' offsets
                    length = float(pass_noise.get("pass_noise_length_m", math.nan))
                    along = float(pass_noise.get("pass_noise_along_variance", math.nan))
                    white = float(pass_noise.get("pass_noise_white_variance", math.nan))
                    model.record_passes(
                        window.X[:, :2], window.stamps_ns / 1e9, length, along, white
                    )
                summary = report.as_dict()
                # Only a model at its cap (a tiled map: tiles at theirs) can leave readings out.
                if at_cap or summary.get("tiles_full"):
                    lost = self._lost_readings(model.posterior, X[:, : self._config.input_dims])
                report_dict = {
                    **summary,
                    "window_start_ns": int(window.start_ns),
                    "window_end_ns": int(window.end_ns),
                    "lost_readings": lost,
                }
                if self._draw_each_window:
                    products = self._draw(model.posterior, box)
                elif model.posterior is not None:
                    undrawn = _Undrawn(trajectory, report_dict, samples, stamp_ns)
                    self._undrawn = undrawn
                    num_support = int(model.posterior.support.shape[0])
            awaiting_fit = model.awaits_first_fit
        with self._input_lock:  # later windows of this map wait until θ has been fitted once
            if job.generation == self._generation:
                self._inputs.await_first_fit(awaiting_fit)
        if not accepted:
            with self._input_lock:
                self._inputs.drops.failed_update += n
            with self._snapshot_lock:
                self._stats["failed_updates"] += 1
                self._stats["last_reason"] = reason
                self._set_health(f"update rejected, the previous map stands: {reason}")
                restored = self._withdraw_provisional(job) if first_map_s else None
            if restored is not None:
                self._notify(restored)
            logger.warning("update on %d samples rejected (%s); the previous map stands", n, reason)
            return
        if report.num_outliers:  # readings the model refused to fit
            with self._input_lock:
                self._inputs.drops.outlier += report.num_outliers
        if products is None and undrawn is None:  # the model took the data, no posterior
            logger.error("update on %d samples accepted without a posterior; no snapshot", n)
            return
        with self._snapshot_lock:
            self._stats.update(fit_stats)
            self._stats["lost_readings"] += lost
            lost_windows = self._stats["lost_windows"] = self._stats["lost_windows"] + bool(lost)
        if lost and lost_windows % LOST_LOG_EVERY == 1:
            logger.warning("%s", _lost_message(report_dict))
        if products is not None:
            self._publish(
                products,
                trajectory,
                report_dict,
                samples,
                stamp_ns,
                job,
                model,
                first_map_s=first_map_s[0] if first_map_s else None,
            )
        else:  # drawn when latest() asks (draw_each_window=False)
            with self._snapshot_lock:
                self._record_commit(report_dict, samples, job, model, num_support, None)
        if self._on_commit is not None:
            try:
                self._on_commit(report_dict)
            except Exception:  # a consumer's bug must not stop the mapping
                logger.exception("on_commit callback raised")

    def _keep_for_pass_noise(self, window: Window, X: np.ndarray) -> None:
        """Keep a window's readings for the pass-noise estimate (only windows the map took)."""
        if self._pass_noise is None or window.stamps_ns is None:
            return
        dims = self._config.input_dims
        yaw = X[:, dims] if self._pass_noise.with_heading else None
        self._pass_noise.add(window.X[:, :dims], window.y, window.stamps_ns / 1e9, yaw)

    def _predict(
        self,
        posterior: ModelPosterior | None,
        explored_box: Box | None,
        previous: tuple[ModelPosterior, MapProducts] | None = None,
    ) -> MapProducts | None:
        grid = map_grid(self._config, explored_box)
        if posterior is None or grid is None:
            return None
        if not math.isclose(grid.resolution_m, self._resolution_logged):
            self._resolution_logged = grid.resolution_m
            logger.warning(
                "the map grid is %d x %d cells at %g m (resolution %g m would exceed "
                "max_cells = %d)",
                grid.width,
                grid.height,
                grid.resolution_m,
                self._config.resolution,
                self._config.max_cells,
            )
        return predict_products(posterior, grid, self._config, previous)

    def _draw(self, posterior: ModelPosterior | None, box: Box | None) -> MapProducts | None:
        """Redraw the committed map where it changed since the last drawing (and the
        full-resolution one); its products, None when there is nothing to draw. Under
        `_model_lock`."""
        products = self._predict(posterior, box, self._drawn)
        if products is not None and posterior is not None:
            self._drawn = (posterior, products)
            self._draw_fine(posterior, box)
        return products

    def _draw_fine(self, posterior: ModelPosterior, explored_box: Box | None) -> None:
        """Redraw the full-resolution map (``full_resolution_cells``) where it changed."""
        grid = full_resolution_grid(self._config, explored_box)
        if grid is None:
            return
        fine = predict_products(posterior, grid, self._config, self._drawn_fine)
        self._drawn_fine = (posterior, fine)

    def _publish(
        self,
        products: MapProducts,
        trajectory: np.ndarray,
        report: dict[str, Any],
        num_samples: int,
        stamp_ns: int,
        job: WindowJob | None,
        model: StreamingModel,
        provisional: bool = False,
        first_map_s: float | None = None,
        record: bool = True,
    ) -> bool:
        """Make a snapshot the latest; False if its window belongs to an earlier generation.

        A provisional snapshot leaves the statistics alone; the fitted one records both
        latencies (window closed -> first map showing it, and -> fitted map), unless
        ``record`` is False (a map drawn after its statistics were recorded).
        """
        with self._snapshot_lock:
            if job is not None and job.generation != self._generation:
                return False
            self._seq += 1
            snapshot = MapSnapshot.from_products(
                products,
                seq=self._seq,
                stamp_ns=stamp_ns,
                trajectory_m=trajectory,
                model=model.name,
                report=report,
                num_samples=num_samples,
                fine=None if self._drawn_fine is None else self._drawn_fine[1],
            )
            self._latest = snapshot
            if not provisional:
                self._committed = snapshot
                if record:
                    self._record_commit(
                        report, num_samples, job, model, snapshot.num_support, first_map_s
                    )
        self._notify(snapshot)
        return True

    def _record_commit(
        self,
        report: dict[str, Any],
        num_samples: int,
        job: WindowJob | None,
        model: StreamingModel,
        num_support: int,
        first_map_s: float | None,
    ) -> None:
        """The statistics of a committed map; under `_snapshot_lock`."""
        stats = self._stats
        stats["updates"] = int(model.num_updates)
        stats["inducing_points"] = num_support
        stats["samples"] = num_samples
        stats["last_reason"] = str(report.get("reason", ""))
        stats["last_update_s"] = float(report.get("seconds_total", math.nan))
        refused = report.get("fit_refused")
        self._set_health(
            f"fitted hyperparameters refused, the window was mapped under the previous "
            f"ones: {refused}"
            if refused
            else _lost_message(report)
            if report.get("lost_readings")
            else ""
        )
        if job is not None:
            fitted = time.perf_counter() - job.closed_s
            stats["last_batch_latency_s"] = fitted if first_map_s is None else first_map_s
            stats["last_fitted_latency_s"] = fitted
            stats["last_batch_samples"] = len(job.window.y)

    def _withdraw_provisional(self, job: WindowJob) -> MapSnapshot | None:
        """The window shown provisionally was rejected: show the committed map again.

        Called under `_snapshot_lock`. The committed map comes back with a new seq, so that
        readers republish it; returns it (None if there was none: the map is empty again).
        """
        if job.generation != self._generation or self._latest is self._committed:
            return None
        self._seq += 1
        committed = self._committed
        self._latest = None if committed is None else dataclasses.replace(committed, seq=self._seq)
        self._committed = self._latest
        logger.warning("withdrew the provisional map of a rejected window")
        return self._latest

    def _notify(self, snapshot: MapSnapshot) -> None:
        if self._on_snapshot is not None:
            try:
                self._on_snapshot(snapshot)
            except Exception:  # a consumer's bug must not stop the mapping
                logger.exception("on_snapshot callback raised")

    def latest(self) -> MapSnapshot | None:
        """The newest snapshot, or None before the first accepted update (with
        ``draw_each_window=False``, the committed map is drawn now if it is not yet)."""
        if not self._draw_each_window:
            self._draw_undrawn()
        with self._snapshot_lock:
            return self._latest

    def _draw_undrawn(self) -> None:
        """Draw the committed map not drawn yet (``draw_each_window=False``)."""
        with self._model_lock:
            undrawn, self._undrawn = self._undrawn, None
            if undrawn is None:
                return
            model = self._model
            products = self._draw(model.posterior, self._explored_box)
            if products is None:
                return
            self._publish(
                products,
                undrawn.trajectory,
                undrawn.report,
                undrawn.num_samples,
                undrawn.stamp_ns,
                None,
                model,
                record=False,
            )

    # ----------------------------------------------------------------- whole-map operations

    def _fresh_stats(self, model: StreamingModel) -> dict[str, Any]:
        return {
            "updates": int(model.num_updates),
            "failed_updates": 0,
            "inducing_points": 0 if model.posterior is None else len(model.posterior.support),
            "model": model.name,
            "samples": 0,
            "last_batch_latency_s": math.nan,
            "last_fitted_latency_s": math.nan,
            "last_batch_samples": 0,
            "last_update_s": math.nan,
            "last_reason": "",
            "fits": 0,
            "last_update_fitted": 0,
            "last_fit_reason": "",
            "bound_per_sample": math.nan,
            "device": str(model.device),
            # σ²_pass [µT²] the model adds, and how many between-pass pairs measured it
            # (0: not measured, or set by hand).
            "pass_noise_variance": float(model.pass_noise_variance),
            "pass_noise_pairs": 0,
            # How far along a pass the between-pass error stays the same [m] (NaN: not
            # measured; a diagnosis, the model does not use it).
            "pass_noise_length_m": math.nan,
            "lost_readings": 0,
            "lost_windows": 0,
            "health": HEALTH_OK,
            "health_message": "",
            "unhealthy_in_a_row": 0,
        }

    def _lost_readings(self, posterior: ModelPosterior | None, X: np.ndarray) -> int:
        """Readings of a window just taken that the map still does not know (their cells would
        be blank): the model is at its cap there. 0 when it took them all."""
        if posterior is None or len(X) == 0:
            return 0
        support = posterior.support
        Xs = torch.as_tensor(X, dtype=support.dtype, device=support.device)
        _, var = posterior.predict(Xs)
        limit = self._config.unknown_variance_ratio * posterior.prior_variance(Xs)
        return int((var > limit).sum())

    def _set_health(self, problem: str) -> None:
        """Record an update's problem ("" if none) in the health statistics; under
        `_snapshot_lock`."""
        stats = self._stats
        stats["unhealthy_in_a_row"], stats["health"], stats["health_message"] = update_health(
            stats["unhealthy_in_a_row"], problem
        )

    def _start_generation(self, trajectory: np.ndarray | None, awaiting_fit: bool) -> None:
        """Forget the open window and waiting windows; they belong to the old map."""
        with self._input_lock:
            self._inputs.new_generation(trajectory, awaiting_fit)
            if self._worker is not None:
                discarded = self._worker.discard_pending()
                if discarded:
                    logger.info("discarded a waiting window of %d samples", discarded)

    def reset(self) -> None:
        """Empty the map: a fresh model from the config; pose history and drop counts stay."""
        model = self._new_model()
        self._start_generation(None, model.awaits_first_fit)
        with self._model_lock:
            self._model = model
            self._schedule = self._new_schedule()
            self._pass_noise = self._new_pass_noise(model)
            self._explored_box = None
            self._drawn = self._drawn_fine = self._undrawn = None
            self._num_samples = 0
            self._stamp_ns = 0
        with self._snapshot_lock:
            self._latest = self._committed = None
            self._stats = self._fresh_stats(model)
        logger.info("map reset")

    def save(self, path: PathLike) -> None:
        """Write the map to `path` atomically (see `map_file.save_map`).

        Raises:
            MapFileError: naming the path and the fault; an existing file is left as it was.
        """
        with self._model_lock:
            state = {k: np.array(v, copy=True) for k, v in self._model.state_dict().items()}
            box, num_samples, stamp_ns = self._explored_box, self._num_samples, self._stamp_ns
        with self._input_lock:
            trajectory = self._inputs.trajectory()
            drops = self._inputs.drops.as_dict()
        data = MapData.of(
            state, self._config.to_dict(), trajectory, box, num_samples, stamp_ns, drops
        )
        save_map(path, data)
        logger.info("map saved to %s (%d samples)", path, num_samples)

    def load(self, path: PathLike) -> None:
        """Replace the map with the one in `path`; mapping then continues on it.

        Windows not yet in the model are discarded. On any failure the current map stands.

        Raises:
            MapFileError: missing, corrupt, truncated, other-version or incompatible file
                (other input_dims or target), or a model state the model refuses.
        """
        model, data = load_model_map(path, self._config)
        try:
            products = self._predict(model.posterior, data.explored_box)
        except Exception as err:  # a state the model accepted but cannot predict from
            raise MapFileError(f"{path}: cannot predict from the saved map: {err}") from err
        self._start_generation(data.trajectory_m, model.awaits_first_fit)
        with self._model_lock:
            self._model = model
            self._schedule = self._new_schedule()
            self._pass_noise = self._new_pass_noise(model)  # the loaded map keeps its own
            self._explored_box = data.explored_box
            self._drawn = None if products is None else (model.posterior, products)
            self._drawn_fine = self._undrawn = None
            if products is not None:
                self._draw_fine(model.posterior, data.explored_box)
            self._num_samples = data.num_samples
            self._stamp_ns = data.stamp_ns
        with self._snapshot_lock:
            self._latest = self._committed = None
            self._stats = self._fresh_stats(model)
            self._stats["samples"] = data.num_samples
        if products is not None:
            with self._input_lock:
                trajectory = self._inputs.trajectory()
            report = {"loaded_from": str(path)}
            self._publish(
                products, trajectory, report, data.num_samples, data.stamp_ns, None, model
            )
        logger.info("map loaded from %s (%d samples)", path, data.num_samples)

    # ----------------------------------------------------------------- status

    def theta(self) -> tuple[dict[str, Any], dict[str, float | list[float]]]:
        """θ of the map as it stands (the model's ``hyperparameters()``, in the node's
        parameter names) and an additive model's nuisance estimates (empty for the others):
        what a fit by streaming hands back. Waits for an update in progress."""
        with self._model_lock:
            return dict(self._model.hyperparameters()), self._model.nuisance_summary()

    def diagnostics(self) -> dict[str, str | int | float]:
        """Flat key -> value status for `/diagnostics` (never waits on a model update).

        Keys: inducing_points, updates, failed_updates, samples, last_batch_latency_s (window
        closed to the first snapshot showing it), last_fitted_latency_s (to the fitted one),
        last_batch_samples, last_update_s (model time),
        last_reason, device, health (OK; WARN after an update rejected or whose fitted
        hyperparameters were refused, ERROR after `UNHEALTHY_FOR_ERROR` in a row),
        health_message (why), unhealthy_in_a_row, seq,
        pending_windows, worker_busy, open_window_samples, pending_readings, poses_buffered
        (transforms, under TF), pose_source (tf or topic), grid_width, grid_height,
        grid_resolution_m, drops_total and drop_<reason> for every `DropCounts` field.
        Scheduling: fits (updates that re-fitted θ), last_update_fitted, last_fit_reason
        (first, schedule, stale), bound_per_sample (nats), merged_windows, pending_samples,
        processing_samples (in the update under way).
        Noise: pass_noise_variance (σ²_pass the model adds [µT²]), pass_noise_pairs (the
        between-pass pairs of readings that measured it, with ``pass_noise_variance: auto``)
        and pass_noise_length_m (how far along a pass that error stays the same [m]).
        An additive model (gam_stream) adds its nuisance estimates [µT]: heading_B .. heading_E
        and heading_sd_max, drift and drift_sd, run, run_offset and run_offset_sd
        (``AdditiveUpdateReport.nuisance``), for the components it has; the three-axis model
        with ``potential.hard_iron_variance`` > 0 the magnetometer's offset in its own frame,
        hard_iron_x .. hard_iron_z and hard_iron_x_sd .. hard_iron_z_sd.
        """
        with self._snapshot_lock:
            out: dict[str, str | int | float] = dict(self._stats)
            latest = self._latest
            out["seq"] = self._seq
        out["grid_width"] = latest.grid.width if latest is not None else 0
        out["grid_height"] = latest.grid.height if latest is not None else 0
        out["grid_resolution_m"] = latest.grid.resolution_m if latest is not None else math.nan
        out["pending_windows"] = self._worker.pending if self._worker is not None else 0
        out["worker_busy"] = int(self._worker.busy) if self._worker is not None else 0
        out["merged_windows"] = self._worker.merged if self._worker is not None else 0
        out["pending_samples"] = self._worker.pending_samples if self._worker is not None else 0
        out["processing_samples"] = (
            self._worker.processing_samples if self._worker is not None else 0
        )
        with self._input_lock:
            out.update(self._inputs.status())
            drops = self._inputs.drops.as_dict()
        out["drops_total"] = sum(drops.values())
        out.update({f"drop_{reason}": count for reason, count in drops.items()})
        out["pose_source"] = self._config.pose_source
        return out

    def close(self) -> None:
        """Stop the worker after the update in progress; later inputs are ignored."""
        with self._input_lock:
            self._inputs.closed = True
        if self._worker is not None:
            self._worker.close()

    def __enter__(self) -> MappingPipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class _Undrawn:
    """What the snapshot of a committed map not drawn yet shows besides the map."""

    trajectory: np.ndarray
    report: dict[str, Any]
    num_samples: int
    stamp_ns: int


def _lost_message(report: dict[str, Any]) -> str:
    """What a window the map could not take says, naming the full tiles of a tiled map."""
    tiles = report.get("tiles_full") or ""
    where = f" in tile(s) {tiles}" if tiles else ""
    return (
        f"the map is full where the robot is: {report.get('lost_readings')} of the window's "
        f"{report.get('n')} readings are not in it (vips.max_inducing reached{where}); raise "
        "vips.max_inducing, or map with tiles (tile_size)" + (" of a smaller size" if tiles else "")
    )
