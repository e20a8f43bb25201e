"""Settings of the computation-aware GPs (Wenger et al. 2024): CaGP-Opt (``cagp``) and CaGP-CG."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable

CAGP = ("cagp", "cagp_cg")


@dataclass(frozen=True)
class CagpSettings(ModelSettings):
    """The computation-aware GPs' settings, CaGP-Opt's and CaGP-CG's (parameters ``cagp.*``)."""

    NAMESPACE: ClassVar[str] = "cagp"
    MODELS: ClassVar[tuple[str, ...]] = CAGP

    # fmt: off
    actions: int = setting(512, "int",
            "I: the number of actions, the rank of the approximation (the paper: 512 on every "
            "UCI set); at most the number of training points, where the posterior is exact. "
            "cagp: I blocks of about N/I points; cagp_cg: at most I CG steps [actions]",
            min=1, max=100000, models=CAGP,
            legacy="cagp_actions")
    epochs: int = setting(0, "int",
            "full-batch training epochs on the ELBO, each N² kernel evaluations (the paper: "
            "1000 with Adam, 250 for CaGP-CG, 100 with L-BFGS); 0 = no training: θ stays the "
            "pre-fit's, or the initial one without it. 0 chosen on a validation run of a "
            "20 000-reading log: 10 epochs after the pre-fit scored no better and cost 10× "
            "(docs/engine.md) [epochs]",
            min=0, max=100000, models=CAGP,
            legacy="cagp_epochs")
    learning_rate: float = setting(0.1, "float",
            "initial learning rate on the per-datum ELBO, decayed linearly to a tenth over all "
            "epochs (the paper sweeps 1, 0.1, 0.01)",
            min=1.0e-6, max=10.0, models=CAGP,
            legacy="cagp_learning_rate")
    lbfgs: bool = setting(False, "bool",
            "train with L-BFGS in float64 (strong Wolfe line search) instead of Adam",
            models=CAGP,
            legacy="cagp_lbfgs")
    validation: float = setting(0.0, "float",
            "share of the log held out (seeded) to pick the epoch kept and stop early; the "
            "map then rests on the rest; 0 = none",
            min=0.0, max=0.45, models=CAGP,
            legacy="cagp_validation")
    validate_every: int = setting(10, "int",
            "epochs between validation checks [epochs]",
            min=1, max=10000, models=CAGP,
            legacy="cagp_validate_every")
    patience: int = setting(20, "int",
            "validation checks without improvement before stopping; 0 = never stop early "
            "(CaGP-Opt ramps up slowly: Wenger et al. 2024, Fig. 3)",
            min=0, max=10000, models=CAGP,
            legacy="cagp_patience")
    prefit_points: int = setting(1000, "int",
            "before training, fit the hyperparameters by L-BFGS on an exact GP over this many "
            "random samples (SOLVE-GP's pre-fit: a few epochs move them slowly from the "
            "initial guesses); 0 = off, the paper's start [samples]",
            min=0, max=20000, models=CAGP,
            legacy="cagp_prefit_points")
    chunk: int = setting(256, "int",
            "rows per kernel block of K·S and of prediction; memory ~ 8·chunk·N bytes [rows]",
            min=1, max=1000000, models=CAGP,
            legacy="cagp_chunk")
    block_order: str = setting("random", "str",
            "cagp: which points share a block: random (a seeded permutation, the paper's) or "
            "data (contiguous runs of the log in time order: spatially local blocks)",
            choices=("random", "data"), models=("cagp",),
            legacy="cagp_block_order")
    cg_tolerance: float = setting(1.0e-4, "float",
            "cagp_cg: stop CG once the residual is below this share of ‖y‖ (the paper: 1e-4)",
            min=0.0, max=1.0, models=("cagp_cg",),
            legacy="cagp_cg_tolerance")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = CagpSettings.rows()
SECTION = CagpSettings

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
