"""Settings of SOLVE-GP: inducing set sizes, the variational family, the SVI run.

Defaults are the UCI recipe of Shi, Titsias & Mnih 2020 (App. G.3: minibatch 1024, Adam 0.01,
100 epochs; App. G: no whitening; k-means placement from the authors' notebook) at
M = M2 = 512, which a CPU affords on a map of 10⁵ samples; ``solvegp/model.py`` holds the same
values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable

SOLVEGP = ("solvegp",)


@dataclass(frozen=True)
class SolveGpSettings(ModelSettings):
    """SOLVE-GP's settings (parameters ``solvegp.*``)."""

    NAMESPACE: ClassVar[str] = "solvegp"
    MODELS: ClassVar[tuple[str, ...]] = SOLVEGP

    # fmt: off
    inducing: int = setting(512, "int",
            "M: inducing points Z (the coarse layer; the paper: 1024) [points]",
            min=1, max=100000, models=SOLVEGP,
            legacy="solve_inducing")
    orthogonal: int = setting(512, "int",
            "M2: orthogonal inducing points O (the detail layer; with solvegp.family=full, SVGP "
            "on M + M2 points) [points]",
            min=0, max=100000, models=SOLVEGP,
            legacy="solve_orthogonal")
    family: str = setting("solve", "str",
            "variational family: solve (q block-diagonal over Z and O, Shi et al. 2020 "
            "Sec. 3.3), full (SVGP on Z ∪ O), odvgp (S_v frozen to C_vv)",
            choices=("solve", "full", "odvgp"), models=SOLVEGP,
            legacy="solve_family")
    whiten: bool = setting(False, "bool",
            "parameterise q in the whitened coordinates (Shi et al. 2020 App. F; the paper: off)",
            models=SOLVEGP,
            legacy="solve_whiten")
    batch_size: int = setting(1024, "int", "minibatch size of the SVI steps [samples]",
            min=1, max=10000000, models=SOLVEGP,
            legacy="solve_batch_size")
    epochs: int = setting(100, "int",
            "passes of Adam over the training split; 0 = q from solvegp.warm_start or "
            "solvegp.optimal_q alone",
            min=0, max=100000, models=SOLVEGP,
            legacy="solve_epochs")
    learning_rate: float = setting(0.01, "float", "Adam step size",
            min=1.0e-6, max=1.0, models=SOLVEGP,
            legacy="solve_learning_rate")
    init: str = setting("kmeans", "str",
            "placement of Z and O: kmeans (first M centres to Z, the rest to O) or greedy "
            "(pivoted-Cholesky order)",
            choices=("kmeans", "greedy"), models=SOLVEGP,
            legacy="solve_init")
    validation: float = setting(0.1, "float",
            "fraction of the log held out for early stopping (never test data); 0 = none",
            min=0.0, max=0.9, models=SOLVEGP,
            legacy="solve_validation")
    patience: int = setting(10, "int",
            "epochs without a better validation log-likelihood before the fit stops [epochs]",
            min=1, max=100000, models=SOLVEGP,
            legacy="solve_patience")
    warm_start: bool = setting(True, "bool",
            "start q at its closed-form optimum under the initial θ (off: at the prior, the "
            "paper's start)",
            models=SOLVEGP,
            legacy="solve_warm_start")
    optimal_q: bool = setting(False, "bool",
            "after the epochs, set q to its closed-form optimum at the final θ, Z, O",
            models=SOLVEGP,
            legacy="solve_optimal_q")
    standardise: str = setting("scale", "str",
            "target scaling: scale (divide by the std; the same model, continuable by vips), "
            "centre (also subtract the mean: the UCI protocol, not continuable), none",
            choices=("scale", "centre", "none"), models=SOLVEGP,
            legacy="solve_standardise")
    train_inducing: bool = setting(True, "bool", "Adam moves Z and O", models=SOLVEGP,
            legacy="solve_train_inducing")
    prefit_points: int = setting(1000, "int",
            "before SVI, fit the hyperparameters by L-BFGS on an exact GP over this many random "
            "samples (Adam's few steps per epoch move them slowly from the initial guesses); "
            "0 = off, the paper's start [samples]",
            min=0, max=20000, models=SOLVEGP,
            legacy="solve_prefit_points")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = SolveGpSettings.rows()
SECTION = SolveGpSettings

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
