"""Settings of the computation-aware GPs (Wenger et al. 2024): CaGP-Opt (``cagp``) and CaGP-CG."""

from __future__ import annotations

from ..common_settings import COMMON_SETTINGS
from ..setting import Setting, SettingTable

CAGP = ("cagp", "cagp_cg")

# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = (
    Setting("cagp_actions", 512, "int",
            "I: the number of actions, the rank of the approximation (the paper: 512 on every "
            "UCI set); at most the number of training points, where the posterior is exact. "
            "cagp: I blocks of about N/I points; cagp_cg: at most I CG steps [actions]",
            min=1, max=100000, models=CAGP),
    Setting("cagp_epochs", 0, "int",
            "full-batch training epochs on the ELBO, each N² kernel evaluations (the paper: "
            "1000 with Adam, 250 for CaGP-CG, 100 with L-BFGS); 0 = no training: θ stays the "
            "pre-fit's, or the initial one without it. 0 chosen on a validation run of a "
            "20 000-reading log: 10 epochs after the pre-fit scored no better and cost 10× "
            "(docs/engine.md) [epochs]",
            min=0, max=100000, models=CAGP),
    Setting("cagp_learning_rate", 0.1, "float",
            "initial learning rate on the per-datum ELBO, decayed linearly to a tenth over all "
            "epochs (the paper sweeps 1, 0.1, 0.01)",
            min=1.0e-6, max=10.0, models=CAGP),
    Setting("cagp_lbfgs", False, "bool",
            "train with L-BFGS in float64 (strong Wolfe line search) instead of Adam",
            models=CAGP),
    Setting("cagp_validation", 0.0, "float",
            "share of the log held out (seeded) to pick the epoch kept and stop early; the "
            "map then rests on the rest; 0 = none",
            min=0.0, max=0.45, models=CAGP),
    Setting("cagp_validate_every", 10, "int",
            "epochs between validation checks [epochs]",
            min=1, max=10000, models=CAGP),
    Setting("cagp_patience", 20, "int",
            "validation checks without improvement before stopping; 0 = never stop early "
            "(CaGP-Opt ramps up slowly: Wenger et al. 2024, Fig. 3)",
            min=0, max=10000, models=CAGP),
    Setting("cagp_prefit_points", 1000, "int",
            "before training, fit the hyperparameters by L-BFGS on an exact GP over this many "
            "random samples (SOLVE-GP's pre-fit: a few epochs move them slowly from the "
            "initial guesses); 0 = off, the paper's start [samples]",
            min=0, max=20000, models=CAGP),
    Setting("cagp_chunk", 256, "int",
            "rows per kernel block of K·S and of prediction; memory ~ 8·chunk·N bytes [rows]",
            min=1, max=1000000, models=CAGP),
    Setting("cagp_block_order", "random", "str",
            "cagp: which points share a block: random (a seeded permutation, the paper's) or "
            "data (contiguous runs of the log in time order: spatially local blocks)",
            choices=("random", "data"), models=("cagp",)),
    Setting("cagp_cg_tolerance", 1.0e-4, "float",
            "cagp_cg: stop CG once the residual is below this share of ‖y‖ (the paper: 1e-4)",
            min=0.0, max=1.0, models=("cagp_cg",)),
)  # fmt: skip

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
