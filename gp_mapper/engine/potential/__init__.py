"""Three-axis field maps from a curl-free scalar potential, streamed by VIPS.

The field is B = −∇φ + E: φ a stationary GP (SE or Matérn-5/2), E the uniform Earth field. The
kernel (``kernel.py``) gives every covariance of potential, field and uniform-field functionals in
closed form (the potential model of Solin et al. 2018); the VIPS streaming engine (Pescador-Barrios
et al. 2024) runs over a reading's three components as three scalar observations (``model.py``),
with inducing variables on the potential chosen by VIPS (``selector.py``).
"""

from __future__ import annotations

from ..exports import lazy_exports

# Exported name -> the module of this package that defines it (imported on first use).
_EXPORTS = {
    "EARTH": ".kernel",
    "FIELD": ".kernel",
    "POTENTIAL": ".kernel",
    "CurlFreeKernel": ".kernel",
    "ExactFieldGP": ".exact",
    "FieldPivots": ".selector",
    "FieldPosterior": ".posterior",
    "FieldReadings": ".selector",
    "PotentialVips": ".selector",
    "VectorFieldGP": ".model",
    "field_rows": ".functionals",
    "field_targets": ".functionals",
    "norm_moments": ".posterior",
    "potential_rows": ".functionals",
    "spatial": ".functionals",
}
__getattr__ = lazy_exports(__name__, _EXPORTS)
__all__ = list(_EXPORTS)
