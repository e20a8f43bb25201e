"""A map of any size as tiles, each one model of the configured kind (streaming; batch offline).

Kok & Solin (2018, "Scalable magnetic field SLAM in 3D using Gaussian process maps") build a
large magnetic map from local GP maps on a block tiling; this is that idea over the model
interface, so a tile is whatever streaming model the map runs (``vips``, ``gam_stream``,
``potential``), built and updated through :class:`~..model.StreamingModel` alone.

- A window's readings go to every tile that takes them (:meth:`TileLayout.route`); only those
  tiles are updated, so an update costs what the touched tiles cost, however many tiles the
  map has. Each tile holds at most ``max_inducing`` points; the map has no total cap.
- θ is the building's, one for the map: the reference tile's (the last one whose θ was
  fitted). When the fit schedule asks for a fit, θ is refitted in the window's home tile (the
  one holding most of its readings), on that tile's bound, starting from the map's θ; every
  other tile the window touches, and a tile it opens, takes its share under that θ
  (``update(..., theta_of=...)``: its carried posterior moves to it as to a fitted θ). One
  fit a window, as in an untiled map; a tile no window reaches keeps the θ it was last
  updated under until one does.
- The map is the tiles' blend (:class:`~.posterior.BlendedPosterior`): continuous across
  tile edges.
- A window is atomic over the tiles it touches: if one tile refuses it, the tiles that had
  taken it are restored from their states (bit for bit) and the report names the tile.
- With an infinite tile size there is one tile, and the map is that model's, bit for bit.
- The map keeps a record of the passes over each place (:mod:`..core.pass_record`, fed by
  :meth:`TiledModel.record_passes`): its variance holds what their shared offsets leave.
- A tile far from where the map was updated lately (``IDLE_WINDOWS``) keeps only its state:
  memory grows with the building by the tiles' states, not their caches.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..core.pass_record import PassRecord
from ..errors import StateError
from ..model import Hyperparameters, ModelPosterior, StreamingModel
from ..registry import model_entry
from .layout import ONE_TILE, UNANCHORED, TileKey, TileLayout
from .posterior import BlendedPosterior

STATE_FORMAT_VERSION = 1
# Key of the tiled state's layout; its presence marks a tiled state.
LAYOUT_KEY = "tiles.layout"
# A tile at its cap is "full" when a window it takes lands where its latent variance is still
# above this share of the prior's: readings of a place it has no points for, now lost to it.
FULL_VARIANCE_SHARE = 0.5
# A tile none of whose neighbourhood (itself and the 8 tiles around it) a window has touched in
# this many windows keeps only its state: its prediction cache is dropped, and computed again
# (the same numbers, O(M³) once) when the map next predicts there. A minute of the node's 4-s
# windows; the neighbours are kept because the grid redraws what a touched tile changes, its
# overlap with them included.
IDLE_WINDOWS = 15


@dataclass(frozen=True)
class TiledReport:
    """One window through the tiles.

    Attributes:
        accepted: every tile the window touched took it (otherwise none did).
        reason: why it was refused (the tile and its reason), or what limited the selection.
        n: readings in the window.
        m_before, m_after: inducing points of the whole map before and after.
        tiles: tiles of the map after the update.
        touched: the tiles the window went to.
        full: tiles at their cap that took readings where they have no points (lost).
        num_outliers: readings the tiles dropped as outliers (a reading in two tiles counts
            twice).
        bound_after_fit: the touched tiles' bounds at their fitted θ, per reading they took,
            times ``n`` [nats]; None if one has none. A reading in an overlap is in each of its
            tiles' bounds: summed as they are, a window across an edge would have a bound per
            reading two to four times that of a window inside one tile, which the fit schedule
            would read as a stale θ.
        hyperparameters: θ of the reference tile after the update.
        nuisance: the reference tile's nuisance estimates.
        seconds_total: wall time.
        per_tile: each touched tile's report, flat.
        home: the tile that held most of the window (its θ was fitted, if any was); its flat
            report fills in the keys the map's lacks (a refused fit, its bound's terms).
        idle: tiles kept as their state alone after the window (``IDLE_WINDOWS``).
    """

    accepted: bool
    reason: str
    n: int
    m_before: int
    m_after: int
    tiles: int
    touched: tuple[TileKey, ...] = ()
    full: tuple[TileKey, ...] = ()
    num_outliers: int = 0
    bound_after_fit: float | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    nuisance: dict[str, float] = field(default_factory=dict)
    seconds_total: float = 0.0
    per_tile: dict[TileKey, dict[str, Any]] = field(default_factory=dict)
    home: TileKey | None = None
    idle: int = 0

    def as_dict(self) -> dict[str, float | int | str | bool | None]:
        out: dict[str, float | int | str | bool | None] = {
            "accepted": self.accepted,
            "reason": self.reason,
            "n": self.n,
            "m_before": self.m_before,
            "m_after": self.m_after,
            "tiles": self.tiles,
            "tiles_touched": len(self.touched),
            "tiles_full": ",".join(f"{i}_{j}" for i, j in self.full),
            "tiles_idle": self.idle,
            "num_outliers": self.num_outliers,
            "bound_after_fit": self.bound_after_fit,
            "seconds_total": self.seconds_total,
        }
        out.update({k: v for k, v in self.hyperparameters.items() if isinstance(v, float)})
        for key, value in self.per_tile.get(self.home, {}).items():
            out.setdefault(key, value)
        return out


class TiledModel:
    """A map made of tiles of one model kind (see the module docstring): a streaming map, or,
    built by an offline fit from tiles of a batch model, a batch map (``kind``) that is
    predicted from and saved but not updated.

    Args:
        template: a fresh model of the kind and settings every tile runs (its θ is the start).
        layout: the tiles' geometry (:class:`TileLayout`; ``size = inf``: one tile; an
            unanchored origin is centred on the first reading).
    """

    def __init__(self, template: StreamingModel, layout: TileLayout) -> None:
        self.layout = layout.check()
        self._template = template
        # Tiles of a batch model (an offline fit) make a batch map: fitted, not updated.
        self.kind = template.kind
        self.name = template.name
        self.device = template.device
        self.auxiliary_inputs = template.auxiliary_inputs
        self._tiles: dict[TileKey, StreamingModel] = {}
        self._reference: TileKey | None = None
        self._posterior: BlendedPosterior | None = None
        self._report: TiledReport | None = None
        self._num_updates = 0
        # The update count at which a window last touched each tile (this session's).
        self._touched_at: dict[TileKey, int] = {}
        self._passes = PassRecord()

    @classmethod
    def from_tiles(
        cls,
        template: StreamingModel,
        layout: TileLayout,
        tiles: Mapping[TileKey, StreamingModel],
        reference: TileKey,
    ) -> TiledModel:
        """A map of tiles fitted elsewhere (an offline fit); ``reference`` holds the map's θ."""
        tiled = cls(template, layout)
        tiled._tiles = dict(sorted(tiles.items()))
        tiled._reference = reference if reference in tiled._tiles else None
        tiled._num_updates = max((t.num_updates for t in tiles.values()), default=0)
        tiled._posterior = tiled._blend()
        return tiled

    @classmethod
    def one_tile(cls, model: StreamingModel) -> TiledModel:
        """A map of one infinite tile holding ``model`` (a map saved before tiles)."""
        tiled = cls(model.empty_copy(), TileLayout(math.inf, 0.0))
        tiled._tiles[ONE_TILE] = model
        tiled._reference = ONE_TILE
        tiled._num_updates = model.num_updates
        tiled._posterior = tiled._blend()
        return tiled

    # ------------------------------------------------------------------ read-only views
    @property
    def tiles(self) -> Mapping[TileKey, StreamingModel]:
        """The tiles by key (do not update them directly)."""
        return dict(self._tiles)

    @property
    def tile_cap(self) -> int:
        """Inducing points one tile may hold."""
        return int(self._template.max_inducing)

    @property
    def max_inducing(self) -> int:
        """The cap of the map as it stands: every tile's cap (a new tile adds its own)."""
        return self.tile_cap * max(1, len(self._tiles))

    @property
    def posterior(self) -> BlendedPosterior | None:
        return self._posterior

    @property
    def report(self) -> TiledReport | None:
        return self._report

    @property
    def num_updates(self) -> int:
        return self._num_updates

    @property
    def awaits_first_fit(self) -> bool:
        return self._theta_source().awaits_first_fit

    def hyperparameters(self) -> Hyperparameters:
        return self._theta_source().hyperparameters()

    def nuisance_summary(self) -> dict[str, float | list[float]]:
        return self._theta_source().nuisance_summary()

    def predict(self, Xs: Tensor | np.ndarray) -> tuple[Tensor, Tensor]:
        if self._posterior is None:
            raise RuntimeError("the map has no data yet: call update() first")
        dtype = self._posterior.support.dtype
        return self._posterior.predict(torch.as_tensor(Xs, dtype=dtype, device=self.device))

    @property
    def pass_noise_variance(self) -> float:
        return self._template.pass_noise_variance

    def set_pass_noise_variance(self, variance: float) -> None:
        """σ²_pass is the sensor's and the robot's, the building's: every tile and the
        template new tiles are copied from take it."""
        self._template.set_pass_noise_variance(variance)
        for tile in self._tiles.values():
            tile.set_pass_noise_variance(variance)

    def record_passes(
        self,
        xy: np.ndarray,
        t_s: np.ndarray,
        length_m: float = math.nan,
        along_variance: float = math.nan,
        white_variance: float = math.nan,
    ) -> None:
        """Record where and when an accepted window's readings were taken (xy [N, 2] in m,
        t_s [N] in s), the pass error's measured correlation length along the path and, for
        a map of the field vector, its variance along the field, and the sensor's white noise
        measured beside them (NaN: not measured); the map's variance holds what the passes'
        offsets leave from now on."""
        self._passes.add(xy, t_s, length_m, along_variance, white_variance)
        self._posterior = self._blend()

    def release_caches(self) -> None:
        """Every tile's (a tile far from recent windows drops its own on an update)."""
        for tile in self._tiles.values():
            tile.release_caches()

    def empty_copy(self) -> TiledModel:
        """The same layout and settings at the map's θ, with no tiles."""
        return TiledModel(self._theta_source().empty_copy(), self.layout)

    # ------------------------------------------------------------------ the update
    def update(
        self,
        X: Tensor | np.ndarray,
        y: Tensor | np.ndarray,
        on_selected: Callable[[ModelPosterior], None] | None = None,
        *,
        fit: bool = True,
        theta_of: TiledModel | None = None,
    ) -> TiledReport:
        """Give each tile the window's readings it takes; atomic over the tiles touched.
        ``theta_of``: another tiled map whose θ this one takes (``StreamingModel.update``).

        ``on_selected`` is passed to a single touched tile (a provisional map of a window in
        several tiles would be a blend of some updated and some old tiles, so none is shown).
        """
        start = time.perf_counter()
        X_np = X.detach().cpu().numpy() if isinstance(X, Tensor) else np.asarray(X)
        if not self.layout.anchored and len(X_np):  # the first reading centres tile (0, 0)
            self.layout = self.layout.centred_at(X_np[0])
        routes = self.layout.route(X_np)
        m_before = self._num_inducing()
        if not routes:
            return self._refused("the window has no readings", len(X_np), m_before, start)
        single = len(routes) == 1
        # θ is refitted (when the caller asks) in the tile holding most of the window; the
        # others join their share under their θ: one fit a window, as an untiled map, and
        # none on the few readings of an overlap fringe.
        home = max(routes, key=lambda k: (len(routes[k]), k))
        saved: dict[TileKey, dict[str, np.ndarray]] = {}
        updated: dict[TileKey, StreamingModel] = {}
        per_tile: dict[TileKey, dict[str, Any]] = {}
        reports = {}
        # The home tile first: a tile this window opens starts from the θ it has just fitted.
        source = (theta_of or self)._theta_source()
        for key in [home, *(k for k in routes if k != home)]:
            rows = routes[key]
            tile = self._tiles.get(key)
            if tile is None:
                tile = source.empty_copy()
            elif not single and len(updated) < len(routes) - 1:
                saved[key] = tile.state_dict()  # to restore it if a later tile refuses
            idx = torch.as_tensor(rows)
            Xk = X[idx] if isinstance(X, Tensor) else np.asarray(X)[rows]
            yk = y[idx] if isinstance(y, Tensor) else np.asarray(y)[rows]
            report = tile.update(
                Xk, yk, on_selected if single else None, fit=fit and key == home, theta_of=source
            )
            if not report.accepted:
                self._restore(saved, updated)
                reason = f"tile {key[0]}_{key[1]} refused the window: {report.reason}"
                return self._refused(reason, len(X_np), m_before, start)
            updated[key] = tile
            reports[key] = report
            per_tile[key] = report.as_dict()
            if key == home and fit and not tile.awaits_first_fit:
                source = tile
        self._tiles.update(updated)
        if (fit and not updated[home].awaits_first_fit) or self._reference is None:
            self._reference = home  # the newest θ a fit gave is the map's
        self._num_updates += 1
        self._touched_at.update(dict.fromkeys(routes, self._num_updates))
        idle = self._release_idle()
        self._posterior = self._blend()
        bounds = [r.bound_after_fit for r in reports.values()]
        routed = sum(len(rows) for rows in routes.values())
        source = self._theta_source()
        self._report = TiledReport(
            accepted=True,
            reason="; ".join(sorted({r.reason for r in reports.values() if r.reason})),
            n=len(X_np),
            m_before=m_before,
            m_after=self._num_inducing(),
            tiles=len(self._tiles),
            touched=tuple(routes),
            full=self._full_tiles(routes, X_np),
            num_outliers=sum(r.num_outliers for r in reports.values()),
            bound_after_fit=(
                None if any(b is None for b in bounds) else float(sum(bounds)) * len(X_np) / routed
            ),
            hyperparameters=dict(source.hyperparameters()),
            nuisance=dict(source.report.nuisance) if source.report is not None else {},
            seconds_total=time.perf_counter() - start,
            per_tile=per_tile,
            home=home,
            idle=idle,
        )
        return self._report

    def _release_idle(self) -> int:
        """Drop the caches of the tiles no recent window came near; how many tiles that is."""
        recent = [k for k, n in self._touched_at.items() if n > self._num_updates - IDLE_WINDOWS]
        near = {(i + di, j + dj) for i, j in recent for di in (-1, 0, 1) for dj in (-1, 0, 1)}
        idle = [tile for key, tile in self._tiles.items() if key not in near]
        for tile in idle:
            tile.release_caches()
        return len(idle)

    def _restore(
        self, saved: Mapping[TileKey, dict[str, np.ndarray]], updated: Mapping[TileKey, Any]
    ) -> None:
        """Put back every tile this window had changed, from its state before."""
        entry = model_entry(self.name)
        for key in updated:
            if key in saved:
                self._tiles[key] = entry.from_state(saved[key], self.device)

    def _refused(self, reason: str, n: int, m: int, start: float) -> TiledReport:
        self._report = TiledReport(
            accepted=False, reason=reason, n=n, m_before=m, m_after=m, tiles=len(self._tiles),
            hyperparameters=dict(self.hyperparameters()),
            seconds_total=time.perf_counter() - start,
        )  # fmt: skip
        return self._report

    def _full_tiles(self, routes: Mapping[TileKey, np.ndarray], X: np.ndarray) -> tuple:
        """Touched tiles at their cap that took readings where they still know little."""
        full = []
        for key, rows in routes.items():
            tile = self._tiles[key]
            posterior = tile.posterior
            if posterior is None or len(posterior.support) < self.tile_cap:
                continue
            width = X.shape[1] - len(self.auxiliary_inputs)  # the map inputs
            dtype = posterior.support.dtype
            Xk = torch.as_tensor(X[rows, :width], dtype=dtype, device=self.device)
            _, var = posterior.predict(Xk)
            if bool((var > FULL_VARIANCE_SHARE * posterior.prior_variance(Xk)).any()):
                full.append(key)
        return tuple(full)

    def _theta_source(self) -> StreamingModel:
        """The tile a new tile starts from: the last fitted (the template before any)."""
        if self._reference is not None and self._reference in self._tiles:
            return self._tiles[self._reference]
        return self._template

    def _num_inducing(self) -> int:
        return sum(
            0 if t.posterior is None else len(t.posterior.support) for t in self._tiles.values()
        )

    def _blend(self) -> BlendedPosterior | None:
        posteriors = {k: t.posterior for k, t in self._tiles.items() if t.posterior is not None}
        if not posteriors:
            return None
        # Tiles of a batch model (an offline fit) add no pass noise, so no pass error either.
        streaming = self.kind == "streaming" and len(self._passes) > 0
        passes = self._passes.counts(self.pass_noise_variance if streaming else 0.0)
        return BlendedPosterior(self.layout, posteriors, self._reference or ONE_TILE, passes)

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, np.ndarray]:
        """Every tile's state under ``tile.<i>_<j>.``, the layout and the reference tile; the
        ``model`` key names the tiles' model, so a map file says what it maps with."""
        keys = np.array(sorted(self._tiles), dtype=np.int64).reshape(-1, 2)
        layout = self.layout
        origin = layout.origin if layout.anchored and not layout.single else (0.0, 0.0)
        out: dict[str, np.ndarray] = {
            "model": np.array(self.name),
            "tiles.format_version": np.array(STATE_FORMAT_VERSION),
            # Finite numbers only (a map file refuses others): size 0 is one tile, and an
            # origin not placed yet is (0, 0) with "tiles.anchored" false.
            LAYOUT_KEY: np.array([0.0 if layout.single else layout.size, layout.overlap, *origin]),
            "tiles.anchored": np.array(layout.anchored),
            "tiles.keys": keys,
            "tiles.reference": np.array(self._reference if self._reference else (0, 0)),
            "tiles.has_reference": np.array(self._reference is not None),
            "tiles.num_updates": np.array(self._num_updates),
        }
        out.update(self._passes.state_dict())
        for prefix, value in _prefixed("template.", self._template.state_dict()):
            out[prefix] = value
        for key, tile in sorted(self._tiles.items()):
            for name, value in _prefixed(_tile_prefix(key), tile.state_dict()):
                out[name] = value
        return out

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], device: str | torch.device = "auto"
    ) -> TiledModel:
        """Rebuild from :meth:`state_dict` output (each tile by its model's ``from_state``).

        Raises:
            StateError: a missing or malformed field, or a tile its model refuses.
        """
        try:
            version = int(np.asarray(state["tiles.format_version"]))
            if version != STATE_FORMAT_VERSION:
                raise StateError(f"tiled state format {version}, expected {STATE_FORMAT_VERSION}")
            values = [float(v) for v in np.asarray(state[LAYOUT_KEY]).reshape(-1)]
            if len(values) not in (2, 4):  # (size, overlap[, x0, y0]); two: origin (0, 0)
                raise StateError(f"tiled state layout has {len(values)} values, expected 4")
            size, overlap = (values[0] or math.inf), values[1]  # 0: one tile
            origin = (values[2], values[3]) if len(values) == 4 else (0.0, 0.0)
            if not bool(np.asarray(state.get("tiles.anchored", True))):
                origin = UNANCHORED
            name = str(np.asarray(state["model"]))
            entry = model_entry(name)
            template = entry.from_state(_unprefixed(state, "template."), device)
            model = cls(template, TileLayout(size, overlap, origin))
            keys = np.asarray(state["tiles.keys"], dtype=np.int64).reshape(-1, 2)
            for i, j in keys.tolist():
                key = (int(i), int(j))
                model._tiles[key] = entry.from_state(_unprefixed(state, _tile_prefix(key)), device)
            if bool(np.asarray(state["tiles.has_reference"])):
                i, j = np.asarray(state["tiles.reference"], dtype=np.int64).reshape(2).tolist()
                model._reference = (int(i), int(j))
            model._num_updates = int(np.asarray(state["tiles.num_updates"]))
            model._passes = PassRecord.from_state(state)
            model._posterior = model._blend()
        except StateError:
            raise
        except (KeyError, ValueError, TypeError) as err:
            raise StateError(f"tiled state is malformed: {err}") from err
        return model


def is_tiled_state(state: Mapping[str, Any]) -> bool:
    """Whether a state is a tiled map's."""
    return LAYOUT_KEY in state


def _tile_prefix(key: TileKey) -> str:
    return f"tile.{key[0]}_{key[1]}."


def _prefixed(prefix: str, state: Mapping[str, np.ndarray]):
    return ((prefix + k, v) for k, v in state.items())


def _unprefixed(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    found = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if not found:
        raise StateError(f"tiled state has no fields under {prefix!r}")
    return found
