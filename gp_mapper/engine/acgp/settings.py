"""Settings of the Adaptive Cholesky GP (Bartels et al. 2023): block sizes, tolerances, budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable

ACGP = ("acgp",)


@dataclass(frozen=True)
class AcgpSettings(ModelSettings):
    """The Adaptive Cholesky GP's settings (parameters ``acgp.*``)."""

    NAMESPACE: ClassVar[str] = "acgp"
    MODELS: ClassVar[tuple[str, ...]] = ACGP

    # fmt: off
    block_size: int = setting(1000, "int",
            "m: points per block of the stopped Cholesky, the sample size of the bound "
            "estimators (the paper: 1000 on its synthetic task, ~10⁴ on UCI) [points]",
            min=2, max=1000000, models=ACGP,
            legacy="acgp_block_size")
    initial_block: int = setting(0, "int",
            "m0: points factored before the first stop check; 0 = acgp.block_size. The "
            "smallest subset kept is m0 + m [points]",
            min=0, max=1000000, models=ACGP,
            legacy="acgp_initial_block")
    rel_tol: float = setting(0.01, "float",
            "r: stop when the relative gap of the evidence bounds falls below this (a target, "
            "not a guarantee: the bounds hold in expectation only, Bartels et al. 2023 "
            "Thm. 2)",
            min=0.0, max=1.0, models=ACGP,
            legacy="acgp_rel_tol")
    abs_tol: float = setting(0.0, "float",
            "also stop when the gap of the evidence bounds falls below this [nats]; 0 = off",
            min=0.0, max=1.0e12, models=ACGP,
            legacy="acgp_abs_tol")
    max_points: int = setting(0, "int",
            "N_max: at most this many points are factored (memory: 8 N_max² bytes); 0 = all",
            min=0, max=10000000, models=ACGP,
            legacy="acgp_max_points")
    refinements: int = setting(100, "int",
            "at most this many restarts of the L-BFGS refinement schedule (restart k stops the "
            "Cholesky at r = (2/3)^(k+1), floored at acgp.rel_tol, and ends at a relative loss "
            "change of (2/3)^(k+1)); fit_iterations bounds the fit; 0 keeps θ",
            min=0, max=1000, models=ACGP,
            legacy="acgp_refinements")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = AcgpSettings.rows()
SECTION = AcgpSettings

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
