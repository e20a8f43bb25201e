"""Settings of the streaming VIPS model: the selection rule, its thresholds, the size cap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable

VIPS = ("vips",)
# The potential model runs the same VIPS rule and engine over its three-axis observations, the
# streaming additive model over its tagged rows.
VIPS_ENGINE = ("vips", "potential", "gam_stream")
# The models whose engine takes the θ memory (the additive stream fits its θ its own way).
STREAMING_THETA = ("vips", "potential")
# VIPS δ and OIPS ρ are open intervals (0, 1) in the paper; a ROS range is closed, so the table
# stops just inside: δ = 0 would demand the reference bound itself, ρ = 1 never adds a point.
OPEN_INTERVAL_EDGE = 1.0e-6


@dataclass(frozen=True)
class VipsSettings(ModelSettings):
    """The streaming sparse GP's (VIPS) settings, which the potential and the streamed
    additive model read too (parameters ``vips.*``)."""

    NAMESPACE: ClassVar[str] = "vips"
    MODELS: ClassVar[tuple[str, ...]] = VIPS

    # fmt: off
    selector: str = setting("vips", "str", "inducing-point selection rule",
            choices=("vips", "cv", "oips", "fixed"), models=VIPS,
            legacy="selector")
    delta: float = setting(0.035, "float",
            "VIPS tolerance, relative to the gap between the reference and noise bounds "
            "(the paper recommends 0.035)",
            min=OPEN_INTERVAL_EDGE, max=1.0 - OPEN_INTERVAL_EDGE, models=VIPS_ENGINE,
            legacy="delta")
    eta: float = setting(0.06, "float", "conditional-variance stopping threshold [µT²]",
            min=0.0, max=1.0e6, models=VIPS,
            legacy="eta")
    rho: float = setting(0.93, "float", "OIPS correlation threshold",
            min=OPEN_INTERVAL_EDGE, max=1.0 - OPEN_INTERVAL_EDGE, models=VIPS,
            legacy="rho")
    fixed_size: int = setting(100, "int", "inducing points of the fixed selector [points]",
            min=1, max=100000, models=VIPS,
            legacy="fixed_size")
    max_inducing: int = setting(2000, "int", "cap on inducing points [points]",
            min=1, max=100000, models=VIPS_ENGINE,
            legacy="max_inducing")
    hyperprior_scale: float = setting(0.5, "float",
            "log-space std of a weak log-normal hyperprior on the kernel parameters; "
            "0 = maximum likelihood as in the paper",
            min=0.0, max=10.0, models=VIPS_ENGINE,
            legacy="hyperprior_scale")
    # 7: a Gaussian residual passes it with odds of 10¹¹ to one, and a map whose intervals are
    # too narrow by half (our calibration benchmark, ``benchmarks/calibration.py``, once measured
    # 0.80-0.90 coverage of the 95 % interval) still lets through everything within 4.7 true
    # standard deviations.
    outlier_z: float = setting(7.0, "float",
            "a reading whose residual lies more than this many robust standard deviations "
            "outside the map's predictive distribution (the batch's own spread before the "
            "first map) is dropped before the fit, unless its neighbours agree (a real change "
            "of the field); 0 = off, below ~4 good readings go too",
            min=0.0, max=1.0e3, models=VIPS_ENGINE,
            legacy="outlier_z")
    # The engine's default is the paper's (every reading); the node's is in
    # mapping/config.py (NODE_ENGINE_DEFAULTS), chosen on a validation split.
    cell_size: float = setting(0.0, "float",
            "a window's readings within one cell of this many lengthscales are one observation "
            "of their mean, with the noise of a mean of one pass (white noise / count + pass "
            "noise): at 50-200 Hz consecutive readings are one pass over one place, not "
            "independent evidence; 0 = every reading, as in the paper [lengthscales]",
            min=0.0, max=2.0, models=STREAMING_THETA,
            legacy="cell_size")
    theta_memory: bool = setting(False, "bool",
            "carry each fitted window's evidence about the hyperparameters into the next fits "
            "(the curvature of its bound, summed: a Laplace posterior of θ) instead of fitting "
            "each window by its own bound alone, as the paper does; recommended for the "
            "potential model, whose single-window fits inflate the field variance",
            models=STREAMING_THETA,
            legacy="theta_memory")
    # 1000: a fit over the whole map past it takes minutes on a CPU while a 200 Hz stream piles
    # up. 250 cut a building's late fits 8x on the validation floor, but the localizer did worse
    # on the maps it made there (known start 0.77 -> 1.21 m): docs/decisions.md, the office floor.
    local_fit_inducing: int = setting(1000, "int",
            "from this many inducing points on, the hyperparameters are fitted on the bound of "
            "the window's neighbourhood (the inducing points within the kernel's range of it, "
            "at most this many, the nearest, and the old posterior's marginal there) instead "
            "of the whole map's, so a fit's cost stops growing with the map, whatever the "
            "lengthscale (a window with none of them near keeps the hyperparameters); 0 = "
            "always the whole map, as in the paper [points]",
            min=0, max=100000, models=VIPS,
            legacy="local_fit_inducing")
    # 10 s: five 2-s windows of a 200 Hz stream wait behind a fit at most; θ goes on from the
    # best point at the next fit. Early fits (small maps) take well under a second. A replay
    # or an offline fit has no wall-clock budget (MapperConfig.offline): the same bag, the
    # same map, on any machine.
    fit_max_seconds: float = setting(10.0, "float",
            "wall-time budget of one hyperparameter fit in the live node; one that runs out "
            "keeps the best hyperparameters it evaluated, and the next fit goes on from "
            "there; replay and fit run every fit to fit_iterations; 0 = no budget, as in the "
            "paper [s]",
            min=0.0, max=1.0e5, models=VIPS,
            legacy="fit_max_seconds")
    pass_noise_variance: float | str = setting(0.0, "float_or_auto",
            "noise variance added to the fitted one: the part of a reading's error that stays "
            "the same along a pass (heading-dependent calibration residue, pose offset), which "
            "a window cannot tell from the field, so the fit leaves it out; auto = measured "
            "from readings of different passes at the same place as passes accumulate (0 "
            "until enough are seen); 0 = white noise only, as in the paper [µT²]",
            min=0.0, max=1.0e4, models=VIPS_ENGINE,
            legacy="pass_noise_variance")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = VipsSettings.rows()
SECTION = VipsSettings

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
