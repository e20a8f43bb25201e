"""Settings of the additive GP: components, posterior form, rank, inducing points.

The model of Adam, Durrande & John 2018.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable
from ..vips.settings import SETTINGS as VIPS_SETTINGS

GAM = ("gam",)
# Settings the streaming additive model reads too.
GAM_BOTH = ("gam", "gam_stream")
GAM_STREAM = ("gam_stream",)

# The magnetometer's additive components (our design, not the paper's), in the order the
# model holds them: the map layer (offset + map) first, then the nuisance the map is cleaned of.
GAM_COMPONENT_NAMES = ("offset", "map", "heading", "run", "drift")
# The components published as the map (grids, predict); the rest are nuisance, removed.
GAM_MAP_LAYER = ("offset", "map")


@dataclass(frozen=True)
class GamSettings(ModelSettings):
    """The additive GP's settings, batch and streamed (parameters ``gam.*``)."""

    NAMESPACE: ClassVar[str] = "gam"
    MODELS: ClassVar[tuple[str, ...]] = GAM

    # fmt: off
    components: str = setting("offset+map", "str",
            "additive components joined by '+': offset (a constant; its variance is "
            "constant_variance), map (the kernel setting on x, y; required), heading (the "
            "compass-deviation curve in the yaw), run (one offset per run, runs split at time "
            "gaps of gam.run_gap; gam_stream: per run after the first), drift (Matérn-3/2 in "
            "time: zero-mean over the log for gam; gam_stream: zero at the first reading, on "
            "sliding inducing times); the map published is offset + map, the others are "
            "removed from it",
            pattern=r"[a-z_]+(\+[a-z_]+)*", read_only=True, models=GAM_BOTH,
            legacy="components")
    posterior: str = setting("coupled_precision", "str",
            "q over the inducing values: coupled_precision (the paper's K_UU⁻¹ + BBᵀ of rank "
            "gam.rank), full_coupled (one full Gaussian, Titsias' optimum), mean_field (one "
            "Gaussian per component)",
            choices=("coupled_precision", "full_coupled", "mean_field"), models=GAM,
            legacy="gam_posterior")
    rank: int = setting(0, "int",
            "R: rank of B in the precision form; 0 = min(M_tot, 2 · max M_c) (Adam, "
            "Durrande & John 2018 fix R = M, which can lose thousands of nats)",
            min=0, max=100000, models=GAM,
            legacy="gam_rank")
    map_inducing: int = setting(256, "int",
            "inducing points of the map component, drawn from the log (seeded) [points]",
            min=1, max=100000, models=GAM,
            legacy="gam_map_inducing")
    iterations: int = setting(500, "int",
            "L-BFGS iterations of the fit (B of the precision form, and θ unless "
            "fit_iterations = 0, which keeps θ) [iterations]",
            min=0, max=100000, models=GAM,
            legacy="gam_iterations")
    heading_variance: float = setting(1.0, "float",
            "initial prior variance of the heading curve's first- and second-harmonic "
            "coefficients [µT²]",
            min=1e-6, max=1e6, models=GAM_BOTH,
            legacy="gam_heading_variance")
    run_variance: float = setting(1.0, "float",
            "initial prior variance of each run's offset [µT²]",
            min=1e-6, max=1e6, models=GAM_BOTH,
            legacy="gam_run_variance")
    run_gap: float = setting(5.0, "float",
            "a time gap between samples at least this long starts a new run (gp-mapper convert "
            "aalto lays its runs 5 s apart) [s]",
            min=1e-3, max=1e7, models=GAM_BOTH,
            legacy="gam_run_gap")
    drift_variance: float = setting(1.0, "float",
            "initial variance of the drift in time [µT²]",
            min=1e-6, max=1e6, models=GAM_BOTH,
            legacy="gam_drift_variance")
    drift_lengthscale: float = setting(120.0, "float",
            "initial lengthscale of the drift in time [s]",
            min=1e-3, max=1e7, models=GAM_BOTH,
            legacy="gam_drift_lengthscale")
    drift_inducing: int = setting(32, "int",
            "inducing times of the drift, evenly spaced over the log [points]",
            min=2, max=100000, models=GAM,
            legacy="gam_drift_inducing")
    drift_spacing: float = setting(60.0, "float",
            "streamed additive map (gam_stream): seconds between the drift's inducing times [s]",
            min=1e-3, max=1e7, models=GAM_STREAM,
            legacy="gam_drift_spacing")
    drift_window: float = setting(1800.0, "float",
            "streamed additive map (gam_stream): the drift keeps inducing times this far back "
            "from the newest reading; older ones leave the set [s]",
            min=1e-3, max=1e8, models=GAM_STREAM,
            legacy="gam_drift_window")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = GamSettings.rows()
SECTION = GamSettings


def parse_components(text: str) -> tuple[str, ...]:
    """The component names of a ``gam.components`` value, in :data:`GAM_COMPONENT_NAMES` order.

    Raises:
        ValueError: an empty or unknown name, a repeated one, or no ``map``.
    """
    names = [part.strip() for part in text.split("+")]
    unknown = [n for n in names if n not in GAM_COMPONENT_NAMES]
    if unknown:
        raise ValueError(
            f"components: unknown component(s) {', '.join(repr(n) for n in unknown)} in "
            f"{text!r}; choose from {', '.join(GAM_COMPONENT_NAMES)} joined by '+'"
        )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"components: {', '.join(repeated)} given more than once in {text!r}")
    if "map" not in names:
        raise ValueError(f"components: {text!r} has no map (the component that is the map)")
    return tuple(n for n in GAM_COMPONENT_NAMES if n in names)


# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, VIPS_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
