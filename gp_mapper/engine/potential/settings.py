"""Settings of the three-axis curl-free field model (a scalar potential, streamed by VIPS)."""

from __future__ import annotations

from ..common_settings import COMMON_SETTINGS
from ..setting import Setting, SettingTable
from ..vips.settings import SETTINGS as VIPS_SETTINGS

POTENTIAL = ("potential",)

# This model's rows of the engine's settings table (``gp_mapper.engine.settings``).
SETTINGS: tuple[Setting, ...] = (
    # On the Aalto data (θ fixed) the bound with every candidate was 7 nats under the exact
    # evidence at 0.25 ℓ, 98 at 0.5 ℓ; 0.03-0.1 ℓ only pins the directions less well.
    Setting("potential_offset", 0.25, "float",
            "potential model: radius of the tetrahedron of inducing candidates around each "
            "reading, in lengthscales (φ at the reading itself says nothing of B there)",
            min=0.05, max=5.0, models=POTENTIAL),
    Setting("potential_inducing", "vips", "str",
            "potential model's inducing variables: vips = potential points chosen by VIPS; "
            "readings = every reading's three components (the exact vector GP at fixed θ, "
            "O((3N)³): for tests and short logs)",
            choices=("vips", "readings"), read_only=True, models=POTENTIAL),
    Setting("hard_iron_variance", 0.0, "float",
            "potential model: prior variance [µT²] of each device-frame component of the "
            "magnetometer's own offset (hard iron), estimated with the map from the pose "
            "orientations and left out of the published map; 0 leaves it out",
            min=0.0, max=1e6, models=POTENTIAL),
)  # fmt: skip

# This package's table: its rows and the ones its code reads of others (the model's code reads
# this, never the engine's whole table).
TABLE = SettingTable(COMMON_SETTINGS, VIPS_SETTINGS, SETTINGS)
default, check = TABLE.default, TABLE.check
