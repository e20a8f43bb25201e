"""Offline tiled maps: each tile's readings streamed through its own model (or, for a batch
model, fitted by it at once), the tiles fitted as independent tasks, serially in this process
or on Ray.

A whole building's log (one bag or many) is paired and thinned as the node would, routed to
tiles (:class:`~gp_mapper.engine.tiled.TileLayout`), and each tile's readings, in stamp order,
are streamed through a model of the configured kind in windows of ``batch_size``. θ is the
building's, one for the map as in the node's: it is fitted first, on the first
``THETA_WINDOWS`` windows of the tile holding the most readings (on the node's fit schedule),
and every tile streams its readings under it and refits nothing (``FIXED_THETA``). Tiles that
refitted θ each on its own drifted apart: on the office floor of ``benchmarks/building.py``
one took a lengthscale of 2.5 m against the others' 0.5–0.8 m and called a block it had
barely walked known. A batch model's tiles fit their own θ from the configured start. So the
tiles are independent tasks of the same inputs whoever runs them: ``workers = 0`` runs them
here one after another, ``workers = N`` on a Ray runtime (a local one started here, or the
cluster at ``ray_address``), and both give the same map bit for bit.

A task is retried once; a tile that still fails is named, and no map is made.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from gp_mapper.engine import build_model, model_from_state
from gp_mapper.engine.tiled import TiledModel, TileLayout
from gp_mapper.mapping.batch_fit import check_memory, check_time
from gp_mapper.mapping.config import MapperConfig, offline_engine
from gp_mapper.mapping.errors import MappingError
from gp_mapper.mapping.fit_schedule import FitSchedule
from gp_mapper.mapping.inputs import CollectedSamples
from gp_mapper.mapping.pass_noise import NOT_MEASURED, measured_pass_noise

# Tasks handed to Ray at once per worker: enough to keep every worker busy while the driver
# collects, few enough that the driver and the object store hold a bounded share of the log.
IN_FLIGHT_PER_WORKER = 2
# Attempts of a tile fit: the first and one retry.
ATTEMPTS = 2
# Windows of the largest tile the building's θ is fitted on before the tiles start from it.
THETA_WINDOWS = 10
# The fit schedule of a streaming tile (first windows, every n windows, bound drop): none,
# the tiles stream under the building's θ.
FIXED_THETA = (0, 0, 0.0)

if TYPE_CHECKING:
    from gp_mapper.engine import EngineSpec

TileKey = tuple[int, int]


class TileFitError(MappingError):
    """Tiles whose fit failed twice; no map was made."""


class TileTask(NamedTuple):
    """What one tile fit needs, all plain arrays (a Ray task pickles it).

    Attributes:
        key: the tile.
        X: [N, D] the tile's model inputs, in stamp order.
        y: [N] or [N, 3] its targets.
        start: the state of an empty model of the map's kind at the start θ.
        batch_size: readings per window.
        schedule: the fit schedule (first windows, every n windows, bound drop).
    """

    key: TileKey
    X: np.ndarray
    y: np.ndarray
    start: dict[str, np.ndarray]
    batch_size: int
    schedule: tuple[int, int, float]


class TiledFit(NamedTuple):
    """A tiled map fitted offline.

    Attributes:
        model: the map (a :class:`~gp_mapper.engine.tiled.TiledModel`).
        report: what the fit did, for ``fit_report.json``.
    """

    model: Any
    report: dict[str, Any]


def fit_tile(task: TileTask) -> dict[str, np.ndarray]:
    """Stream one tile's readings through its model; its state.

    Raises:
        TileFitError: a window the model refused.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread per task: the same numbers in any process
    try:
        return _stream_tile(task)
    finally:
        torch.set_num_threads(threads)  # a fit in this process leaves its setting as it was


def _stream_tile(task: TileTask) -> dict[str, np.ndarray]:
    model = model_from_state(task.start, device="cpu")
    if model.kind == "batch":  # fitted once on the tile's readings, θ its own
        report = model.fit(task.X, task.y)
        if not report.accepted:
            raise TileFitError(f"tile {task.key}: the fit was refused: {report.reason}")
        return model.state_dict()
    schedule = FitSchedule(*task.schedule)
    for rows in _windows(len(task.y), task.batch_size):
        decision = schedule.decide(model.num_updates)
        report = model.update(task.X[rows], task.y[rows], fit=decision.fit)
        if not report.accepted:
            raise TileFitError(f"tile {task.key}: a window was refused: {report.reason}")
        at_cap = report.m_after >= model.max_inducing
        schedule.record(decision.fit, report.bound_after_fit, report.n, at_cap)
    return model.state_dict()


def fit_tiled(
    samples: CollectedSamples,
    config: MapperConfig,
    *,
    spec: EngineSpec | None = None,
    workers: int = 0,
    ray_address: str | None = None,
    progress: Callable[[float, str], None] | None = None,
    max_minutes: float = 0.0,
) -> TiledFit:
    """Fit the tiled map of ``config`` on every sample of a log.

    Args:
        samples: the log's samples, with the model's auxiliary columns, in stamp order.
        config: the mapping parameters (``tile_size`` > 0).
        spec: the tiles' model and its settings (``gp_mapper.mapping.batch_fit.fit_config``:
            a streaming or a batch model); None: the config's streaming model.
        workers: 0 fits the tiles here, one after another; N > 0 on Ray with N workers.
        ray_address: a Ray cluster to join (``ray start --head`` prints it); None starts a
            local runtime for this fit and stops it after.
        progress: called with the share of tiles done and "tiles k/n" (the caller adds an ETA).
        max_minutes: refuse a batch model's fit whose largest tile alone is estimated to take
            longer (``batch_fit.check_time``; 0: no budget).

    Raises:
        TileFitError: tiles that failed twice (named); ConfigError: no tiles configured.
    """

    # The same map from the same log on any machine, under any load.
    config = config.offline()
    spec = offline_engine(config.engine if spec is None else spec)
    layout_values = config.tile_layout()
    if layout_values is None:
        raise MappingError("a tiled fit needs tile_size > 0")
    if not len(samples.y):
        raise MappingError("no sample to fit")
    # Tile (0, 0) centred on the first reading, as a replay of the same log places it.
    layout = TileLayout(*layout_values).check().centred_at(samples.X[0])
    start = time.perf_counter()
    template = build_model(spec, input_dim=config.input_dims)
    routes = layout.route(samples.X)
    if not routes:
        raise MappingError("no sample to fit")
    schedule = (config.fit_first_windows, config.fit_every_windows, config.refit_bound_drop)
    first = max(routes, key=lambda k: (len(routes[k]), k))
    if template.kind == "batch":  # the largest tile must fit in memory and in the budget
        check_memory(spec, len(routes[first]), 0)
        check_time(spec, len(routes[first]), max_minutes)
    # Ray's runtime starts before the driver's own work: its workers import the engine while
    # this process measures the pass noise and fits the building's θ.
    runner = _SerialRunner() if workers <= 0 else _RayRunner(workers, ray_address)
    with runner:
        # pass_noise_variance: auto: measured on the whole log, the building's for every tile.
        pass_noise = measured_pass_noise(samples, config, spec, template)

        def task(key: TileKey, start_state: dict[str, np.ndarray]) -> TileTask:
            rows = routes[key]
            return TileTask(
                key, samples.X[rows], samples.y[rows], start_state, config.batch_size,
                FIXED_THETA,
            )  # fmt: skip

        # The building's θ: fitted here on the first windows of the tile with the most
        # readings; every tile (that one too) then streams under it, all in parallel.
        theta_rows = routes[first][: THETA_WINDOWS * config.batch_size]
        done, done_rows = 0, 0
        all_rows = sum(len(rows) for rows in routes.values())

        def tick(key: TileKey) -> None:
            # The share of the readings fitted, not of the tiles: the largest tiles go first
            # and take longest, so a count of tiles would promise an ETA several times too long.
            nonlocal done, done_rows
            done += 1
            done_rows += len(routes[key])
            if progress is not None:
                progress(done_rows / all_rows, f"tiles {done}/{len(routes)}")

        if template.kind == "batch":  # each tile's fit fits its θ from the configured start
            theta_start = template.state_dict()
        else:
            theta_task = TileTask(
                first, samples.X[theta_rows], samples.y[theta_rows], template.state_dict(),
                config.batch_size, schedule,
            )  # fmt: skip
            fitted = _SerialRunner().run([theta_task], lambda key: None)[first]
            theta_start = model_from_state(fitted, device="cpu").empty_copy().state_dict()
        # The largest tiles first: the last task to start is a small one, so the workers end
        # together (longest-processing-time order); the map does not depend on the order.
        order = sorted(routes, key=lambda k: (-len(routes[k]), k))
        if progress is not None:  # the tiles' work starts now (the caller's ETA counts from it)
            progress(0.0, f"tiles 0/{len(routes)}")
        # A generator: a tile's readings are copied out of the log when its task is handed
        # on, so the driver holds the log and at most the in-flight tiles' copies.
        states = runner.run((task(key, theta_start) for key in order), tick)
    # One memory layout whoever ran the fit (Ray's transport changes strides, and a kernel's
    # rounding can follow them): the same map bit for bit from any runner.
    states = {k: {n: np.array(v, order="C") for n, v in st.items()} for k, st in states.items()}
    tiles = {key: model_from_state(states[key], device="cpu") for key in sorted(states)}
    model = TiledModel.from_tiles(template, layout, tiles, reference=first)
    if template.kind == "streaming":  # as the node's map: the passes over each place
        measured = NOT_MEASURED if pass_noise is None else pass_noise
        model.record_passes(
            samples.X[:, :2], samples.stamps_ns / 1e9, measured.length, measured.along,
            measured.white,
        )  # fmt: skip
    report = {
        "tiles": len(tiles),
        "theta_from_tile": list(first),
        "theta_samples": 0 if template.kind == "batch" else len(theta_rows),
        "workers": workers,
        "ray_address": ray_address,
        "seconds_fit": time.perf_counter() - start,
        "samples_per_tile": {f"{k[0]}_{k[1]}": len(routes[k]) for k in sorted(routes)},
        **({} if pass_noise is None else {"pass_noise": pass_noise.as_dict()}),
        "M_per_tile": {
            f"{k[0]}_{k[1]}": 0 if t.posterior is None else len(t.posterior.support)
            for k, t in tiles.items()
        },
    }
    return TiledFit(model, report)


def _windows(n: int, size: int) -> list[np.ndarray]:
    return [np.arange(i, min(i + size, n)) for i in range(0, n, size)]


class _SerialRunner:
    """The tile fits one after another in this process."""

    def __enter__(self) -> _SerialRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(
        self, tasks: Iterable[TileTask], tick: Callable[[TileKey], None]
    ) -> dict[TileKey, dict[str, np.ndarray]]:
        states, failed = {}, {}
        for task in tasks:
            for attempt in range(ATTEMPTS):
                try:
                    states[task.key] = fit_tile(task)
                    break
                except Exception as err:  # retried once, then named
                    if attempt == ATTEMPTS - 1:
                        failed[task.key] = err
            tick(task.key)
        _raise_failed(failed)
        return states


class RayRuntime:
    """A Ray runtime for tile fits: the local one started here (``workers`` CPUs) or the
    cluster at ``address`` joined, each worker set to import the engine at once; left as it
    was on exit (stopped if started here). A runtime already running is used as it is.

    ``gp-mapper fit`` enters it before reading the bags, so the runtime's start and the
    workers' imports (~6 s here) overlap the reading.

    Attributes:
        warming: the workers' imports (Ray object refs; empty when the runtime was running):
            ``ray.get`` them to wait until the workers are warm.
    """

    def __init__(self, workers: int, address: str | None = None) -> None:
        self.workers = max(int(workers), 1)
        self.address = address
        self.warming: list[Any] = []
        self._started = False

    def __enter__(self) -> RayRuntime:
        import ray

        if ray.is_initialized():
            return self
        if self.address is None:
            ray.init(num_cpus=self.workers, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=self.address, log_to_driver=False)
        self._started = True
        # Each worker imports the engine (torch: seconds) now, while the driver works; the
        # tile fits then reuse the warm processes. Nothing waits on these.
        warm = ray.remote(num_cpus=1)(_import_engine)
        self.warming = [warm.remote() for _ in range(self.workers)]
        return self

    def __exit__(self, *exc: object) -> None:
        import ray

        if self._started:
            ray.shutdown()
            self._started = False


class _RayRunner:
    """The tile fits as Ray tasks, at most ``IN_FLIGHT_PER_WORKER`` per worker at once."""

    def __init__(self, workers: int, address: str | None) -> None:
        self.workers = workers
        self._runtime = RayRuntime(workers, address)

    def __enter__(self) -> _RayRunner:
        import ray

        self._runtime.__enter__()
        self._remote = ray.remote(num_cpus=1, max_retries=ATTEMPTS - 1, retry_exceptions=True)(
            fit_tile
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._runtime.__exit__(*exc)

    def run(
        self, tasks: Iterable[TileTask], tick: Callable[[TileKey], None]
    ) -> dict[TileKey, dict[str, np.ndarray]]:
        import ray

        pending = iter(tasks)  # taken one at a time: at most `limit` tiles' data out at once
        in_flight: dict[Any, TileKey] = {}
        states, failed = {}, {}
        limit = IN_FLIGHT_PER_WORKER * self.workers
        while True:
            for task in itertools.islice(pending, limit - len(in_flight)):
                in_flight[self._remote.remote(task)] = task.key
            if not in_flight:  # every task handed on and collected
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in ready:
                key = in_flight.pop(ref)
                try:
                    states[key] = ray.get(ref)
                except Exception as err:  # already retried once by Ray
                    failed[key] = err
                tick(key)
        _raise_failed(failed)
        return states


def _import_engine() -> None:
    import gp_mapper.engine  # noqa: F401  (the import is the work)


def _raise_failed(failed: Mapping[TileKey, BaseException]) -> None:
    if failed:
        names = ", ".join(f"{i}_{j}: {err}" for (i, j), err in sorted(failed.items()))
        raise TileFitError(f"{len(failed)} tile fit(s) failed twice, no map was made: {names}")
