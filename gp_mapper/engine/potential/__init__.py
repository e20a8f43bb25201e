"""Three-axis field maps from a curl-free scalar potential, streamed by VIPS.

The field is B = −∇φ + E: φ a stationary GP (SE or Matérn-5/2), E the uniform Earth field. The
kernel (``kernel.py``) gives every covariance of potential, field and uniform-field functionals in
closed form (the potential model of Solin et al. 2018); the VIPS streaming engine (Pescador-Barrios
et al. 2024) runs over a reading's three components as three scalar observations (``model.py``),
with inducing variables on the potential chosen by VIPS (``selector.py``).
"""

from __future__ import annotations

from .exact import ExactFieldGP
from .functionals import field_rows, field_targets, potential_rows, spatial
from .kernel import EARTH, FIELD, POTENTIAL, CurlFreeKernel
from .model import VectorFieldGP
from .posterior import FieldPosterior, norm_moments
from .selector import FieldPivots, FieldReadings, PotentialVips

__all__ = [
    "EARTH",
    "FIELD",
    "POTENTIAL",
    "CurlFreeKernel",
    "ExactFieldGP",
    "FieldPivots",
    "FieldPosterior",
    "FieldReadings",
    "PotentialVips",
    "VectorFieldGP",
    "field_rows",
    "field_targets",
    "norm_moments",
    "potential_rows",
    "spatial",
]
