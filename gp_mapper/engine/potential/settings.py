"""Settings of the three-axis curl-free field model (a scalar potential, streamed by VIPS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..common_settings import COMMON_SETTINGS
from ..model_settings import ModelSettings, setting
from ..setting import Setting, SettingTable
from ..vips.settings import SETTINGS as VIPS_SETTINGS

POTENTIAL = ("potential",)


@dataclass(frozen=True)
class PotentialSettings(ModelSettings):
    """The three-axis potential model's settings (parameters ``potential.*``)."""

    NAMESPACE: ClassVar[str] = "potential"
    MODELS: ClassVar[tuple[str, ...]] = POTENTIAL

    # fmt: off
    # On the Aalto data (θ fixed) the bound with every candidate was 7 nats under the exact
    # evidence at 0.25 ℓ, 98 at 0.5 ℓ; 0.03-0.1 ℓ only pins the directions less well.
    offset: float = setting(0.25, "float",
            "potential model: radius of the tetrahedron of inducing candidates around each "
            "reading, in lengthscales (φ at the reading itself says nothing of B there)",
            min=0.05, max=5.0, models=POTENTIAL,
            legacy="potential_offset")
    inducing: str = setting("vips", "str",
            "potential model's inducing variables: vips = potential points chosen by VIPS; "
            "readings = every reading's three components (the exact vector GP at fixed θ, "
            "O((3N)³): for tests and short logs)",
            choices=("vips", "readings"), read_only=True, models=POTENTIAL,
            legacy="potential_inducing")
    hard_iron_variance: float = setting(0.0, "float",
            "potential model: prior variance [µT²] of each device-frame component of the "
            "magnetometer's own offset (hard iron), estimated with the map from the pose "
            "orientations and left out of the published map; 0 leaves it out",
            min=0.0, max=1e6, models=POTENTIAL,
            legacy="hard_iron_variance")
    # fmt: on


# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = PotentialSettings.rows()
SECTION = PotentialSettings

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, VIPS_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
